"""A retained archive that no session names (no live window, no key, nothing memoryd recorded of
it) and that quotes forgotten text loses its index chunks in a non-empty forget (reference F-09:
the stale chunk of an orphan `.deleted` archive is purged and search no longer returns it);
archives of known sessions, and orphans that quote nothing forgotten, keep theirs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoryd.forget.index_plan import ChunkRow, plan_index
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import run_forget
from memoryd.forget.scrub import Selection
from memoryd.index.search import run_search
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings
from tests.dream_kit import runtime

SECRET = "Remember the launch code is violet-mongoose-42 for the autumn."


async def _indexed_sessions(rt) -> list[str]:
    return await rt.store.read(
        lambda c: sorted(
            r[0]
            for r in c.execute(
                "SELECT DISTINCT session_id FROM memory_index_chunks WHERE source = 'sessions'"
            )
        )
    )


async def test_an_orphan_archive_quoting_forgotten_text_loses_its_chunks(
    tmp_path, sessions_root, unique, redis
):
    b = SessionStoreBuilder(sessions_root, "main")
    b.add("agent:main:main", "target", [Msg("user", SECRET)], chatType="direct")
    b.add("agent:main:signal:dm:omar", "survivor", [Msg("user", "Remember the orchard rota changes.")])
    # A known session's archive that happens to quote the text: attributable, so it stays.
    b.archive("survivor", "deleted", messages=[Msg("assistant", f"You told me: {SECRET}")])
    # Orphans: archives of sessions nothing names any more.
    b.archive(
        "4f1c9a6e-orphan",
        "deleted",
        messages=[Msg("assistant", f"A dream about the note: {SECRET} It glowed.", owner=False)],
    )
    b.archive(
        "7d2e0b1f-unrelated", "deleted", messages=[Msg("assistant", "A dream about harbour cranes at dusk.")]
    )
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        agents={"main": {"workspace": str(tmp_path / "ws")}},
        index={"sources": ["memory", "sessions"]},
    )
    async with runtime(settings, redis) as rt:
        await run_ingest_sweep(rt)
        assert (await run_index_sync(rt)).ok
        assert await _indexed_sessions(rt) == ["4f1c9a6e-orphan", "7d2e0b1f-unrelated", "survivor", "target"]
        preview = await run_forget(rt, ForgetRequest(agent="main", sessions=["target"], dry_run=True))
        applied = await run_forget(rt, ForgetRequest(agent="main", sessions=["target"]))
        expected = preview.to_json()
        expected["counts"] = {**expected["counts"], "sessionsRecordedForgotten": 1}  # only a purge records
        assert applied.to_json() == {**expected, "dryRun": False}
        assert await _indexed_sessions(rt) == ["7d2e0b1f-unrelated", "survivor"]
        hits = await run_search(rt, "mongoose")
        assert [h.path for h in hits.results] == [
            p for p in (h.path for h in hits.results) if "survivor" in p
        ]
        # An empty selection removes nothing, whatever orphans there are.
        await run_forget(rt, ForgetRequest(agent="main", hook_sources=["no-such-source"]))
        assert await _indexed_sessions(rt) == ["7d2e0b1f-unrelated", "survivor"]


_WORD = st.text(alphabet="abcdefghij-42 ", min_size=1, max_size=12)


@given(
    body=st.text(alphabet="abcdefghijklmnop ", min_size=12, max_size=60).filter(
        lambda t: len(t.split()) >= 2
    ),
    before=_WORD,
    after=_WORD,
    role=st.sampled_from(["User", "Assistant"]),
    spaces=st.sampled_from([" ", "\n", "  \t"]),
)
def test_an_orphan_chunk_is_selected_exactly_when_it_quotes_a_selected_snippet(
    body, before, after, role, spaces
):
    said = " ".join(body.split())
    if len(said) < 12:
        return
    quoting = f"{before}{spaces}{spaces.join(said.split(' '))}{spaces}{after}"
    sel = Selection("main", frozenset({"target"}), frozenset(), (f"{role}: {said}",))
    plan = plan_index(
        [_chunk(1, quoting), _chunk(2, "nothing of it here at all, only cranes")],
        [],
        sel=sel,
        changed_paths=(),
        removed_paths=(),
        excluded_session_ids=(),
        embedding_cache_rows=0,
    )
    assert plan.chunk_rowids == ((1,) if said not in "nothing of it here at all, only cranes" else (1, 2))
    empty = Selection("main", frozenset(), frozenset(), (f"{role}: {said}",))
    assert (
        plan_index(
            [_chunk(1, quoting)],
            [],
            sel=empty,
            changed_paths=(),
            removed_paths=(),
            excluded_session_ids=(),
            embedding_cache_rows=0,
        ).chunk_rowids
        == ()
    )


def _chunk(rowid: int, text: str) -> ChunkRow:
    return ChunkRow(
        rowid,
        f"c{rowid}",
        f"sessions/main/orphan-{rowid}",
        "sessions",
        text,
        f"orphan-{rowid}",
        "untrusted",
        "interactive",
        True,
        False,
    )
