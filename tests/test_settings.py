from pathlib import Path

import pytest

from memoryd.cli import main
from memoryd.errors import ConfigError
from memoryd.settings import load_settings


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


def test_an_environment_typo_names_the_variable_not_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text("[ingest]\ninterval_s = 60\n")
    monkeypatch.setenv("MEMORYD_INGEST__INTERVALL_S", "30")
    with pytest.raises(ConfigError) as caught:
        load_settings(cfg)
    assert str(caught.value) == (
        "environment: unknown variable MEMORYD_INGEST__INTERVALL_S (did you mean MEMORYD_INGEST__INTERVAL_S?)"
    )


def test_a_variable_for_an_unknown_section_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_INGSET__INTERVAL_S", "30")
    with pytest.raises(ConfigError, match=r"MEMORYD_INGSET__INTERVAL_S \(did you mean MEMORYD_INGEST__"):
        load_settings(None)


def test_every_unknown_key_is_reported_at_once_with_a_suggestion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text(
        'stat_dir = "x"\nno_such_key = 1\n[dreaming]\nmin_scor = 0.5\n[agents.main]\nworkspac = "w"\n'
    )
    monkeypatch.setenv("MEMORYD_LOCK__TTL", "5")
    with pytest.raises(ConfigError) as caught:
        load_settings(cfg)
    assert str(caught.value) == (
        f"{cfg}: unknown keys 'agents.main.workspac' (did you mean 'agents.main.workspace'?), "
        "'dreaming.min_scor' (did you mean 'dreaming.min_score'?), "
        "'stat_dir' (did you mean 'state_dir'?), 'no_such_key'; "
        "environment: unknown variable MEMORYD_LOCK__TTL (did you mean MEMORYD_LOCK__TTL_MS?)"
    )


def test_environment_variables_set_scalars_lists_and_named_tables_key_by_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text('[daemon]\nhost_id = "from-file"\nmax_jobs = 2\n[agents.main]\nsession_source = "json"\n')
    monkeypatch.setenv("MEMORYD_DAEMON__SCHEDULE", "false")
    monkeypatch.setenv("memoryd_daemon__max_jobs", "7")
    monkeypatch.setenv("MEMORYD_INDEX__SOURCES", '["memory", "sessions"]')
    monkeypatch.setenv("MEMORYD_AGENTS__MAIN__WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("MEMORYD_STATE_DIR", str(tmp_path / "state"))
    settings = load_settings(cfg)
    assert settings.daemon.host_id == "from-file" and settings.daemon.max_jobs == 7
    assert settings.daemon.schedule is False
    assert settings.index.sources == ["memory", "sessions"]
    assert settings.agents["main"].workspace == tmp_path / "ws"
    assert settings.agents["main"].session_source == "json"
    assert settings.state_dir == tmp_path / "state"
    monkeypatch.setenv("MEMORYD_DAEMON__MAX_JOBS", "many")
    monkeypatch.delenv("memoryd_daemon__max_jobs")
    with pytest.raises(
        ConfigError, match="^environment: MEMORYD_DAEMON__MAX_JOBS: Input should be a valid integer"
    ):
        load_settings(cfg)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[ingest]\ninterval_s = 0", "ingest.interval_s: Input should be greater than 0"),
        (
            "[ingest]\nwatch_settle_ms = 20000",
            "ingest.watch_settle_ms: Input should be less than or equal to 10000",
        ),
        ("[lock]\nttl_ms = 10", "lock.ttl_ms: Input should be greater than or equal to 1000"),
        (
            "[ingest]\nmax_messages_per_sweep = 5.5",
            "Input should be a valid integer, got a number with a fractional part",
        ),
        (
            "[ingest]\nwatch = 'maybe'",
            "ingest.watch: Input should be a valid boolean, unable to interpret input",
        ),
        ("[index]\nsources = ['memory', 'x']", "index.sources.1: Input should be 'memory' or 'sessions'"),
        ("[index.embedding]\nprovider = 'foo'", "Input should be 'none', 'hashing' or 'openai'"),
        (
            "[dreaming]\ntimezone = 'Mars/Base'",
            "dreaming.timezone: Value error, unknown time zone 'Mars/Base'",
        ),
        ("ingest = 5", "ingest: Input should be a valid dictionary or instance of IngestSettings"),
        ("redis_url = 5", "redis_url: Input should be a valid string"),
        (
            "[agents.main]\nsession_source = 'db'",
            "agents.main.session_source: Input should be 'auto', 'json' or 'openclaw'",
        ),
    ],
)
def test_a_bad_value_is_named_with_its_key_and_what_was_expected(
    tmp_path: Path, toml: str, message: str
) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text(toml + "\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(cfg)
    assert str(caught.value).startswith(f"{cfg}: ") and message in str(caught.value)


def test_every_bad_value_is_reported_at_once_in_the_order_of_the_keys(tmp_path: Path) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text("[lock]\nttl_ms = 10\n[ingest]\ninterval_s = 0\nwatch = 2\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(cfg)
    assert str(caught.value) == (
        f"{cfg}: ingest.interval_s: Input should be greater than 0; "
        f"{cfg}: ingest.watch: Input should be a valid boolean, unable to interpret input; "
        f"{cfg}: lock.ttl_ms: Input should be greater than or equal to 1000"
    )


def test_values_are_converted_as_before_from_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "m.toml"
    cfg.write_text("[ingest]\ninterval_s = 5\nmax_messages_per_sweep = 7.0\n")
    monkeypatch.setenv("MEMORYD_INGEST__WATCH", "off")
    monkeypatch.setenv("MEMORYD_RETENTION__EXPIRED_PURGE_AFTER_DAYS", " 3 ")
    settings = load_settings(cfg)
    assert settings.ingest.interval_s == 5.0 and isinstance(settings.ingest.interval_s, float)
    assert settings.ingest.max_messages_per_sweep == 7 and isinstance(
        settings.ingest.max_messages_per_sweep, int
    )
    assert settings.ingest.watch is False and settings.retention.expired_purge_after_days == 3


def test_loading_settings_imports_no_pydantic(tmp_path: Path) -> None:
    # Every command loads settings first: pydantic and its models were a third of a start-up.
    import subprocess
    import sys

    cfg = tmp_path / "m.toml"
    cfg.write_text("[dreaming]\ntimezone = 'Europe/Berlin'\n")
    code = (
        "import sys\nfrom memoryd.settings import load_settings, settings_as_dict\n"
        f"settings_as_dict(load_settings({str(cfg)!r}))\n"
        "print(any(m.split('.')[0] in ('pydantic', 'pydantic_core') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
