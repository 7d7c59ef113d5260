"""Search on real indexes: by words, by meaning, never a forgotten session, stale warnings."""

from __future__ import annotations

import time
from pathlib import Path

import click
import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from memoryd.agent_runtime import agent_runtime
from memoryd.commands import CliState
from memoryd.commands.index import register
from memoryd.errors import UsageError
from memoryd.index.embedder import HashingEmbedder
from memoryd.index.search import run_search
from memoryd.index.sync import run_index_sync
from memoryd.index.vectors import nearest, to_blob
from memoryd.store.db import Store
from memoryd.store.origins import EntryOrigin, record_origins
from memoryd.store.tombstones import record_tombstones
from tests.builders import Msg, SessionStoreBuilder, conversation
from tests.conftest import index_settings

AGENT = "main"

MEMORY = """# Long-Term Memory

<!-- memoryd-promotion:memory:rota -->
- The lighthouse rota changes every Tuesday.
- The deploy schedule for the gateway is Friday at noon.
- Nora prefers green tea in the morning.
"""


def _memory(tmp_path: Path, text: str = MEMORY) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    path = tmp_path / "ws" / "MEMORY.md"
    path.write_text(text)
    return path


async def test_promoted_memory_is_found_by_its_words_with_lines_and_provenance(
    redis, tmp_path, sessions_root, unique
) -> None:
    settings = index_settings(tmp_path, sessions_root, unique)
    _memory(tmp_path)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        async with rt.lock().hold() as lease:  # the entry was promoted from an agent-class line
            await rt.require_store().write(
                record_origins,
                AGENT,
                [EntryOrigin("memory:rota", AGENT, "sess-1", None, "agent", 5)],
                fence=lease.fence,
            )
        await run_index_sync(rt)
        report = await run_search(rt, "lighthouse rota")
    assert report.mode == "fts" and not report.stale
    [hit] = report.results
    assert (hit.path, hit.source, hit.start_line, hit.end_line) == ("MEMORY.md", "memory", 3, 4)
    assert hit.snippet == "- The lighthouse rota changes every Tuesday."
    assert hit.provenance is not None and hit.provenance.origin_class == "agent"


async def test_the_hashing_embedder_finds_memory_by_meaning_where_words_do_not_match(
    redis, tmp_path, sessions_root, unique
) -> None:
    _memory(tmp_path)
    query = "deployment schedules"
    fts_only = index_settings(tmp_path, sessions_root, unique)
    async with agent_runtime(fts_only, AGENT, redis=redis) as rt:
        await run_index_sync(rt)
        assert (await run_search(rt, query)).results == []
    hybrid = index_settings(tmp_path, sessions_root, unique, embedding={"provider": "hashing"})
    async with agent_runtime(hybrid, AGENT, redis=redis) as rt:
        stale = await run_search(rt, query)
        assert stale.stale and "built with 'fts-only'" in (stale.warning or "")
        await run_index_sync(rt)
        report = await run_search(rt, query)
    assert report.mode == "hybrid" and not report.stale
    assert report.results[0].snippet == "- The deploy schedule for the gateway is Friday at noon."
    assert report.results[0].text_score is None and report.results[0].vector_score > 0.2


async def test_a_forgotten_sessions_text_is_never_returned(redis, tmp_path, sessions_root, unique) -> None:
    builder = SessionStoreBuilder(sessions_root, AGENT)
    builder.add("agent:main:one", "sess-gone", conversation("lighthouse", "sess-gone"))
    builder.add("agent:main:two", "sess-kept", conversation("lighthouse", "sess-kept"))
    settings = index_settings(
        tmp_path, sessions_root, unique, sources=["memory", "sessions"], embedding={"provider": "hashing"}
    )
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await run_index_sync(rt)
        before = await run_search(rt, "lighthouse rota sess-gone")
        assert {h.session_id for h in before.results} >= {"sess-gone"}
        # Forgotten, and its rows not purged yet: search must already hide it.
        async with rt.lock().hold() as lease:
            await rt.require_store().write(
                record_tombstones, AGENT, ["sess-gone"], int(time.time() * 1000), fence=lease.fence
            )
        for query in ("lighthouse rota sess-gone", "lighthouse", "sess-gone team"):
            report = await run_search(rt, query, limit=50)
            assert all(h.session_id != "sess-gone" and "sess-gone" not in h.snippet for h in report.results)
        assert any(h.session_id == "sess-kept" for h in (await run_search(rt, "lighthouse")).results)


