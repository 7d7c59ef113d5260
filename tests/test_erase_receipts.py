"""Receipts that cannot lie (issue 16 item 3): camelCase JSON, `not_found` for a subject
nobody wrote, `skipped` (never `passed`) for a check without a subject, and a stored receipt
that holds no path, id or text of the subject."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.cli import main
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import erasure
from memoryd.retention import api
from memoryd.retention.api import EraseRequest
from memoryd.retention.state import retention_db_path
from memoryd.settings import Settings
from tests.erase_world import build_world

USER = "tenant:default:user:nora"
NOTE = "nora keeps the spare bicycle key in the blue enamel tin"


def _config(tmp_path: Path, settings: Settings) -> Path:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(
        f'state_dir = "{settings.state_dir}"\nsessions_root = "{settings.sessions_root}"\n'
        f'redis_url = "{settings.redis_url}"\n\n[daemon]\nhost_id = "{settings.daemon.host_id}"\n'
    )
    return cfg


def _cli(capsys: pytest.CaptureFixture[str], cfg: Path, *args: str) -> tuple[int, dict]:
    code = main(["--config", str(cfg), *args, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else {"stderr": out.err}


async def test_erase_and_receipts_json_are_camel_case(tmp_path, settings, redis, capsys) -> None:
    import anyio

    await api.write_object(settings, redis, USER, NOTE)
    cfg = _config(tmp_path, settings)

    code, receipt = await anyio.to_thread.run_sync(lambda: _cli(capsys, cfg, "erase", "--scope", USER))
    assert code == 0, receipt
    assert list(receipt)[:6] == ["receiptId", "requestId", "day", "state", "dryRun", "resumed"]
    assert {"structuralDeleted", "provenanceRewritten", "holdBlocked"} <= set(receipt)
    assert {"provenanceEdges", "forgottenRecordsHashed", "sharedSessionsRemoved"} <= set(receipt["artifacts"])
    assert receipt["verification"]["receiptId"] == receipt["receiptId"]

    code, listed = await anyio.to_thread.run_sync(lambda: _cli(capsys, cfg, "receipts"))
    assert code == 0
    assert listed["receipts"][0]["receiptId"] == receipt["receiptId"]
    assert "structural_deleted" not in json.dumps(listed)


async def test_a_scope_nobody_wrote_is_not_found_never_complete(tmp_path, settings, redis, capsys) -> None:
    import anyio

    await api.write_object(settings, redis, USER, NOTE)  # someone else exists
    cfg = _config(tmp_path, settings)

    code, out = await anyio.to_thread.run_sync(
        lambda: _cli(capsys, cfg, "erase", "--scope", "tenant:default:user:nobody-here")
    )

    assert code == 2
    assert out["state"] == "not_found" and out["verified"] is False
    assert out["structuralDeleted"] == 0
    stored = (await api.list_receipts(settings)).receipts
    assert [r.state for r in stored] == ["not_found"]
    assert (await api.read_scope(settings, USER)).state == "live"  # nothing else was touched


async def test_verify_without_a_subject_skips_the_subject_checks_instead_of_passing_them(
    tmp_path, settings, redis, capsys
) -> None:
    import anyio

    await api.write_object(settings, redis, USER, NOTE)
    cfg = _config(tmp_path, settings)

    code, out = await anyio.to_thread.run_sync(lambda: _cli(capsys, cfg, "verify"))

    assert code == 0  # nothing failed
    status = {c["name"]: c["status"] for c in out["checks"]}
    assert status["derivability"] == "skipped"
    assert status["provenance_invariant"] == "passed"
    assert out["verified"] is False  # a skipped check is not a pass


async def test_a_stored_receipt_holds_no_path_naming_the_subject(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    await api.write_object(settings, redis, USER, NOTE)
    # A hand-written note no lineage reaches, in a file named after the subject: residue.
    notes = settings.workspace_for("main") / "memory" / "nora-private-notes.md"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text(f"- {NOTE}\n")

    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=USER))

    assert receipt.state == "complete" and not receipt.verified
    derivability = next(c for c in receipt.verification.checks if c.name == "derivability")  # type: ignore[union-attr]
    assert "agent main:workspace/memory/nora-private-notes.md" in derivability.locations  # the caller sees it
    stored = (await api.list_receipts(settings)).receipts[0]
    stored_check = next(c for c in stored.verification.checks if c.name == "derivability")  # type: ignore[union-attr]
    assert stored_check.locations == ["agent main:workspace file"]
    raw = retention_db_path(settings).read_bytes()
    assert b"nora-private-notes" not in raw and b"nora" not in raw
