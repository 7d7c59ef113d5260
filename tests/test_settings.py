from pathlib import Path

import pytest

from daemon.cli import main
from daemon.errors import ConfigError
from daemon.settings import load_settings


def test_unknown_key_is_named(tmp_path: Path) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text('no_such_key = "x"\n')
    with pytest.raises(ConfigError, match="unknown key 'no_such_key'"):
        load_settings(cfg)


def test_wrong_type_names_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text("[dreaming]\nmin_score = 'high'\n")
    with pytest.raises(ConfigError, match=r"dreaming\.min_score"):
        load_settings(cfg)


def test_env_overrides_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text('[dreaming]\ntimezone = "UTC"\n')
    monkeypatch.setenv("MEMORYD_DREAMING__TIMEZONE", "Europe/Berlin")
    assert load_settings(cfg).dreaming.timezone == "Europe/Berlin"


def test_policy_values_are_trimmed_and_empty_dropped(tmp_path: Path) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text(
        '[memory_policy.exclude_sessions]\nhook_external_content_sources = [" gmail ", "", "email"]\n'
    )
    assert load_settings(cfg).memory_policy.exclude_sessions.hook_external_content_sources == [
        "gmail",
        "email",
    ]


def test_config_check_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("state_dir = 42\n")
    assert main(["--config", str(cfg), "config", "check"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "state_dir" in err


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    assert main(["--config", str(tmp_path / "nope.toml"), "config", "check"]) == 2
