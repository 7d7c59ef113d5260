"""How the project is installed and tested: bounded dependencies, lock files that pin every one
of them within its range, a setup script that fails loudly, and a hung test that times out."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCKS = {"requirements.lock": ("vec",), "requirements-dev.lock": ("vec", "dev")}


def _requirements(extras: tuple[str, ...] | None = None) -> list[Requirement]:
    """pyproject's requirements: the dependencies and the given extras (every extra by default)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    reqs = list(project["dependencies"])
    for name in optional if extras is None else extras:
        reqs += optional[name]
    return [Requirement(r) for r in reqs]


def _pins(lock: str) -> dict[str, str]:
    text = (ROOT / lock).read_text()
    return {
        canonicalize_name(m[1]): m[2]
        for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+?)(?: ;.*)? \\$", text, re.M)
    }


def test_every_dependency_has_an_upper_bound() -> None:
    unbounded = [
        str(r) for r in _requirements() if not any(s.operator in ("<", "<=", "==", "~=") for s in r.specifier)
    ]
    assert unbounded == []


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_the_lock_pins_every_requirement_within_its_range_with_hashes(lock: str) -> None:
    pins = _pins(lock)
    text = (ROOT / lock).read_text()
    assert "--hash=sha256:" in text and "bash deploy/lock.sh" in text
    wrong = [
        f"{r}: {pins.get(canonicalize_name(r.name), 'missing')}"
        for r in _requirements(LOCKS[lock])
        if canonicalize_name(r.name) not in pins or pins[canonicalize_name(r.name)] not in r.specifier
    ]
    assert wrong == [], f"run `bash deploy/lock.sh` after changing pyproject.toml: {wrong}"


def test_the_two_locks_pin_the_same_versions_of_what_both_hold() -> None:
    run, dev = _pins("requirements.lock"), _pins("requirements-dev.lock")
    assert {n: (v, dev.get(n)) for n, v in run.items() if dev.get(n) != v} == {}


def test_setup_fails_loudly() -> None:
    script = (ROOT / "deploy" / "setup.sh").read_text()
    assert "set -euo pipefail" in script
    commands = [ln for ln in script.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert [ln for ln in commands if "|| true" in ln or re.search(r"[^|]\|[^|]", ln)] == []
    assert [ln for ln in commands if "pip install" in ln and ">/dev/null" in ln] == []
    assert '--require-hashes -r "$LOCK"' in script


def test_a_hung_test_times_out(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.hasplugin("timeout")
    assert float(request.config.getini("timeout")) >= 120  # generous for a loaded 2-core machine


def test_no_test_module_imports_another() -> None:
    """Shared setup lives in helper modules (builders, harnesses, kits), never in a test module."""
    offenders = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.test_"):
                offenders.append(f"{path.name}: from {node.module}")
    assert offenders == []


DEV_TOOLS = ("pytest", "ruff", "mypy", "hypothesis", "import-linter", "pip-tools")


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_the_lock_pins_async_timeout_which_redis_needs_before_python_3_11_3(lock: str) -> None:
    # Debian 12's own Python is 3.11.2: without the pin, the hashed install there fails.
    assert "async-timeout" in _pins(lock)


def test_the_runtime_lock_holds_no_dev_tool_and_can_build_memoryd() -> None:
    runtime, dev = _pins("requirements.lock"), _pins("requirements-dev.lock")
    assert [t for t in DEV_TOOLS if t in runtime] == []
    assert "setuptools" in runtime  # the editable install runs without build isolation
    assert [t for t in DEV_TOOLS if t not in dev] == []


def test_the_quickstart_installs_the_runtime_lock_and_ci_the_dev_lock_also_on_debians_python() -> None:
    assert "bash deploy/setup.sh --runtime" in (ROOT / "deploy" / "quickstart.sh").read_text()
    setup = (ROOT / "deploy" / "setup.sh").read_text()
    assert "LOCK=requirements-dev.lock" in setup and "--runtime) LOCK=requirements.lock" in setup
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash deploy/setup.sh\n" in ci and 'PYTHON="$py"' in ci and "/usr/bin/python3" in ci


def test_the_project_is_mit_licensed_by_its_authors() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) the memoryd authors" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
