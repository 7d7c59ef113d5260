"""Recall scoped to who is asking: two users' direct sessions and a group chat with both, recalled
as each; merged entries; what a read sees between a purge's first commit and the index purge; the
rule over random lineage sets."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from memoryd.agent_runtime import agent_runtime
from memoryd.index.recall_scope import HitLineage, visible_to
from memoryd.index.search import run_search
from memoryd.store.tombstones import record_tombstones
from tests.recall_world import AGENT, ANN_DIRECT, BEN_DIRECT, GROUP, build_world, ingest_and_index

QUERIES = ("quince", "walnut", "marigold picnic", "lantern", "savings account", "allergy")


async def test_recall_as_one_user_never_returns_what_derives_from_the_others_direct_session(
    redis, tmp_path, sessions_root, unique
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await ingest_and_index(rt)
        seen: dict[str, set[str]] = {"ann": set(), "ben": set()}
        withheld = {"ann": 0, "ben": 0}
        for user, foreign in (("ann", BEN_DIRECT), ("ben", ANN_DIRECT)):
            for query in QUERIES:
                report = await run_search(rt, query, limit=50, participant=user)
                assert report.scope == "participant" and report.participant == user
                withheld[user] += report.withheld
                for hit in report.results:
                    lineage = {s.session_id for s in hit.sessions}
                    assert foreign not in lineage, (user, query, hit)
                    assert hit.session_id != foreign
                    seen[user].add(hit.key)
        # Ben sees the group's picnic, never Ann's allergy nor the merged entry that cites it.
        assert "memory:picnic" in seen["ben"] and "memory:walnut" in seen["ben"]
        assert not {"memory:quince", "memory:merged", "memory:orphan"} & seen["ben"]
        assert {"memory:quince", "memory:merged", "memory:picnic"} <= seen["ann"]
        assert "memory:orphan" not in seen["ann"]  # unknown lineage fails closed
        assert withheld["ben"] > 0 and withheld["ann"] > 0
        # Owner-level memory (an owner line of MEMORY.md with no lineage) is everyone's.
        for user in ("ann", "ben"):
            owner = await run_search(rt, "lantern spare key", participant=user)
            assert any("blue drawer" in h.snippet for h in owner.results)
        # The agent scope recalls everything.
        everything = await run_search(rt, "quince", limit=50)
        assert everything.withheld == 0 and everything.scope == "agent"
        assert {"memory:quince", "memory:merged"} <= {h.key for h in everything.results}


async def test_a_hit_names_its_sessions_with_keys_dates_and_trust(
    redis, tmp_path, sessions_root, unique
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await ingest_and_index(rt)
        report = await run_search(rt, "marigold quince food", participant="ann")
        [hit] = [h for h in report.results if h.key == "memory:merged"]
        assert [(s.session_id, s.session_key) for s in hit.sessions] == [
            (ANN_DIRECT, "agent:main:dm:ann"),
            (GROUP, "agent:main:telegram:group:-100"),
        ]
        assert all(s.observed_at == 1_700_000_000_000 for s in hit.sessions)
        transcript = await run_search(rt, "walnut savings", participant="ben")
        [chunk] = [h for h in transcript.results if h.session_id == BEN_DIRECT]
        assert chunk.key.startswith("chunk:") and chunk.sessions[0].session_key == "agent:main:dm:ben"


async def test_a_read_after_a_forgets_first_commit_returns_nothing_derived_from_it(
    redis, tmp_path, sessions_root, unique
) -> None:
    # A purge commits the forgotten record first and purges the index after: a read in between
    # must already miss every entry whose lineage has the session, merged ones included.
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await ingest_and_index(rt)
        assert {"memory:quince", "memory:merged"} <= {h.key for h in (await run_search(rt, "quince")).results}
        async with rt.lock().hold() as lease:
            await rt.require_store().write(
                record_tombstones, AGENT, [ANN_DIRECT], int(time.time() * 1000), fence=lease.fence
            )
        async with agent_runtime(settings, AGENT, readonly=True, redis=False) as reader:
            for query in ("quince", "allergy", "marigold picnic"):
                report = await run_search(reader, query, limit=50)
                for hit in report.results:
                    assert ANN_DIRECT not in {s.session_id for s in hit.sessions}
                    assert "quince" not in hit.snippet.lower()
            assert "memory:picnic" in {h.key for h in (await run_search(reader, "marigold picnic")).results}


sessions_ids = st.sampled_from(["s1", "s2", "s3", "s4", "s5"])
actors = st.sampled_from(["ann", "ben", "cat"])


@given(
    lineage=st.frozensets(sessions_ids, max_size=4),
    participants=st.dictionaries(sessions_ids, st.frozensets(actors, max_size=3)),
    keys=st.frozensets(st.sampled_from(["k1", "k2"]), max_size=2),
    unresolved=st.booleans(),
    origin=st.sampled_from([None, "owner", "agent", "untrusted", "system"]),
    asker=actors,
)
def test_a_hit_is_visible_only_when_every_lineage_session_includes_the_asker_or_it_is_owner_level(
    lineage, participants, keys, unresolved, origin, asker
) -> None:
    hit = HitLineage(sessions=lineage, entry_keys=keys, unresolved=unresolved, origin_class=origin)
    shown = visible_to(hit, participants, asker)
    foreign = any(asker not in participants.get(s, frozenset()) for s in lineage)
    if foreign:
        assert not shown  # one session without the asker withholds the hit, whatever else holds
    owner = not lineage and not keys and not unresolved and origin == "owner"
    assert shown == (owner or (bool(lineage) and not unresolved and not foreign))
