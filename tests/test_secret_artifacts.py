"""Secrets never enter memory (D-01): a transcript holding every credential form is backfilled,
ingested, dreamed, promoted and indexed, and an object holding them is written through the
memory tool; no byte of any file memoryd owns (corpus, staged entries, MEMORY.md, diaries,
index chunks, FTS segments, vectors, the SQLite files and their WAL) holds any of them, while
the near misses are kept as written."""

from __future__ import annotations

from pathlib import Path

from memoryd.dreaming.backfill import BackfillRequest, run_backfill
from memoryd.dreaming.sweep import run_dreaming
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.retention import api
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings
from tests.dream_kit import runtime
from tests.secret_corpus import NEAR_MISSES, SECRETS


def _files_holding(root: Path, needles: list[bytes], skip: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink() or skip in path.parents:
            continue
        data = path.read_bytes()
        hits = [n.decode() for n in needles if n in data]
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


async def test_no_secret_reaches_any_artifact_and_near_misses_stay(tmp_path, sessions_root, unique, redis):
    b = SessionStoreBuilder(sessions_root, "main")
    messages = [
        Msg("user", f"Remember for the harbour deploy number {i}: {s.text} please.")
        for i, s in enumerate(SECRETS)
    ]
    messages += [
        Msg("user", f"Remember the ferry timetable note about {m} for next week.") for m in NEAR_MISSES
    ]
    b.add("agent:main:main", "s-vault", messages, chatType="direct")
    b.add(
        "agent:main:telegram:direct:nora",
        "s-backfill",
        [Msg("user", f"Remember the backfilled rota says {s.text} on Mondays.") for s in SECRETS],
        chatType="direct",
    )
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        agents={"main": {"workspace": str(tmp_path / "ws")}},
        dreaming={"min_score": 0, "min_recall_count": 0, "min_unique_queries": 0},
        index={"sources": ["memory", "sessions"], "embedding": {"provider": "hashing", "dims": 64}},
    )
    needles = [s.value.encode() for s in SECRETS]
    async with runtime(settings, redis) as rt:
        await run_backfill(rt, BackfillRequest(agent="main", mode="rem"))
        await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        await run_ingest_sweep(rt)
        await run_dreaming(rt)
        report = await run_index_sync(rt)
        assert report.ok
        for s in SECRETS:
            await api.write_object(
                settings, redis, "tenant:t:user:nora", f"Nora's note: {s.text} stays private."
            )
        ws = tmp_path / "ws"
        memory = (ws / "MEMORY.md").read_text()
        assert memory.count("<!-- memoryd-promotion:") >= len(SECRETS)  # the secret lines were promoted
        assert "OPENAI_API_KEY=***" in memory  # as the reference writes it
        corpus = "".join(p.read_text() for p in (ws / "memory/.dreams/session-corpus").iterdir())
        for m in NEAR_MISSES:
            assert f"about {m} for" in corpus, m
        assert (ws / "DREAMS.md").exists()
        chunks = await rt.store.read(
            lambda c: c.execute(
                "SELECT count(*) FROM memory_index_chunks WHERE source = 'sessions'"
            ).fetchone()[0]
        )
        assert chunks >= 2  # both transcripts were indexed
        fts = await rt.store.read(
            lambda c: c.execute(
                "SELECT count(*) FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH ?",
                ('"OPENAI_API_KEY"',),
            ).fetchone()[0]
        )
        assert fts >= 1  # the masked assignment is searchable by its name
        assert _files_holding(tmp_path, needles, sessions_root) == {}  # WAL files included
    assert _files_holding(tmp_path, needles, sessions_root) == {}


async def test_resumed_and_rescanned_sweeps_stage_a_masked_message_once(
    tmp_path, sessions_root, unique, redis
):
    # The cursor hashes raw transcript bytes and the seen hashes the masked snippet, the same in
    # a full scan, a resumed one and a rescan after a rewrite: nothing is staged twice.
    b = SessionStoreBuilder(sessions_root, "main")
    first = [Msg("user", "Remember the ferry leaves at nine sharp."), Msg("assistant", "Noted: nine sharp.")]
    later = [
        Msg("user", f"Remember the staging login is {SECRETS[0].text} for now."),
        Msg("user", f"Remember the database URL {SECRETS[-1].text} too."),
    ]
    b.add("agent:main:main", "s-1", first, chatType="direct")
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        agents={"main": {"workspace": str(tmp_path / "ws")}},
    )
    corpus_dir = tmp_path / "ws" / "memory/.dreams/session-corpus"

    def corpus_lines() -> list[str]:
        return [ln for p in sorted(corpus_dir.iterdir()) for ln in p.read_text().splitlines()]

    async with runtime(settings, redis) as rt:
        await run_ingest_sweep(rt)
        b.append("s-1", later, start_index=len(first))
        await run_ingest_sweep(rt)  # resumes after the first two lines
        resumed = corpus_lines()
        b.write_transcript(
            "s-1", [Msg("user", "Remember the ferry leaves at ten sharp."), *first[1:], *later]
        )
        await run_ingest_sweep(rt)  # the first line changed: a rescan from line 1
        rescanned = corpus_lines()
    assert len(resumed) == 4 and all(s.value not in ln for ln in resumed for s in SECRETS)
    assert "OPENAI_API_KEY=***" in resumed[2] and "nora:***@db.internal.example" in resumed[3]
    assert rescanned[:4] == resumed and len(rescanned) == 5 and "ten sharp" in rescanned[4]
