"""The ingest sweep end to end: real session stores on disk, real SQLite, real Redis lock."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from memoryd.agent_runtime import agent_runtime
from memoryd.errors import LockTimeout, OperationFailed
from memoryd.failpoints import on_failpoint
from memoryd.ingest.report import IngestReport
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.lock import WorkspaceLock
from memoryd.settings import Settings
from memoryd.store.checkpoints import load_checkpoints
from memoryd.store.tombstones import hashed_session_ref, record_tombstones
from tests.builders import Msg, SessionStoreBuilder, conversation
from tests.conftest import make_settings
from tests.ingest_harness import FifoWatch, batches_of, corpus_text, make_fifo
from tests.lineage import ORIGINS

POLICY = {
    "exclude_sessions": {
        "hook_external_content_sources": ["gmail", "email"],
        "channels": ["discord"],
        "chat_types": ["group"],
    }
}


def policy_settings(tmp_path: Path, sessions_root: Path, **overrides: Any) -> Settings:
    return make_settings(tmp_path, sessions_root, memory_policy=POLICY, **overrides)


async def sweep(settings: Settings, redis: Redis, agent: str = "main") -> IngestReport:
    async with agent_runtime(settings, agent, redis=redis) as rt:
        return await run_ingest_sweep(rt)


async def read(settings: Settings, fn: Any, *args: Any, agent: str = "main") -> Any:
    async with agent_runtime(settings, agent, redis=False) as rt:
        return await rt.require_store().read(fn, *args)


def staged_rows(conn: Any) -> list[tuple]:
    return conn.execute(
        "SELECT entry_key, path, start_line, snippet, origin_class, daily_count "
        "FROM short_term_entries ORDER BY entry_key"
    ).fetchall()


def origin_rows(conn: Any) -> list[tuple]:
    return conn.execute(
        f"SELECT entry_key, session_id, session_key, origin_class FROM {ORIGINS} "
        "ORDER BY entry_key, session_id"
    ).fetchall()


async def test_only_admitted_interactive_sessions_are_read_and_excluded_ones_record_why(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = policy_settings(tmp_path, sessions_root)
    b = store_builder
    b.add("agent:main:main", "admitted", conversation("orchard", "admitted"), chatType="direct")
    excluded = {
        "gmail-hook": (
            "hook:gmail:1",
            {"hookExternalContentSource": "gmail"},
            "hookExternalContentSource:gmail",
        ),
        "email-hook": (
            "hook:email:2",
            {"hookExternalContentSource": "email"},
            "hookExternalContentSource:email",
        ),
        "discord-dm": (
            "agent:main:discord:direct:x",
            {"channel": "discord", "chatType": "direct"},
            "channel:discord",
        ),
        "group-chat": (
            "agent:main:slack:group:r",
            {"channel": "slack", "chatType": "group"},
            "chatType:group",
        ),
        "forgotten-one": ("agent:main:telegram:direct:y", {"chatType": "direct"}, "forgotten"),
    }
    for sid, (key, meta, _) in excluded.items():
        b.add(key, sid, write_transcript=False, **meta)
        make_fifo(b.dir / f"{sid}.jsonl")
    ineligible = {
        "cron-run": ("cron:digest", {"sessionKind": "cron"}, "sessionKind:cron"),
        "narrative": ("agent:main:dreaming-narrative-light-1", {}, "dreamingNarrative"),
        "admitted.checkpoint.0b1c": ("agent:main:twin", {}, "checkpointTwin"),
    }
    for sid, (key, meta, _) in ineligible.items():
        b.add(key, sid, write_transcript=False, **meta)
        make_fifo(b.dir / f"{sid}.jsonl")
    b.archive("admitted", messages=[Msg("user", "ARCHIVED words that must never be ingested")])
    async with agent_runtime(settings, "main", redis=False) as rt:
        await rt.require_store().write(record_tombstones, "main", ["forgotten-one"], 1, fence=None)

    fifos = [b.dir / f"{sid}.jsonl" for sid in [*excluded, *ineligible]]
    with FifoWatch(fifos) as watch:
        report = await sweep(settings, redis)
    assert watch.opened == []
    assert report.sessions_seen == 9
    assert report.sessions_scanned == 1
    assert report.messages_staged == 4
    assert report.sessions_excluded == {
        reason: 1 for _, _, reason in [*excluded.values(), *ineligible.values()]
    }
    checkpoints = await read(settings, load_checkpoints, "main")
    by_sid = {cp.session_id: cp for cp in checkpoints.values()}
    for sid, (key, _, reason) in excluded.items():
        cp = by_sid[sid]
        assert (cp.excluded_reason, cp.content_hash, cp.size, cp.session_key) == (reason, "", 0, key)
    assert by_sid["admitted"].excluded_reason is None and by_sid["admitted"].content_hash
    assert by_sid["admitted"].state_key == "main:sessions/main/admitted"
    text = corpus_text(settings)
    assert "orchard" in text and "ARCHIVED" not in text and "POISON" not in text
    assert all(line.startswith("[main/sessions/main/admitted#L") for line in text.splitlines())


async def test_lifting_a_rule_makes_the_excluded_session_eligible_again(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    store_builder.add(
        "hook:gmail:1", "mail", conversation("invoice", "mail"), hookExternalContentSource="gmail"
    )
    first = await sweep(policy_settings(tmp_path, sessions_root), redis)
    assert first.sessions_excluded == {"hookExternalContentSource:gmail": 1} and first.messages_staged == 0
    again = await sweep(policy_settings(tmp_path, sessions_root), redis)
    assert again.messages_staged == 0 and again.sessions_scanned == 0

    lifted = await sweep(make_settings(tmp_path, sessions_root), redis)
    assert lifted.sessions_excluded == {} and lifted.messages_staged == 4
    cp = next(iter((await read(make_settings(tmp_path, sessions_root), load_checkpoints, "main")).values()))
    assert cp.excluded_reason is None and cp.content_hash != ""


async def test_a_forgotten_session_stays_excluded_whatever_the_policy(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "plain", conversation("lamp", "plain"))
    store_builder.add("agent:main:other", "erased", conversation("secret", "erased"))
    async with agent_runtime(settings, "main", redis=False) as rt:
        # An erasure records a keyed hash of the id, never the id itself.
        ref = hashed_session_ref(rt.secret() or b"", "erased")
        await rt.require_store().write(record_tombstones, "main", [ref], 1, fence=None)
    report = await sweep(settings, redis)
    assert report.sessions_excluded == {"forgotten": 1}
    assert "secret" not in corpus_text(settings) and "lamp" in corpus_text(settings)


async def test_appending_stages_only_the_new_messages(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "s1", conversation("garden", "s1", 4))
    assert (await sweep(settings, redis)).messages_staged == 4
    store_builder.append(
        "s1",
        [
            Msg("user", "Also remember the shed key is under the blue pot."),
            Msg("assistant", "Got it, the shed key is under the blue pot."),
        ],
        4,
    )
    report = await sweep(settings, redis)
    assert (report.messages_staged, report.sessions_scanned, report.sessions_rewritten) == (2, 1, 0)
    lines = corpus_text(settings).splitlines()
    assert len(lines) == 6 and lines[-2].startswith("[main/sessions/main/s1#L6] User: Also remember the shed")
    rows = await read(settings, staged_rows)
    origins = await read(settings, origin_rows)
    assert len(rows) == 6 and {o[0] for o in origins} == {r[0] for r in rows}
    classes = {r[3]: r[4] for r in rows}
    assert classes["User: Also remember the shed key is under the blue pot."] == "owner"
    assert classes["Assistant: Got it, the shed key is under the blue pot."] == "agent"


async def test_an_unchanged_resweep_costs_a_stat_not_a_read_and_stages_nothing(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    path = store_builder.add("agent:main:main", "s1", conversation("kiln", "s1", 4))
    await sweep(settings, redis)
    before = path.stat()
    # Same size and mtime, different bytes: only a read could notice, so a rescan would stage them.
    data = path.read_bytes().replace(b"kiln", b"KILN")
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    report = await sweep(settings, redis)
    assert (report.sessions_unchanged, report.sessions_scanned, report.messages_staged) == (1, 0, 0)
    assert "KILN" not in corpus_text(settings)


async def test_a_rewrite_rescans_and_seen_hashes_prevent_duplicates(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    msgs = conversation("pier", "s1", 4)
    store_builder.add("agent:main:main", "s1", msgs)
    await sweep(settings, redis)
    # Rewritten: the first two messages kept as they were, the rest replaced by new ones.
    store_builder.write_transcript(
        "s1",
        msgs[:2]
        + [
            Msg("user", "Actually the pier closes at nine tonight."),
            Msg("assistant", "Noted, the pier closes at nine."),
        ],
    )
    report = await sweep(settings, redis)
    assert report.sessions_rewritten == 1 and report.messages_staged == 2
    lines = corpus_text(settings).splitlines()
    assert len(lines) == 6 and len(set(lines)) == 6


async def test_a_deleted_transcript_removes_its_checkpoint_and_so_does_an_unlisted_session(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "gone", conversation("attic", "gone"))
    store_builder.add("agent:main:b", "unlisted", conversation("cellar", "unlisted"))
    await sweep(settings, redis)
    assert len(await read(settings, load_checkpoints, "main")) == 2
    (store_builder.dir / "gone.jsonl").unlink()
    del store_builder.entries["agent:main:b"]
    store_builder.save()
    report = await sweep(settings, redis)
    assert report.checkpoints_removed == 2 and report.sessions_missing == 1
    assert await read(settings, load_checkpoints, "main") == {}
    assert "attic" in corpus_text(settings)  # policy and deletion are prospective: the corpus stays


async def test_bad_lines_are_skipped_and_counted_and_the_sweep_completes(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    path = store_builder.add("agent:main:main", "messy", conversation("quarry", "messy", 2))
    good = json.dumps(
        {
            "type": "message",
            "message": {
                "role": "user",
                "content": "The quarry gate code is 7719.",
                "__openclaw": {"senderIsOwner": True},
            },
        }
    ).encode()
    with path.open("ab") as fh:
        fh.write(b'{"type":"message", broken\n')
        fh.write(b'{"type":"message","message":{"role":"user","content":"caf\xe9 latin-1"}}\n')
        fh.write(
            b'{"type":"message","message":{"role":"user","content":"' + b"x" * (20 * 1024 * 1024) + b'"}}\n'
        )
        fh.write(b'{"type":"message","message":{"role":"user","content":"nul\x00here"}}\n')
        fh.write(json.dumps({"type": "hologram", "payload": 1}).encode() + b"\n")
        fh.write(good + b"\n")
    store_builder.add("agent:main:b", "clean", conversation("meadow", "clean", 2))
    report = await sweep(settings, redis)
    assert report.lines_skipped == {
        "invalidUtf8": 1,
        "malformedJson": 1,
        "nulByte": 1,
        "oversizedLine": 1,
        "unknownEntryType": 1,
    }
    assert report.messages_staged == 5 and report.errors == []
    text = corpus_text(settings)
    assert "quarry gate code is 7719" in text and "meadow" in text
    assert (await sweep(settings, redis)).lines_skipped == {}  # counted once, not again every sweep


async def test_an_unfinished_last_line_is_left_for_the_next_sweep(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    path = store_builder.add("agent:main:main", "live", conversation("tide", "live", 2))
    line = json.dumps(
        {
            "type": "message",
            "message": {
                "role": "user",
                "content": "The tide table is on the door.",
                "__openclaw": {"senderIsOwner": True},
            },
        }
    ).encode()
    with path.open("ab") as fh:
        fh.write(line[:25])  # a writer is mid-line
    first = await sweep(settings, redis)
    assert first.messages_staged == 2 and first.lines_skipped == {}
    assert (await sweep(settings, redis)).sessions_unchanged == 1
    with path.open("ab") as fh:
        fh.write(line[25:] + b"\n")
    second = await sweep(settings, redis)
    assert second.messages_staged == 1 and second.lines_skipped == {} and second.sessions_rewritten == 0
    assert "The tide table is on the door." in corpus_text(settings)


async def test_an_unsafe_session_id_is_refused_with_an_error_naming_it(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "fine", conversation("bridge", "fine"))
    store_builder.add("agent:main:evil", "../../etc/passwd", write_transcript=False)
    store_builder.add("agent:main:dots", "..", write_transcript=False)
    report = await sweep(settings, redis)
    assert report.sessions_seen == 1 and report.messages_staged == 4
    assert any("'../../etc/passwd'" in e and "path separator" in e for e in report.errors)
    assert any("'..'" in e and "contains '..'" in e for e in report.errors)
    assert not (tmp_path / "etc").exists()


async def test_caps_spread_work_over_sweeps_and_every_message_is_staged_once(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(
        tmp_path, sessions_root, ingest={"max_messages_per_sweep": 10, "max_messages_per_file": 4}
    )
    for sid in ("a", "b", "c"):
        store_builder.add(f"agent:main:{sid}", sid, conversation(f"topic-{sid}", sid, 10))
    first = await sweep(settings, redis)
    assert first.messages_staged == 10 and first.sessions_scanned == 3
    totals = [first.messages_staged]
    for _ in range(5):
        totals.append((await sweep(settings, redis)).messages_staged)
    assert sum(totals) == 30 and totals[-1] == 0
    lines = corpus_text(settings).splitlines()
    assert len(lines) == 30 and len(set(lines)) == 30


async def test_small_commit_batches_give_the_same_result_as_one(
    tmp_path: Path,
    sessions_root: Path,
    store_builder: SessionStoreBuilder,
    redis: Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for sid in ("a", "b"):
        store_builder.add(f"agent:main:{sid}", sid, conversation(f"bay-{sid}", sid, 7))
    one = make_settings(tmp_path / "one", sessions_root)
    await sweep(one, redis)
    many = make_settings(tmp_path / "many", sessions_root)
    batches_of(monkeypatch, 3)
    report = await sweep(many, redis)
    assert report.messages_staged == 14
    assert corpus_text(one) == corpus_text(many)
    assert await read(one, staged_rows) == await read(many, staged_rows)
    cps_one = {
        k: (c.content_hash, c.line_count, c.at_end)
        for k, c in (await read(one, load_checkpoints, "main")).items()
    }
    cps_many = {
        k: (c.content_hash, c.line_count, c.at_end)
        for k, c in (await read(many, load_checkpoints, "main")).items()
    }
    assert cps_one == cps_many


async def test_a_session_forgotten_mid_sweep_is_never_staged(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:a", "keep", conversation("harbor", "keep"))
    store_builder.add("agent:main:b", "doomed", conversation("vault", "doomed"))
    result: list[IngestReport] = []

    async def run() -> None:
        result.append(await sweep(settings, redis))

    async with agent_runtime(settings, "main", redis=redis) as rt:
        held, sweep_waits = anyio.Event(), anyio.Event()

        async def purge() -> None:  # holds the lock while the sweep parses, then forgets "doomed"
            async with rt.lock().hold() as lease:
                held.set()
                await sweep_waits.wait()  # the sweep has enumerated and parsed, and waits for the lock
                await rt.require_store().write(record_tombstones, "main", ["doomed"], 1, fence=lease.fence)

        with on_failpoint("lock.wait", sweep_waits.set), anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(purge)
                await held.wait()
                tg.start_soon(run)  # started from this task: it does not share the purge's lease
    report = result[0]  # read again once the purge had committed: "doomed" is excluded before it is read
    assert report.messages_staged == 4 and report.sessions_excluded == {"forgotten": 1}
    assert "vault" not in corpus_text(settings) and "harbor" in corpus_text(settings)
    origins = await read(settings, origin_rows)
    assert {o[1] for o in origins} == {"keep"}
    cps = {c.session_id: c for c in (await read(settings, load_checkpoints, "main")).values()}
    assert cps["doomed"].excluded_reason == "forgotten" and cps["doomed"].content_hash == ""


async def test_a_sweep_that_cannot_get_the_lock_in_time_fails_clearly_and_writes_nothing(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root, lock={"wait_s": 0.3})
    store_builder.add("agent:main:main", "s1", conversation("loft", "s1"))
    async with agent_runtime(settings, "main", redis=redis) as rt:
        other = WorkspaceLock(redis, rt.paths.workspace, holder="another-writer")
        lease = await other._acquire()  # held elsewhere, as far as the sweep can tell
        try:
            with pytest.raises(LockTimeout, match="another-writer"):
                await run_ingest_sweep(rt)
        finally:
            await other._release(lease)
    assert corpus_text(settings) == ""
    assert await read(settings, staged_rows) == [] and await read(settings, load_checkpoints, "main") == {}
    assert (await sweep(settings, redis)).messages_staged == 4  # and the next sweep converges


async def test_a_commit_that_fails_midway_leaves_nothing_half_staged_and_the_rerun_converges(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "s1", conversation("silo", "s1", 6))
    async with agent_runtime(settings, "main", redis=False) as rt:
        # Fault injection by a real trigger: the checkpoint write, the last step of the commit, fails.
        await rt.require_store().write(
            lambda c: c.execute(
                "CREATE TRIGGER inject_fault BEFORE INSERT ON ingest_checkpoints "
                "BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
            ),
            fence=None,
        )
    with pytest.raises(OperationFailed, match="injected fault"):
        await sweep(settings, redis)
    assert await read(settings, staged_rows) == [] and await read(settings, origin_rows) == []
    async with agent_runtime(settings, "main", redis=False) as rt:
        await rt.require_store().write(lambda c: c.execute("DROP TRIGGER inject_fault"), fence=None)
    report = await sweep(settings, redis)
    assert report.messages_staged == 6
    rows = await read(settings, staged_rows)
    assert len(rows) == 6 and {o[0] for o in await read(settings, origin_rows)} == {r[0] for r in rows}
    assert (await sweep(settings, redis)).messages_staged == 0


async def test_each_corpus_day_file_is_fsynced_once_per_sweep_not_once_per_batch(
    tmp_path: Path,
    sessions_root: Path,
    store_builder: SessionStoreBuilder,
    redis: Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    day = 86_400_000
    for sid, when in (("a", store_builder.base_ms), ("b", store_builder.base_ms - day)):
        msgs = [
            Msg(m.role, m.text, ts=when + i * 1000)
            for i, m in enumerate(conversation(f"reef-{sid}", sid, 12))
        ]
        store_builder.add(f"agent:main:{sid}", sid, msgs)
    settings = make_settings(tmp_path, sessions_root)
    batches_of(monkeypatch, 3)  # 8 batches over the two days
    synced: list[str] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    report = await sweep(settings, redis)
    assert report.messages_staged == 24 and len(report.corpus_files) == 2
    corpus_syncs = sorted(p for p in synced if "session-corpus" in p and p.endswith(".txt"))
    assert len(corpus_syncs) == 2 and len(set(corpus_syncs)) == 2


async def test_a_transcript_is_opened_and_read_in_a_worker_thread_not_on_the_event_loop(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    import threading

    settings = policy_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "s-one", conversation("orchard", "s-one"), chatType="direct")
    loop_thread = threading.get_ident()
    opened_in: list[int] = []
    with on_failpoint("ingest.scan.open", lambda: opened_in.append(threading.get_ident())):
        report = await sweep(settings, redis)
    assert report.messages_staged == 4
    assert opened_in and loop_thread not in opened_in  # a FIFO or a slow disk holds a thread, not the daemon
