"""The keyed lineage (daemon/store/lines.py: numbered sessions, one line per staged message as
origin and seen hash) is an artifact forget reaches: a forgotten session's number, its lines and
every integer form of its claims go, whatever else planted them there (an origin recorded
without a line, a seen hash alone, a line of the session under a second session key), and the
other session's lines stay. The erasure side (a planted claim number or session id found by the
verifier) is in tests/test_verify_plants.py."""

from __future__ import annotations

from memoryd.derivations import claim_number
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import run_forget
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.store.lines import Line, add_lines
from memoryd.store.origins import EntryOrigin, record_origins
from memoryd.store.seen_hashes import add_seen, load_seen
from tests.builders import Msg
from tests.conftest import make_settings
from tests.dream_kit import runtime

SAID = "Remember the lantern code is amber seven."
UNSTAGED = "Remember the cellar key hangs by the stove."
KEPT = "Remember the ferry leaves at nine sharp."


def _settings(tmp_path, sessions_root, unique):
    return make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        agents={"main": {"workspace": str(tmp_path / "ws")}},
    )


def _lines(conn) -> list[tuple]:
    return conn.execute(
        "SELECT s.session_id, s.session_key, l.claim, l.seen FROM ingest_lines l "
        "JOIN ingest_sessions s ON s.session_no = l.session_no ORDER BY 1, 2, 3"
    ).fetchall()


def _plant(conn) -> None:
    unstaged = claim_number("User: " + UNSTAGED)
    record_origins(
        conn, "main", [EntryOrigin(f"memory:claim:{unstaged:012x}", "main", "target", None, "owner", 5)]
    )
    add_seen(conn, {"main:target": ["a-seen-hash-only"]})
    add_lines(
        conn, [Line("target", "agent:main:second-key", claim_number("User: " + SAID), "owner", 6, None)]
    )


async def test_a_forget_removes_the_sessions_number_lines_and_claim_numbers_wherever_planted(
    tmp_path, sessions_root, unique, redis, store_builder
) -> None:
    b = store_builder
    b.add("agent:main:target", "target", [Msg("user", SAID)], chatType="direct")
    b.add("agent:main:main", "keep", [Msg("user", KEPT)], chatType="direct")
    async with runtime(_settings(tmp_path, sessions_root, unique), redis) as rt:
        await run_ingest_sweep(rt)
        store = rt.require_store()
        await store.write(_plant, fence=None)
        before = await store.read(_lines)
        targets = {claim_number("User: " + SAID), claim_number("User: " + UNSTAGED)}
        assert {r[2] for r in before if r[0] == "target"} >= targets
        kept = [r for r in before if r[0] == "keep"]
        assert kept and kept[0][2] == claim_number("User: " + KEPT) and kept[0][3]

        report = await run_forget(rt, ForgetRequest(agent="main", sessions=["target"]))
        assert report.session_ids == ["target"] and not report.dry_run

        assert await store.read(_lines) == kept
        sessions = await store.read(lambda c: c.execute("SELECT session_id FROM ingest_sessions").fetchall())
        assert sessions == [("keep",)]
        assert await store.read(load_seen, ["main:target"]) == {}  # no seen hash left
        for claim in targets:  # no integer form of its claims in any table's row
            found = await store.read(
                lambda c, n=claim: c.execute(
                    "SELECT count(*) FROM ingest_lines WHERE claim = ?", (n,)
                ).fetchone()
            )
            assert found == (0,)
        # The next sweep does not bring the forgotten session back.
        await run_ingest_sweep(rt)
        assert await store.read(_lines) == kept


NORA = "Remember that the violet mongoose launch is on Friday at noon."


async def test_an_erasure_removes_the_subjects_lines_wherever_planted_and_verifies(
    tmp_path, sessions_root, unique, redis
) -> None:
    """Erasing a user forgets their session through the same purge: its number, its lines and
    the planted ones (an origin recorded without a line, a seen hash alone, a line under a
    second session key) go, and the verifier, which reads every table and the raw pages for
    the claim's integer forms, passes."""
    from memoryd.agent_runtime import agent_runtime
    from memoryd.ops import erasure
    from memoryd.retention import api
    from memoryd.retention.api import EraseRequest
    from tests.builders import SessionStoreBuilder

    settings = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    b = SessionStoreBuilder(sessions_root, "main")
    b.add("agent:main:dm:nora", "sess-nora", [Msg("user", NORA)], participants=[{"actorId": "nora"}])
    b.add("agent:main:main", "keep", [Msg("user", KEPT)], chatType="direct")
    claim = claim_number("User: " + NORA)

    def plant(conn) -> None:
        record_origins(
            conn,
            "main",
            [EntryOrigin(f"memory:claim:{claim ^ 1:012x}", "main", "sess-nora", None, "owner", 5)],
        )
        add_seen(conn, {"main:sess-nora": ["a-seen-hash-only"]})
        add_lines(conn, [Line("sess-nora", "agent:main:other-key", claim, "owner", 6, None)])

    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        await rt.require_store().write(plant, fence=None)
        assert claim in {r[2] for r in await rt.require_store().read(_lines)}
    await api.write_object(settings, redis, "tenant:default:user:nora", "nora's note")
    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope="tenant:default:user:nora"))
    assert receipt.verified, receipt.verification
    async with agent_runtime(settings, "main", redis=redis) as rt:
        lines = await rt.require_store().read(_lines)
        sessions = await rt.require_store().read(
            lambda c: c.execute("SELECT session_id FROM ingest_sessions").fetchall()
        )
    assert [r[0] for r in lines] == ["keep"] and sessions == [("keep",)]
