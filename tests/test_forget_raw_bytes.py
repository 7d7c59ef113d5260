"""After a forget apply (without --verify), no byte sequence of the forgotten sessions' text is
left in any file under state_dir: databases, WAL and journal files, the workspace. Raw bytes,
read from disk: free space inside pages and free pages count.

The store is used the way a daemon uses it (ingest, dreaming, index with transcripts, ingest
again: rows updated in place, cells moved) before the forget, so that stale cell bytes have
every chance to exist."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.dreaming.sweep import run_dreaming
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import forget
from memoryd.index import purge
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.store.engine import connect
from memoryd.store.index_chunks import delete_chunks, rewrite_chunk_pages, rowids_of_chunks
from memoryd.store.migrate import AGENT as AGENT_SCHEMA
from memoryd.store.migrate import migrate_connection
from memoryd.store.short_term import purge_entries
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

AGENT = "main"
FORGOTTEN = [
    "Remember that the wombat orchestra rehearses behind the tannery on Wednesdays.",
    "Remember that my cousin Ilsabet keeps the spare kayak paddles in the loft.",
    "Remember that the quinoa silo password is written inside the blue almanac.",
]
RARE_TERMS = ["wombat", "tannery", "Ilsabet", "quinoa", "almanac"]
SURVIVING = "Remember that the orchard rota changes every Monday morning at dawn."
MIN_BYTES = 16


def _windows(text: str) -> set[bytes]:
    """Every MIN_BYTES-long window of the UTF-8 text: any one found is residue."""
    raw = text.encode()
    return {raw[i : i + MIN_BYTES] for i in range(0, len(raw) - MIN_BYTES + 1)}


def _scan(root: Path, needles: set[bytes]) -> dict[str, list[bytes]]:
    found: dict[str, list[bytes]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits = sorted(n for n in needles if n in data)
        if hits:
            found[str(path.relative_to(root))] = hits[:3]
    return found


def _build(sessions_root: Path) -> SessionStoreBuilder:
    b = SessionStoreBuilder(sessions_root, AGENT)
    for i, text in enumerate(FORGOTTEN):
        b.add(
            f"agent:main:dm:zed-{i}",
            f"sess-zed-{i}",
            [Msg("user", text), Msg("assistant", "Noted: " + text)],
            participants=[{"actorId": "zed"}],
            chatType="direct",
        )
    b.add(
        "agent:main:dm:omar",
        "sess-omar",
        [Msg("user", SURVIVING), Msg("assistant", "Noted: " + SURVIVING)],
        participants=[{"actorId": "omar"}],
        chatType="direct",
    )
    return b


# The index purge either secure-deletes the chunks' terms or merges the index into one segment
# (daemon/index/purge.py's rebuild_is_cheaper): a cost ratio of 0 never rebuilds, a huge one always.
@pytest.mark.parametrize("rebuild_ratio", [0, 10**9], ids=["secure-delete", "rebuild"])
async def test_no_forgotten_bytes_remain_under_state_dir_after_a_forget_apply(
    tmp_path, redis, monkeypatch, rebuild_ratio
):
    monkeypatch.setattr(purge, "REBUILD_ROWS_PER_ROW_SEGMENT", rebuild_ratio)
    sessions_root = tmp_path / "sessions"
    b = _build(sessions_root)
    settings = make_settings(
        tmp_path,
        sessions_root,
        index={"sources": ["memory", "sessions"], "embedding": {"provider": "hashing"}},
        dreaming={"min_score": 0, "min_recall_count": 0, "min_unique_queries": 0},
    )
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await run_ingest_sweep(rt)
        await run_dreaming(rt)
        await run_index_sync(rt)
        # More of the same sessions: staged rows are updated, pages split and cells move.
        for i, text in enumerate(FORGOTTEN):
            b.append(f"sess-zed-{i}", [Msg("user", "Also: " + text.lower())], 2)
        b.append("sess-omar", [Msg("user", "Also: " + SURVIVING.lower())], 2)
        await run_ingest_sweep(rt)
        await run_dreaming(rt)
        await run_index_sync(rt, force=True)
    state = settings.state_dir
    said = [*FORGOTTEN, *(t.lower() for t in FORGOTTEN)]
    kept = set().union(
        *(_windows(t) for t in (SURVIVING, "Also: " + SURVIVING.lower(), "Noted: " + SURVIVING))
    )
    # Windows the survivor's text holds too may stay through it ("Remember that the ...").
    needles = {w for t in said for w in _windows(t)} - kept | {t.encode() for t in RARE_TERMS}
    assert _scan(state, needles)  # the text was there to find

    report = await forget(settings, ForgetRequest(agent=AGENT, participants=["zed"]), redis=redis)
    assert report.artifacts.short_term_entries > 0

    assert _scan(state, needles) == {}
    assert _scan(state, {SURVIVING.encode()[:40]})  # the survivor's text is still there


def test_rows_moved_by_growing_updates_leave_no_copy_after_their_delete(tmp_path: Path) -> None:
    """The write path behind stale cell bytes: staged entries whose JSON lists grow with each
    recall (dreaming's signal updates) outgrow their page, the page is rebalanced without
    clearing its free gap, and an older copy of a row that stayed on the page sits there.
    Deleting the row zeroes only its live cell, so forget's purge rewrites the rows around it
    too: the pages they filled are freed (zeroed, secure_delete) and rebuilt."""
    rng = random.Random(5)  # a seed whose balances are known to move doomed rows
    path = tmp_path / "memory.sqlite"
    conn = connect(str(path), readonly=False)
    migrate_connection(conn, AGENT_SCHEMA)
    snippets = {
        f"k{rng.random():.12f}": f"staged snippet {i:05d} {'lorem ' * rng.randint(5, 60)}"
        for i in range(3000)
    }
    conn.execute("BEGIN IMMEDIATE")
    for n, (key, snippet) in enumerate(snippets.items()):
        conn.execute(
            "INSERT INTO short_term_entries(entry_key, path, start_line, end_line, snippet, "
            "first_recalled_at, last_recalled_at, origin_class, observed_at) VALUES (?, 'p', 1, 1, ?, 0, 0, 'owner', 0)",
            (key, snippet),
        )
        if n % 2 == 0:  # a recall of an earlier entry: its query list grows
            grown = json.dumps([f"q{j}" for j in range(rng.randint(0, 32))])
            conn.execute(
                "UPDATE short_term_entries SET query_hashes = ? WHERE entry_key = ?",
                (grown, rng.choice(list(snippets)[: n + 1])),
            )
    conn.execute("COMMIT")
    doomed = rng.sample(sorted(snippets), 200)
    conn.execute("BEGIN IMMEDIATE")
    purge_entries(conn, doomed)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert [k for k in doomed if snippets[k][:24].encode() in data] == []
    survivors = [k for k in snippets if k not in set(doomed)]
    assert all(snippets[k][:24].encode() in data for k in survivors)


def test_index_chunks_purged_after_earlier_index_runs_leave_no_copy(tmp_path: Path) -> None:
    """Index runs append chunks and purge changed files' chunks; the merges rebuild pages and
    can keep an older copy of a chunk in a page's free gap. Forget's purge of chunks rewrites
    the chunks that shared their pages, with every row derived from them."""
    rng = random.Random(1)  # a seed whose rebuilds are known to keep a purged chunk's copy
    path = tmp_path / "memory.sqlite"
    conn = connect(str(path), readonly=False)
    migrate_connection(conn, AGENT_SCHEMA)
    texts: dict[int, str] = {}
    rowid = 0
    for _ in range(6):
        conn.execute("BEGIN IMMEDIATE")
        for _ in range(500):
            rowid += 1
            texts[rowid] = f"chunk text {rowid:06d} " + "word " * rng.randint(10, 120)
            conn.execute(
                "INSERT INTO memory_index_chunks(rowid, id, path, source, start_line, end_line, hash, "
                "model, text, updated_at) VALUES (?, ?, ?, 'memory', 1, 1, 'h', 'fts-only', ?, 0)",
                (rowid, f"c{rowid}", f"p{rowid % 50}", texts[rowid]),
            )
            conn.execute(
                "INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (?, ?)", (rowid, texts[rowid])
            )
        changed = rng.sample(sorted(texts), 150)
        delete_chunks(conn, [f"c{r}" for r in changed])
        for r in changed:
            texts.pop(r)
        conn.execute("COMMIT")
    doomed = rng.sample(sorted(texts), 100)
    conn.execute("BEGIN IMMEDIATE")
    purged = rowids_of_chunks(conn, [f"c{r}" for r in doomed])
    delete_chunks(conn, [f"c{r}" for r in doomed])
    rewrite_chunk_pages(conn, purged)
    conn.execute("COMMIT")
    survivors = conn.execute(
        "SELECT count(*) FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH 'word'"
    ).fetchone()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert [r for r in doomed if texts[r][:18].encode() in data] == []
    assert survivors == (len(texts) - len(doomed),)  # the rewritten chunks are still found


def test_the_chunks_moved_off_a_purged_chunks_pages_keep_their_full_text_index_entries(
    tmp_path: Path,
) -> None:
    """The neighbours of a purged chunk are moved, not re-indexed: the index segments of their
    terms stay byte for byte (re-indexing them with secure-delete cost seconds per forget); the
    rows holding their text, in the chunk table, are rebuilt, and the text the full-text table
    reads from them stays the same."""
    rng = random.Random(2)
    path = tmp_path / "memory.sqlite"
    conn = connect(str(path), readonly=False)
    migrate_connection(conn, AGENT_SCHEMA)
    texts = {r: f"chunk text {r:06d} " + "word " * rng.randint(10, 120) for r in range(1, 601)}
    conn.execute("BEGIN IMMEDIATE")
    for rowid, text in texts.items():
        conn.execute(
            "INSERT INTO memory_index_chunks(rowid, id, path, source, start_line, end_line, hash, "
            "model, text, updated_at) VALUES (?, ?, 'p', 'memory', 1, 1, 'h', 'fts-only', ?, 0)",
            (rowid, f"c{rowid}", text),
        )
        conn.execute("INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (?, ?)", (rowid, text))
    conn.execute("COMMIT")
    doomed = rng.sample(sorted(texts), 30)
    conn.execute("BEGIN IMMEDIATE")
    purged = rowids_of_chunks(conn, [f"c{r}" for r in doomed])
    delete_chunks(conn, [f"c{r}" for r in doomed])
    conn.execute("COMMIT")

    def segments() -> list[tuple[int, bytes]]:
        return conn.execute("SELECT id, block FROM memory_index_chunks_fts_data ORDER BY id").fetchall()

    def content() -> list[tuple[int, str]]:
        return conn.execute("SELECT chunk_rowid, text FROM memory_index_chunks_search ORDER BY 1").fetchall()

    before_segments, before_content = segments(), content()
    conn.execute("BEGIN IMMEDIATE")
    assert rewrite_chunk_pages(conn, purged) > 0
    conn.execute("COMMIT")
    assert segments() == before_segments
    assert content() == before_content
    conn.execute("INSERT INTO memory_index_chunks_fts(memory_index_chunks_fts) VALUES ('integrity-check')")
    found = conn.execute(
        "SELECT count(*) FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH 'word'"
    ).fetchone()
    assert found == (len(texts) - len(doomed),)
    conn.close()


def test_full_text_content_rows_purged_after_earlier_churn_leave_no_copy(tmp_path: Path) -> None:
    """The full-text table's content rows have pages of their own, rebuilt by earlier index
    runs like the chunks'; the rows that shared a purged row's content page are rewritten by
    that table's own page-neighbour rule (here with no chunk rows at all to go by)."""
    rng = random.Random(6)  # a seed whose rebuilds are known to keep a purged row's copy
    path = tmp_path / "memory.sqlite"
    conn = connect(str(path), readonly=False)
    migrate_connection(conn, AGENT_SCHEMA)
    texts: dict[int, str] = {}
    rowid = 0
    for _ in range(6):
        conn.execute("BEGIN IMMEDIATE")
        for _ in range(500):
            rowid += 1
            texts[rowid] = f"chunk text {rowid:06d} " + "word " * rng.randint(10, 120)
            conn.execute(
                "INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (?, ?)", (rowid, texts[rowid])
            )
        changed = rng.sample(sorted(texts), 150)
        conn.execute(f"DELETE FROM memory_index_chunks_fts WHERE rowid IN ({','.join(map(str, changed))})")
        for r in changed:
            texts.pop(r)
        conn.execute("COMMIT")
    doomed = rng.sample(sorted(texts), 100)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(f"DELETE FROM memory_index_chunks_fts WHERE rowid IN ({','.join(map(str, doomed))})")
    rewrite_chunk_pages(conn, doomed)
    conn.execute("COMMIT")
    conn.execute("INSERT INTO memory_index_chunks_fts(memory_index_chunks_fts) VALUES ('integrity-check')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert [r for r in doomed if texts[r][:18].encode() in data] == []


def test_staged_lines_purged_after_interleaved_sweeps_leave_no_claim_number(tmp_path: Path) -> None:
    """The keyed lineage (store/lines.py): sessions staged a few lines at a time, in turns, so
    their lines go into the middle of the tree and pages split. Once a session is forgotten (its
    seen hashes, its claims' origins, its number, in forget's order) no stored form of its claim
    numbers is left in the file, and every survivor's is."""
    from memoryd.store.inspect import integer_byte_forms
    from memoryd.store.lines import Line, add_lines, delete_sessions, forget_claims, forget_seen

    rng = random.Random(12)
    path = tmp_path / "memory.sqlite"
    conn = connect(str(path), readonly=False)
    migrate_connection(conn, AGENT_SCHEMA)
    claims: dict[str, list[int]] = {f"sess-{s:03d}": [] for s in range(120)}
    conn.execute("BEGIN IMMEDIATE")
    for _round in range(12):
        for sid in claims:
            batch = [rng.randrange(1 << 40, 1 << 48) for _ in range(rng.randint(1, 6))]
            claims[sid] += batch
            add_lines(conn, [Line(sid, None, c, "owner", 0, f"{rng.getrandbits(160):040x}") for c in batch])
    conn.execute("COMMIT")
    doomed = rng.sample(sorted(claims), 15)
    conn.execute("BEGIN IMMEDIATE")
    forget_seen(conn, doomed)
    forget_claims(conn, sorted({c for sid in doomed for c in claims[sid]}))
    delete_sessions(conn, doomed)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    left = [c for sid in doomed for c in claims[sid] if integer_byte_forms(c)[0] in data]
    assert left == []
    kept = [c for sid in claims if sid not in doomed for c in claims[sid]]
    assert all(integer_byte_forms(c)[0] in data for c in kept)
