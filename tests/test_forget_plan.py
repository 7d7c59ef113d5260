"""Pure planning (reference §7.3, §7.4, §7.6): snapshots in, plan out; no Redis, no disk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.fileio import sha256_hex
from memoryd.forget.index_plan import ChunkRow, SourceRow
from memoryd.forget.lineage import Lineage, OriginRow, lineage_identity, read_lineage
from memoryd.forget.plan import FileSnapshot, ForgetSnapshot, plan_forget
from memoryd.forget.report import build_report
from memoryd.forget.select import SessionSelection, SessionTarget
from memoryd.store.db import sqlite3
from memoryd.store.migrate import migrate_connection


def selection(*sids: str) -> SessionSelection:
    return SessionSelection(tuple(SessionTarget(s, None, "live") for s in sids), ())


def lineage(rows: list[tuple[str, str]], selected: set[str]) -> Lineage:
    ordered = tuple(sorted(OriginRow(k, s) for k, s in rows))
    keys = frozenset(r.entry_key for r in ordered if r.session_id in selected)
    ordered = tuple(r for r in ordered if r.entry_key in keys)
    return Lineage(ordered, keys, frozenset(r.entry_key for r in ordered if r.session_id not in selected))


def snapshot(
    sids=("s1",),
    rows=(),
    memory=(),
    corpus=(),
    chunks=(),
    sources=(),
    keys_with_origins=(),
    excluded=(),
    cache=0,
) -> ForgetSnapshot:
    return ForgetSnapshot(
        agent_id="main",
        selection=selection(*sids),
        lineage=lineage(list(rows), set(sids)),
        keys_with_origins=frozenset(keys_with_origins),
        excluded_session_ids=frozenset(excluded),
        corpus_files=tuple(FileSnapshot(p, t, sha256_hex(t)) for p, t in corpus),
        memory_files=tuple(FileSnapshot(p, t, sha256_hex(t)) for p, t in memory),
        refusals=(),
        short_term=(),
        checkpoint_keys=(),
        seen_scopes=(),
        backups=(),
        curated_writes=(),
        chunks=tuple(chunks),
        sources=tuple(sources),
        embedding_cache_rows=cache,
    )


def chunk(rowid, path, source="memory", text="", session_id=None, origin="owner", kind="interactive"):
    return ChunkRow(rowid, f"c{rowid}", path, source, text, session_id, origin, kind, True, rowid % 2 == 0)


MEMORY = "<!-- memoryd-promotion:mixed -->\n- merged fact\n<!-- memoryd-promotion:kept -->\n- other fact\n"


def test_a_mixed_lineage_entry_is_planned_for_removal_whole():
    plan = plan_forget(
        snapshot(
            rows=[("mixed", "s1"), ("mixed", "s2"), ("kept", "s2")],
            memory=[("MEMORY.md", MEMORY)],
            keys_with_origins={"mixed", "kept"},
        )
    )
    assert plan.lineage.mixed_entry_keys == {"mixed"}
    assert plan.memory_rewrites[0].content == "<!-- memoryd-promotion:kept -->\n- other fact\n"
    report = build_report(plan, dry_run=True)
    assert report.artifacts.origin_rows == 2  # both sessions' rows of the removed entry
    assert report.mixed_lineage_entry_keys == ["mixed"]


def test_markers_without_origins_are_untargetable_and_left_alone():
    plan = plan_forget(
        snapshot(rows=[("mixed", "s1")], memory=[("MEMORY.md", MEMORY)], keys_with_origins={"mixed"})
    )
    assert plan.untargetable_keys == {"kept"}
    assert "kept" in plan.memory_rewrites[0].content


def test_remaining_consolidation_highlights_produce_a_refusal_naming_the_file():
    diary = "# D\n## Memory Consolidation History\n\n### 2026-09-16\n  - `+ merged` something\n"
    plan = plan_forget(snapshot(memory=[("DREAMS.md", diary)]))
    assert plan.refusals == (
        "Cannot trace historical consolidation highlights in DREAMS.md; review them manually.",
    )


def test_an_empty_selection_plans_no_write_at_all():
    plan = plan_forget(
        snapshot(
            sids=(),
            rows=[("a", "s1")],
            memory=[("MEMORY.md", MEMORY)],
            corpus=[("memory/.dreams/session-corpus/d.txt", "[main/sessions/main/s1#L1] hi")],
            chunks=[chunk(1, "sessions/main/cron", "sessions", origin="system", kind="cron")],
            cache=4,
        )
    )
    assert not plan.memory_rewrites and not plan.corpus_rewrites
    assert plan.index.empty and plan.index.embedding_cache_rows == 0


def test_index_plan_selects_changed_files_selected_transcripts_and_stale_internal_chunks():
    corpus_path = "memory/.dreams/session-corpus/d.txt"
    plan = plan_forget(
        snapshot(
            rows=[("mixed", "s1")],
            memory=[("MEMORY.md", MEMORY)],
            corpus=[(corpus_path, "[main/sessions/main/s1#L1] a long enough snippet\n")],
            chunks=[
                chunk(1, "MEMORY.md", text=MEMORY),
                chunk(2, "USER.md", text="# User\n"),
                chunk(3, corpus_path, text="x"),
                chunk(4, "sessions/main/s1", "sessions", session_id="s1"),
                chunk(5, "sessions/main/s2", "sessions", session_id="s2"),
                chunk(6, "sessions/main/cron", "sessions", session_id="cron", origin="system", kind="cron"),
                chunk(7, "sessions/main/nokind", "sessions", session_id="n", kind=None),
                chunk(8, "sessions/main/narr", "sessions", session_id="narr"),
            ],
            sources=[
                SourceRow(1, corpus_path, "memory", None),
                SourceRow(2, "MEMORY.md", "memory", None),
                SourceRow(3, "sessions/main/s1", "sessions", "s1"),
                SourceRow(4, "sessions/main/s2", "sessions", "s2"),
            ],
            excluded={"narr"},
            cache=5,
        )
    )
    assert plan.index.chunk_rowids == (1, 3, 4, 6, 8)
    assert plan.index.source_ids == (1, 3)  # the emptied corpus file and the transcript; MEMORY.md stays
    assert plan.index.fts_rows == 5 and plan.index.vector_rows == 3
    assert plan.index.embedding_cache_rows == 5 and plan.index.clear_embedding_cache


def test_an_indexed_snapshot_still_holding_a_selected_entry_is_purged_though_the_file_is_clean():
    # Another agent sharing the workspace already scrubbed MEMORY.md; this agent's index did not.
    plan = plan_forget(
        snapshot(
            rows=[("mixed", "s1")],
            memory=[("MEMORY.md", "- clean\n")],
            chunks=[chunk(1, "MEMORY.md", text=MEMORY), chunk(2, "memory/x.md", text="- clean")],
        )
    )
    assert not plan.memory_rewrites
    assert plan.index.chunk_rowids == (1,)


# --- lineage sets on a real (in-memory) database --------------------------------------------------


def _db(rows: list[tuple[str, str]]):
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate_connection(conn)
    conn.executemany(
        "INSERT OR IGNORE INTO memory_entry_origins(entry_key, agent_id, session_id, origin_class, "
        "observed_at) VALUES (?, 'main', ?, 'owner', 1)",
        rows,
    )
    conn.execute(
        "INSERT INTO memory_entry_origins VALUES ('k0', 'ops', 's0', NULL, 'owner', 1)"
    )  # other agent
    return conn


row_st = st.tuples(
    st.sampled_from(["k0", "k1", "k2", "k3"]), st.sampled_from(["s0", "s1", "s2", "S1", "s1x"])
)


@settings(max_examples=150, deadline=None)
@given(st.lists(row_st, max_size=12), st.sets(st.sampled_from(["s0", "s1", "s2"]), max_size=2))
def test_lineage_sets_follow_their_definition(rows, selected):
    conn = _db(rows)
    got = read_lineage(conn, "main", selected)
    unique = set(rows)
    keys = {k for k, s in unique if s in selected}
    assert got.entry_keys == keys
    assert got.mixed_entry_keys == {k for k, s in unique if k in keys and s not in selected}
    assert got.origin_rows == sum(1 for k, _ in unique if k in keys)
    assert got.identity == lineage_identity(sorted(OriginRow(k, s) for k, s in unique if k in keys))


def test_keys_carried_from_an_earlier_round_stay_selected():
    conn = _db([("k1", "s2")])
    got = read_lineage(conn, "main", {"s1"}, carried_keys={"k1"})
    assert got.entry_keys == {"k1"} and got.mixed_entry_keys == {"k1"}
