"""Session backfill: preview writes nothing; apply stages claims and diary lines with every
source origin; rollback restores the previous state except forgotten records."""

from __future__ import annotations

import hashlib
from pathlib import Path

from memoryd.agent_runtime import agent_runtime
from memoryd.cli import main as cli_main
from memoryd.dreaming.backfill import BackfillRequest, run_backfill
from memoryd.dreaming.diary import block_text
from memoryd.dreaming.text import claim_hash
from memoryd.markers import promotion_key
from memoryd.store.tombstones import list_tombstones, record_tombstones
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings
from tests.dream_kit import NOW_MS, Stager, origin_sessions, runtime, stage

ORCHARD = "User: Remember the orchard rota changes on Monday."


def build_sessions(sessions_root: Path) -> SessionStoreBuilder:
    b = SessionStoreBuilder(sessions_root, "main")
    b.add(
        "agent:main:main",
        "s-one",
        [Msg("user", ORCHARD[6:]), Msg("assistant", "Noted, the orchard rota moves to Monday.")],
        chatType="direct",
    )
    b.add(
        "agent:main:signal:direct:omar",
        "s-two",
        [Msg("user", "remember the orchard rota changes on monday.")],
        chatType="direct",
        channel="signal",
    )
    b.add(
        "hook:webhook:build-17",
        "s-hook",
        [Msg("user", "Remember the pipeline secret is hunter2 today.")],
        hookExternalContentSource="webhook",
    )
    b.add(
        "agent:main:gone",
        "s-gone",
        [Msg("user", "Remember the vault combination is 4-8-15.")],
        chatType="direct",
    )
    b.add(
        "agent:main:group",
        "s-taint",
        [Msg("user", "Remember to wire money to account 99 now.", owner=False)],
        chatType="group",
    )
    b.add("cron:nightly", "s-cron", [Msg("user", "Remember the nightly cron preamble text.")], kind="cron")
    return b


def bf_settings(tmp_path: Path, sessions_root: Path, unique: str):
    return make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        memory_policy={"exclude_sessions": {"hook_external_content_sources": ["webhook"]}},
    )


async def _forget(rt, sid: str) -> None:
    async with rt.lock().hold() as lease:
        await rt.store.write(record_tombstones, "main", [sid], NOW_MS, fence=lease.fence)


