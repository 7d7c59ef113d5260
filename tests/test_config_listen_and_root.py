"""Settings an operator gets wrong on a first install: a metrics address that cannot be bound
is refused by `config check` with one line (before `run` would die on it), an address with no
host must name one, and a sessions_root that does not exist is warned about wherever it shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.cli import main
from tests.conftest import REDIS_URL
from tests.daemon_harness import cleanup_redis, start_daemon, stop_cleanly


def _config(tmp_path: Path, sessions_root: Path, extra: str = "") -> Path:
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n{extra}'
    )
    return path


@pytest.mark.parametrize("listen", ["localhost:99999", "localhost", "localhost:http", ":"])
def test_an_unbindable_metrics_address_fails_config_check_with_one_line(
    tmp_path: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str], listen: str
) -> None:
    config = _config(tmp_path, sessions_root, f'[daemon]\nmetrics_listen = "{listen}"\n')
    assert main(["--config", str(config), "config", "check"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "daemon.metrics_listen" in err and repr(listen) in err


def test_a_metrics_address_without_a_host_is_refused_naming_both_choices(
    tmp_path: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, sessions_root, '[daemon]\nmetrics_listen = ":9475"\n')
    assert main(["--config", str(config), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert "127.0.0.1:9475" in err and "0.0.0.0:9475" in err


@pytest.mark.parametrize("listen", ["127.0.0.1:9464", "0.0.0.0:0", "[::1]:9464", "localhost:65535"])
def test_a_bindable_metrics_address_passes(
    tmp_path: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str], listen: str
) -> None:
    config = _config(tmp_path, sessions_root, f'[daemon]\nmetrics_listen = "{listen}"\n')
    assert main(["--config", str(config), "config", "check"]) == 0


def test_a_missing_sessions_root_is_warned_about_by_config_check_and_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    config = _config(tmp_path, missing)
    for command in (["config", "check"], ["status"]):
        capsys.readouterr()
        assert main(["--config", str(config), *command]) == 0
        err = capsys.readouterr().err
        assert f"warning: sessions_root {missing} does not exist" in err, command


def test_a_daemon_over_a_missing_sessions_root_logs_a_warning(tmp_path: Path, unique: str) -> None:
    missing = tmp_path / "nowhere"
    host = f"test-{unique}"
    _settings, notify, daemon = start_daemon(tmp_path, missing, REDIS_URL, host)
    try:
        notify.wait_for("READY=1")
        stop_cleanly(daemon)
        assert f"sessions_root {missing} does not exist" in daemon.log()
    finally:
        daemon.kill()
        notify.close()
        cleanup_redis(REDIS_URL, [host], [])
