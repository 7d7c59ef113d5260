"""The peer bench's pure parts (the bench itself runs OpenClaw and never runs here): the plan
of the agent, what the writer script is given, the view check and the table."""

from __future__ import annotations

import statistics

from bench.peer.generator import OWNER, expected, plan_agent, writer_spec
from bench.peer.run import busiest_other, operations, view_mismatches
from bench.peer.table import PeerRow, Samples, format_markdown, format_text


def test_the_plan_is_deterministic_and_has_every_kind_of_session() -> None:
    plans = plan_agent(300)
    assert [p.session_id for p in plans] == [p.session_id for p in plan_agent(300)]
    kinds = {p.kind for p in plans}
    assert kinds == {"direct", "group", "gmail"}
    groups = [p for p in plans if p.kind == "group"]
    assert all(2 <= len(p.participants) <= 3 for p in groups) and any(
        len(p.participants) == 3 for p in groups
    )
    assert len({actor for p in plans for _, actor in p.participants}) == 19
    gmail = [p for p in plans if p.kind == "gmail"]
    assert all(p.key.startswith("agent:peer:hook:gmail:") and p.hook_source == "gmail" for p in gmail)
    owners = {any(t.owner for t in p.turns) for p in gmail}
    assert owners == {True, False}  # forwarded by the owner, and external mail
    user_turns = [t for p in groups for t in p.turns if t.role == "user"]
    assert {t.owner for t in user_turns} == {True, False}
    assert all(t.owner == (t.sender == OWNER) for t in user_turns)
    lengths = [len(t.text) for p in plans for t in p.turns]
    assert 150 <= statistics.median(lengths) <= 400 and max(lengths) > 1000
    assert all(p.key == p.key.lower() for p in plans)


def test_the_writer_is_given_entries_messages_and_participants_in_openclaw_shapes() -> None:
    plans = plan_agent(40)
    spec = writer_spec(plans)
    by_id = {s["sessionId"]: s for s in spec["sessions"]}
    gmail = next(p for p in plans if p.kind == "gmail")
    assert by_id[gmail.session_id]["entry"]["hookExternalContentSource"] == "gmail"
    group = next(p for p in plans if p.kind == "group")
    entry = by_id[group.session_id]["entry"]
    assert entry["chatType"] == "group" and entry["delivery"]["route"]["channel"] == group.channel
    first = by_id[group.session_id]["messages"][0]
    assert (
        first["role"] == "user"
        and first["__openclaw"]["senderIdentity"]["id"] == first["__openclaw"]["senderId"]
    )
    assert ("senderIsOwner" in first["__openclaw"]) == (first["__openclaw"]["senderId"] == OWNER[1])
    recorded = [p["identity"]["id"] for p in by_id[group.session_id]["participants"]]
    assert recorded == [actor for _, actor in group.participants]


def test_the_view_check_names_what_differs() -> None:
    plans = plan_agent(30)
    want = expected(plans)
    view = {sid: list(ids) for sid, ids in want.participants.items()}
    gmail = set(want.gmail)
    assert view_mismatches(want, view, dict(view), {"OpenClaw": gmail, "memoryd": set(gmail)}) == []
    fewer = dict(list(view.items())[1:])
    other = {**view, plans[3].session_id: ["someone"]}
    problems = view_mismatches(want, view, fewer, {"OpenClaw": gmail, "memoryd": set()})
    assert any(p.startswith("memoryd lists 29 sessions, 30 were written") for p in problems)
    assert any("gmail" in p and p.startswith("memoryd") for p in problems)
    assert any("participants written" in p for p in view_mismatches(want, view, other, {}))


def test_operations_select_a_participant_of_several_groups_on_both_sides() -> None:
    plans = plan_agent(300)
    who = busiest_other(plans)
    assert who != OWNER[1] and sum(who in {a for _, a in p.participants} for p in plans) >= 5
    ops = operations(plans)
    assert [o.name.split(",")[0].split(" '")[0] for o in ops] == [
        "forget dry run",
        "search",
        "search",
        "search",
        "index --force",
        "forget apply",
        "session backfill apply",
    ]
    assert all(o.writes for o in ops if "apply" in o.name)
    assert all(who in o.openclaw and who in o.memoryd for o in ops if o.same_ids)


def test_the_table_gives_ratios_and_the_verdict_against_the_target() -> None:
    fast = PeerRow(
        "search", 1500, Samples((10.0, 12.0, 11.0), (600.0,) * 3), Samples((1.0, 1.1, 0.9), (80.0,) * 3)
    )
    slow = PeerRow("index", 1500, Samples((10.0,) * 3, (600.0,) * 3), Samples((2.0,) * 3, (80.0,) * 3))
    fat = PeerRow("forget", 300, Samples((10.0,) * 3, (300.0,) * 3), Samples((0.5,) * 3, (90.0,) * 3))
    assert fast.speed == 11.0 and fast.passed
    assert slow.speed == 5.0 and not slow.passed
    assert fat.rss_ratio == 0.3 and not fat.passed
    text = format_text([fast, slow, fat])
    assert "11.0x" in text and "PASS" in text and "FAIL" in text and "1,500" in text
    assert format_markdown([fast]).splitlines()[0].startswith("| operation | sessions | OpenClaw | memoryd")
    row = fast.as_json()
    assert (row["operation"], row["sessions"], row["speed"], row["pass"]) == ("search", 1500, 11.0, True)


def test_memoryd_is_measured_from_compiled_bytecode() -> None:
    import importlib.util
    from pathlib import Path

    import memoryd
    from bench.peer.memoryd_side import compile_bytecode

    compile_bytecode()
    for module in Path(memoryd.__file__).parent.rglob("*.py"):
        assert Path(importlib.util.cache_from_source(str(module))).exists(), module


def test_a_written_agent_is_cached_by_size_and_by_what_writes_it(tmp_path) -> None:
    from bench.peer.install import Peer
    from bench.peer.run import agent_cache_dir

    peer = Peer(tmp_path)
    assert agent_cache_dir(peer, 300) == agent_cache_dir(peer, 300)
    assert agent_cache_dir(peer, 300) != agent_cache_dir(peer, 1500)
    assert agent_cache_dir(peer, 300).parent == tmp_path / "agents"


def test_a_commands_peak_rss_is_its_own_not_the_bench_process() -> None:
    """A child made by (v)fork starts with the bench process's pages: its ru_maxrss from wait4
    would be at least the bench's own peak (the plans and the writer's JSON at 1,500 sessions)."""
    import os

    from bench.peer.process import measure

    ballast = bytearray(300 * 1024 * 1024)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1  # resident, as the bench's own data is
    got = measure(["/bin/true"], dict(os.environ))
    assert got.returncode == 0
    assert got.rss_mib < 50, got.rss_mib
    del ballast
