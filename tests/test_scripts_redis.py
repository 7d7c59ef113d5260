"""The scripts an operator runs first, pointed at another Redis by one variable,
MEMORYD_REDIS_URL: deploy/ensure-redis.sh checks (and, on this machine only, starts) the Redis
it names and says in one line what is wrong; the quickstart stops there; .ci/run runs the CLI
contract against the tests' Redis and says when the contract is absent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REDIS_URL

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")} | env
    return subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, timeout=120)


needs_redis_cli = pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")


@needs_redis_cli
def test_ensure_redis_accepts_the_redis_memoryd_redis_url_names() -> None:
    done = _run(["bash", "deploy/ensure-redis.sh"], {"MEMORYD_REDIS_URL": REDIS_URL})
    assert done.returncode == 0, done.stderr


@needs_redis_cli
def test_ensure_redis_names_a_remote_redis_that_does_not_answer_and_starts_nothing() -> None:
    done = _run(
        ["bash", "deploy/ensure-redis.sh"], {"MEMORYD_REDIS_URL": "redis://nosuchhost.invalid:6390/0"}
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "ensure-redis: no Redis answers at nosuchhost.invalid:6390 (MEMORYD_REDIS_URL); "
        "start it there or point MEMORYD_REDIS_URL at one"
    ]


@needs_redis_cli
def test_ensure_redis_says_a_redis_refused_the_credentials_without_showing_them() -> None:
    host_port = REDIS_URL.split("://", 1)[1].split("/", 1)[0]
    done = _run(
        ["bash", "deploy/ensure-redis.sh"], {"MEMORYD_REDIS_URL": f"redis://nobody:s3cret@{host_port}/0"}
    )
    assert done.returncode == 1
    assert f"the Redis at {host_port} refused MEMORYD_REDIS_URL" in done.stderr
    assert "s3cret" not in done.stderr


@needs_redis_cli
def test_quickstart_checks_the_redis_of_memoryd_redis_url_before_writing_anything(tmp_path: Path) -> None:
    env = {
        "MEMORYD_REDIS_URL": "redis://nosuchhost.invalid:6390/0",
        "MEMORYD_DEMO_DIR": str(tmp_path / "demo"),
    }
    done = _run(["bash", "deploy/quickstart.sh", "--skip-setup"], env)
    assert done.returncode == 1
    assert "nosuchhost.invalid:6390" in done.stderr
    assert not (tmp_path / "demo").exists()


def _ci_copy(tmp_path: Path) -> Path:
    """This clone's .ci/run in a clone of its own (its venv linked), with no ../shared beside it."""
    clone = tmp_path / "clone"
    (clone / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", clone / ".ci" / "run")
    (clone / ".venv").symlink_to(Path(sys.prefix))
    return clone


def test_ci_says_when_the_cli_contract_is_absent(tmp_path: Path) -> None:
    clone = _ci_copy(tmp_path)
    done = _run(["bash", ".ci/run", "contract"], {}, cwd=clone)
    assert done.returncode == 0, done.stderr
    assert "CLI contract not run: ../shared/acceptance/cli_contract.py not found" in done.stdout


def test_ci_runs_the_cli_contract_against_the_tests_redis(tmp_path: Path) -> None:
    clone = _ci_copy(tmp_path)
    contract = tmp_path / "shared" / "acceptance" / "cli_contract.py"
    contract.parent.mkdir(parents=True)
    contract.write_text("import os, sys\nprint('redis', os.environ['MEMORYD_REDIS_URL'], sys.argv[1:])\n")
    done = _run(["bash", ".ci/run", "contract"], {"MEMORYD_TEST_REDIS_URL": REDIS_URL}, cwd=clone)
    assert done.returncode == 0, done.stderr
    assert f"redis {REDIS_URL} ['--memoryd'," in done.stdout
    done = _run(["bash", ".ci/run", "contract"], {"MEMORYD_REDIS_URL": REDIS_URL}, cwd=clone)
    assert f"redis {REDIS_URL} ['--memoryd'," in done.stdout  # the tests' Redis defaults to it