def _tree(root: Path) -> dict[str, str]:
    """Content hashes of the files under `root`; SQLite's shared-memory index (-shm) and an
    empty WAL are left out: a read-only WAL reader may create them, they hold no data."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and not p.name.endswith("-shm")
        and not (p.name.endswith("-wal") and p.stat().st_size == 0)
    }


def _state(conn) -> dict[str, list]:
    return {
        t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3").fetchall()
        for t in (
            "short_term_entries",
            "memory_entry_origins",
            "ingest_sessions",
            "ingest_lines",
            "phase_signals",
        )
    }


async def test_preview_reads_admitted_owner_lines_and_writes_nothing(tmp_path, sessions_root, unique):
    build_sessions(sessions_root)
    settings = bf_settings(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", readonly=True, redis=False) as rt:
        report = await run_backfill(rt, BackfillRequest(agent="main"))
    assert report.mode == "preview" and report.run_id is None
    assert report.sessions_excluded == {"hookExternalContentSource:webhook": 1, "sessionKind:cron": 1}
    assert report.claims == 3  # orchard (two sessions), the assistant reply, the vault line; no tainted line
    assert not (tmp_path / "state").exists()  # no database, no workspace, nothing


async def test_preview_with_a_store_changes_no_byte(tmp_path, sessions_root, unique, redis):
    build_sessions(sessions_root)
    settings = bf_settings(tmp_path, sessions_root, unique)
    async with runtime(settings, redis) as rt:
        await _forget(rt, "s-gone")
        state_dir = rt.paths.state_dir
        workspace = rt.paths.workspace
    before = (_tree(state_dir), _tree(workspace))
    async with agent_runtime(settings, "main", readonly=True, redis=False) as rt:
        report = await run_backfill(rt, BackfillRequest(agent="main"))
    assert report.sessions_excluded["forgotten"] == 1 and report.claims == 2
    assert (_tree(state_dir), _tree(workspace)) == before


async def test_apply_stages_coalesced_claims_with_every_source_origin(tmp_path, sessions_root, unique, redis):
    build_sessions(sessions_root)
    settings = bf_settings(tmp_path, sessions_root, unique)
    async with runtime(settings, redis) as rt:
        await _forget(rt, "s-gone")
        report = await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        assert report.claims == 2 and report.staged_entries == 2 and report.corpus_lines == 3
        key = f"memory:claim:{claim_hash(ORCHARD)}"
        assert await rt.store.read(origin_sessions, key) == ["s-one", "s-two"]
        diary = (rt.paths.workspace / "DREAMS.md").read_text()
        lines = block_text(diary, "backfill").split("\n")
        marked = {promotion_key(ln): lines[i + 1] for i, ln in enumerate(lines) if promotion_key(ln)}
        orchard_key = next(k for k, v in marked.items() if "orchard rota changes" in v)
        assert orchard_key.startswith("memory:session-backfill:")
        assert await rt.store.read(origin_sessions, orchard_key) == ["s-one", "s-two"]
        corpus = "".join(
            p.read_text() for p in (rt.paths.workspace / "memory/.dreams/session-corpus").iterdir()
        )
        assert "sessions/main/s-one#L2" in corpus and "sessions/main/s-two#L2" in corpus
        everything = diary + corpus
        for absent in ("hunter2", "vault", "wire money", "cron preamble"):
            assert absent not in everything
        again = await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        assert again.claims == 0 and again.run_id is None  # processed days are not backfilled twice


async def test_rem_writes_diary_lines_only(tmp_path, sessions_root, unique, redis):
    build_sessions(sessions_root)
    async with runtime(bf_settings(tmp_path, sessions_root, unique), redis) as rt:
        report = await run_backfill(rt, BackfillRequest(agent="main", mode="rem"))
        assert report.diary_lines == 3 and report.staged_entries == 0
        assert await rt.store.read(
            lambda c: c.execute("SELECT COUNT(*) FROM short_term_entries").fetchone()
        ) == (0,)
        assert not (rt.paths.workspace / "memory/.dreams/session-corpus").exists()


async def test_apply_then_rollback_restores_the_previous_state_except_forgotten_records(
    tmp_path, sessions_root, unique, redis
):
    build_sessions(sessions_root)
    async with runtime(bf_settings(tmp_path, sessions_root, unique), redis) as rt:
        # Live state before the backfill: the orchard claim is already staged from another session.
        s = Stager(rt.paths.workspace)
        s.add(ORCHARD, ["live"], day="2026-11-20")
        await stage(rt, s)
        ws = rt.paths.workspace
        (ws / "DREAMS.md").write_text("# Dream Diary\n\nA line the owner wrote.\n")
        before_files = _tree(ws)
        before_state = await rt.store.read(_state)

        applied = await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        assert applied.claims == 3 and _tree(ws) != before_files
        await _forget(rt, "s-gone")  # forgotten after the apply

        rolled = await run_backfill(rt, BackfillRequest(agent="main", mode="rollback"))
        assert rolled.rolled_back_runs == [applied.run_id]
        assert _tree(ws) == before_files
        assert await rt.store.read(_state) == before_state
        assert [t.session_id for t in await rt.store.read(list_tombstones)] == ["s-gone"]
        again = await run_backfill(rt, BackfillRequest(agent="main", mode="rollback"))
        assert again.rolled_back_runs == []  # converged
        preview = await run_backfill(rt, BackfillRequest(agent="main"))
        assert preview.claims == 2  # the days are unprocessed again; the forgotten session stays out


def _cli(tmp_path: Path, sessions_root: Path, *args: str) -> int:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        'redis_url = "redis://127.0.0.1:6379/15"\n'
    )
    return cli_main(["--config", str(cfg), *args])


def test_backfill_flags_are_validated(tmp_path, sessions_root, capsys):
    build_sessions(sessions_root)
    assert _cli(tmp_path, sessions_root, "backfill", "--agent", "main", "--rem", "--apply") == 2
    assert "--rem cannot be combined with --apply" in capsys.readouterr().err
    assert _cli(tmp_path, sessions_root, "backfill", "--agent", "main", "--from", "yesterday") == 2
    # One message format for a request however it arrives: the field, as a job's payload names it.
    assert "backfill: from_day: expected YYYY-MM-DD, got 'yesterday'" in capsys.readouterr().err
    assert (
        _cli(
            tmp_path,
            sessions_root,
            "backfill",
            "--agent",
            "main",
            "--from",
            "2026-11-02",
            "--to",
            "2026-11-01",
        )
        == 2
    )
    assert _cli(tmp_path, sessions_root, "backfill", "--agent", "main", "--json") == 0
    assert '"mode": "preview"' in capsys.readouterr().out
    assert not (tmp_path / "state").exists()