async def test_search_reports_stale_when_the_index_lags_the_files(
    redis, tmp_path, sessions_root, unique
) -> None:
    settings = index_settings(tmp_path, sessions_root, unique)
    path = _memory(tmp_path)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await run_index_sync(rt)
        assert not (await run_search(rt, "tea")).stale
        path.write_text(MEMORY + "- The boiler is serviced in May.\n")
        report = await run_search(rt, "tea")
        assert report.stale and "MEMORY.md" in (report.warning or "")
        assert report.action == f"run `memoryd index --agent {AGENT}`"
        await run_index_sync(rt)
        assert not (await run_search(rt, "boiler")).stale


async def test_a_very_common_query_ranks_a_bounded_candidate_set(
    redis, tmp_path, sessions_root, unique, monkeypatch
) -> None:
    import memoryd.index.search as search

    monkeypatch.setattr(search, "FTS_CANDIDATE_CAP", 50)
    settings = index_settings(tmp_path, sessions_root, unique, chunk_tokens=16, chunk_overlap=0)
    notes = "\n".join(f"The note {i} and the other note {i} share the common words." for i in range(200))
    _memory(tmp_path)
    (tmp_path / "ws" / "memory").mkdir()
    (tmp_path / "ws" / "memory" / "notes.md").write_text(notes)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await run_index_sync(rt)
        common = await run_search(rt, "the and", limit=5)
        rare = await run_search(rt, "lighthouse", limit=5)
    assert common.candidates_capped and len(common.results) == 5
    assert not rare.candidates_capped and rare.results[0].path == "MEMORY.md"


async def test_bad_queries_are_usage_errors(redis, tmp_path, sessions_root, unique) -> None:
    settings = index_settings(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        with pytest.raises(UsageError, match="QUERY"):
            await run_search(rt, "  ")
        with pytest.raises(UsageError, match="--limit"):
            await run_search(rt, "tea", limit=0)


async def test_vector_backends_return_the_same_neighbours(tmp_path) -> None:
    store = await Store.open(tmp_path / "memory.sqlite")
    embedder = HashingEmbedder(64)
    texts = [f"note {i} about {'lighthouse' if i % 3 else 'harbour'} duty {i * 7}" for i in range(40)]

    def fill(conn) -> None:
        conn.executemany(
            "INSERT INTO memory_index_chunks(rowid, id, path, source, start_line, end_line, hash, model, text, "
            "updated_at) VALUES (?, ?, 'm.md', 'memory', 1, 1, ?, 'm', ?, 0)",
            [(i + 1, f"c{i}", f"h{i}", t) for i, t in enumerate(texts)],
        )
        conn.executemany(
            "INSERT INTO memory_index_vectors(chunk_rowid, model, dims, embedding) VALUES (?, 'm', 64, ?)",
            [(i + 1, to_blob(embedder.embed_one(t))) for i, t in enumerate(texts)],
        )

    await store.write(fill, fence=None)
    query = embedder.embed_one("lighthouse duty")
    via_sql = await store.read(nearest, query, "m", 10, "sqlite-vec")
    via_numpy = await store.read(nearest, query, "m", 10, "numpy")
    await store.close()
    assert [r for r, _ in via_sql] == [r for r, _ in via_numpy]
    assert np.allclose([s for _, s in via_sql], [s for _, s in via_numpy], atol=1e-5)


def test_cli_index_and_search_print_json(tmp_path, sessions_root, unique, redis_url) -> None:
    _memory(tmp_path)
    config = tmp_path / "memoryd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{redis_url}"\n[daemon]\nhost_id = "test-{unique}"\n'
        f'[agents.{AGENT}]\nworkspace = "{tmp_path / "ws"}"\n'
    )

    @click.group()
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        ctx.obj = CliState(str(config))

    register(cli)
    runner = CliRunner()
    indexed = runner.invoke(cli, ["index", "--agent", AGENT, "--json"])
    assert indexed.exit_code == 0, indexed.output
    assert orjson.loads(indexed.output)["files"]["indexed"] == 1
    found = runner.invoke(cli, ["search", "--agent", AGENT, "green tea", "--json"])
    assert found.exit_code == 0, found.output
    body = orjson.loads(found.output)
    assert list(body)[:4] == ["agentId", "query", "mode", "stale"]
    assert body["results"][0]["snippet"] == "- Nora prefers green tea in the morning."


