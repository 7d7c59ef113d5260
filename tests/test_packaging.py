"""How the project is installed and tested: bounded dependencies, and a hung test times out."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def test_a_hung_test_times_out(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.hasplugin("timeout")
    assert float(request.config.getini("timeout")) >= 120  # generous for a loaded 2-core machine


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def test_every_dependency_has_an_upper_bound() -> None:
    unbounded = [
        str(r) for r in _requirements() if not any(s.operator in ("<", "<=", "==", "~=") for s in r.specifier)
    ]
    assert unbounded == []
