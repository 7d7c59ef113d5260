"""Payload limits, strict booleans and anchored ids (issue 18, item 12): one validation for every
way a request arrives (Op.parse), so a raw job from another tool is refused in one line like a
CLI call. A 100,001-id forget held the lock for seconds and left an 8 MB result; `"dry_run":"no"`
ran an apply; `main\\n` passed as an agent id."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd.cli import main
from memoryd.constants import MAX_PAYLOAD_BYTES, MAX_SELECTORS
from memoryd.errors import JobPayloadError
from memoryd.ops.registry import OPS, op_named

# A payload each op accepts; the tests change one field of it.
VALID: dict[str, dict[str, Any]] = {
    "forget": {"agent": "main", "sessions": ["s1"]},
    "erase": {"scope": "tenant:t1"},
    "backfill": {"agent": "main"},
    "expire": {},
    "retention_sweep": {},
}


def _valid(name: str) -> dict[str, Any]:
    return dict(VALID.get(name, {"agent": "main"}))


def test_every_ops_sample_payload_is_valid():
    for op in OPS:
        op.contract.parse(_valid(op.contract.name))


@pytest.mark.parametrize("word", ["no", "yes", "false", "0", 1, 0])
def test_a_boolean_field_takes_only_true_or_false(word):
    checked = 0
    for op in OPS:
        for field, info in op.contract.request.model_fields.items():
            if info.annotation is not bool:
                continue
            checked += 1
            with pytest.raises(JobPayloadError, match=f"{op.contract.name}: {field}: .*boolean"):
                op.contract.parse({**_valid(op.contract.name), field: word})
    assert checked >= 3  # forget.dry_run, erase.dry_run and allow_partial, index_sync.force


def test_a_string_for_a_number_is_refused():
    with pytest.raises(JobPayloadError, match="backfill: limit_days"):
        op_named("backfill").contract.parse({"agent": "main", "limit_days": "5"})


@pytest.mark.parametrize("agent", ["main\n", "main\r\n", "\nmain"])
def test_an_agent_id_with_a_newline_is_refused_by_every_agent_op(agent):
    for op in OPS:
        payload = _valid(op.contract.name)
        if "agent" not in payload:
            continue
        with pytest.raises(JobPayloadError, match="invalid agent id"):
            op.contract.parse({**payload, "agent": agent})


def test_a_backfill_day_with_a_trailing_newline_is_refused():
    with pytest.raises(JobPayloadError, match="from_day"):
        op_named("backfill").contract.parse({"agent": "main", "from_day": "2026-01-01\n"})


def test_a_forget_naming_too_many_selectors_is_refused_in_one_line():
    forget = op_named("forget").contract
    forget.parse({"agent": "main", "sessions": [f"s{i}" for i in range(MAX_SELECTORS)]})
    with pytest.raises(JobPayloadError) as err:
        forget.parse({"agent": "main", "sessions": [f"s{i}" for i in range(100_001)]})
    message = str(err.value)
    assert "\n" not in message and f"at most {MAX_SELECTORS}" in message and "100001" in message
    split = {
        "agent": "main",
        "sessions": [f"s{i}" for i in range(MAX_SELECTORS // 2 + 1)],
        "participants": [f"p{i}" for i in range(MAX_SELECTORS // 2)],
    }
    with pytest.raises(JobPayloadError, match=f"at most {MAX_SELECTORS}"):
        forget.parse(split)


def test_a_payload_larger_than_the_limit_is_refused_before_validation():
    big = "x" * 400
    payload = {"agent": "main", "sessions": [f"{big}{i}" for i in range(MAX_PAYLOAD_BYTES // 400 + 10)]}
    with pytest.raises(JobPayloadError, match=f"forget: payload is .* bytes; at most {MAX_PAYLOAD_BYTES}"):
        op_named("forget").contract.parse(payload)


def test_the_cli_refuses_an_agent_id_with_a_trailing_newline(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MEMORYD_STATE_DIR", str(tmp_path))
    code = main(["--config", "/dev/null", "forget", "--agent", "main\n", "--session", "s1", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "invalid agent id" in err and "Traceback" not in err