def test_the_search_report_is_its_own_schema() -> None:
    # `run_search` returns plain data (a search loads no pydantic), and the same dataclasses are
    # the `search --json` and `memory_search` schema: what pydantic reads from them must take the
    # JSON the report gives, and give it back byte for byte, keys in the same order.
    from pydantic import TypeAdapter

    from memoryd.index import search_report as plain

    hits = [
        plain.SearchHit(
            path="MEMORY.md", source="memory", start_line=3, end_line=5, score=1.0, snippet="- tea"
        ),
        plain.SearchHit(
            path="sessions/main/s1",
            source="sessions",
            start_line=2,
            end_line=7,
            score=0.5,
            text_score=0.25,
            vector_score=0.75,
            snippet="User: lighthouse",
            session_id="s1",
            provenance=plain.HitProvenance(origin_class="agent", session_kind="direct", observed_at=17),
        ),
    ]
    for report in (
        plain.SearchReport(agent_id="main", query="tea", mode="hybrid", candidates_capped=True, results=hits),
        plain.SearchReport(
            agent_id="main", query="tea", mode="fts", stale=True, warning="w", action="run it"
        ),
    ):
        data = report.to_json()
        adapter = TypeAdapter(plain.SearchReport)
        again = adapter.dump_python(adapter.validate_python(data), mode="json", by_alias=True)
        assert orjson.dumps(data) == orjson.dumps(again)
        assert list(data) == list(adapter.json_schema(by_alias=True)["properties"])
    entry = plain.EntryReport(
        agent_id="main", key="chunk:7", path="MEMORY.md", source="memory", start_line=1, end_line=2,
        text="- tea", untrusted=True, provenance=hits[1].provenance,
        sessions=[plain.HitSession(session_id="s1", origin_class="agent", observed_at=17)],
    )  # fmt: skip
    adapter = TypeAdapter(plain.EntryReport)
    data = entry.to_json()
    assert orjson.dumps(adapter.dump_python(adapter.validate_python(data), mode="json", by_alias=True)) == (
        orjson.dumps(data)
    )


def test_the_shown_text_is_the_part_that_matched_not_the_chunks_head() -> None:
    from memoryd.constants import SEARCH_SNIPPET_MAX_CHARS
    from memoryd.index.snippet import matched_snippet

    filler = " ".join(f"filler{i}" for i in range(400))
    text = f"{filler} the zephyr valve is replaced. {filler}"
    shown = matched_snippet(text, ["zephyr", "valve"])
    assert "zephyr valve" in shown and len(shown) <= SEARCH_SNIPPET_MAX_CHARS
    assert shown.startswith("…") and shown.endswith("…")
    at_end = matched_snippet(filler + " finally kestrel", ["kestrel"])
    assert at_end.endswith("finally kestrel") and len(at_end) <= SEARCH_SNIPPET_MAX_CHARS
    assert matched_snippet("short text", ["nothing"]) == "short text"
    head = matched_snippet(filler, ["absent"])  # a hit by meaning only: the head, as before
    assert head.startswith("filler0 ") and head.endswith("…")


def test_cli_search_shows_a_word_appended_at_the_end_of_a_long_transcript(
    tmp_path, sessions_root, unique, redis_url
) -> None:
    builder = SessionStoreBuilder(sessions_root, AGENT)
    long_turns = [
        f"Remember that the harbour crane number {i} is inspected on day {i} by the dock team."
        for i in range(14)
    ]
    builder.add(
        "agent:main:one",
        "sess-long",
        [Msg("user", t) if i % 2 == 0 else Msg("assistant", t) for i, t in enumerate(long_turns)]
        + [Msg("user", "And one last thing: the pelican gate code changed.")],
    )
    config = tmp_path / "memoryd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{redis_url}"\n[daemon]\nhost_id = "test-{unique}"\n'
        f'[agents.{AGENT}]\nworkspace = "{tmp_path / "ws"}"\n[index]\nsources = ["memory", "sessions"]\n'
    )

    @click.group()
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        ctx.obj = CliState(str(config))

    register(cli)
    runner = CliRunner()
    assert runner.invoke(cli, ["index", "--agent", AGENT, "--json"]).exit_code == 0
    found = runner.invoke(cli, ["search", "--agent", AGENT, "pelican"])
    assert found.exit_code == 0, found.output
    assert "pelican gate code changed" in found.output
