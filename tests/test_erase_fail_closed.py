"""Erasure fails closed (DESIGN §5): one attribution rule, one exclusion set re-checked at every
commit, the subject excluded agent-wide. Each test builds a store no other erasure test uses and
checks the raw bytes of every file memoryd keeps, after the erasure and after later sweeps:

* a backlog: the subject, absent from the session's metadata, speaks only past what the per-file
  cap let ingestion read before the erasure;
* past a cap: one of her turns names no sender after line 4,096 of a long group chat;
* every form of a missing sender (empty, whitespace, not a string): the same turn for ingestion
  and for the erasure;
* a sweep that read before the erasure and commits after it;
* the whole family at once (hypothesis): group chats with random attribution gaps at random
  positions, random caps, and the erasure before, during or after random sweeps.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.agent_runtime import agent_runtime
from memoryd.failpoints import on_failpoint
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import erasure
from memoryd.retention.api import EraseRequest
from memoryd.settings import Settings, load_settings
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import REDIS_URL, make_settings

NADIA = "tenant:default:user:nadia"
GROUP_KEY = "agent:main:telegram:group:-100777"


def _turn(sender: Any, text: str, *, missing: bool = False) -> list[Msg]:
    """A user turn (its `senderId` as given; `missing`: no senderId at all) and the reply."""
    extra = {} if missing else {"senderId": sender}
    return [Msg("user", text, owner=False, extra=extra), Msg("assistant", "Noted: " + text)]


def _hers(i: int) -> str:
    return f"Remember that nadia's kayak{i}zq locker is by the saffron{i}zq pier gate."


def _theirs(who: str, i: int) -> str:
    return f"Remember that {who} books the harbor{i}wv room for the weekly review."


def _world(tmp_path: Path, sessions_root: Path, unique: str, **ingest: int) -> Settings:
    return make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        index={"sources": ["memory", "sessions"]},
        ingest=ingest,
    )


def _leaks(settings: Settings, markers: list[str]) -> list[str]:
    """Every file under the state directory and the workspace holding one of `markers` (raw
    bytes: every table, page, WAL frame and FTS segment, the corpus, temp files)."""
    found: list[str] = []
    for root in (settings.state_dir, settings.workspace_for("main")):
        for dirpath, _, names in os.walk(root):
            for name in names:
                data = (Path(dirpath) / name).read_bytes()
                found += [f"{name}: {m}" for m in markers if m.encode() in data]
    return found


async def _sweep_until_done(settings: Settings, redis: Any, rounds: int = 60) -> None:
    async with agent_runtime(settings, "main", redis=redis) as rt:
        for _ in range(rounds):
            report = await run_ingest_sweep(rt)
            if not report.messages_staged and not report.sessions_capped and not report.sessions_deferred:
                break
        await run_index_sync(rt)


async def _erase(settings: Settings, redis: Any) -> Any:
    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=NADIA))
    assert receipt.state == "complete", receipt
    return receipt


async def test_an_unread_backlog_of_a_participant_absent_from_the_metadata_is_erased(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = _world(tmp_path, sessions_root, unique, max_messages_per_file=40, max_messages_per_sweep=40)
    b = SessionStoreBuilder(sessions_root, "main")
    messages: list[Msg] = []
    for i in range(60):  # 120 messages by olga and omar
        messages += _turn("olga" if i % 2 else "omar", _theirs("olga" if i % 2 else "omar", i))
    for i in range(5):  # then nadia, whom the metadata never names
        messages += _turn("nadia", _hers(i)) + _turn("olga", _theirs("olga", 100 + i))
    b.add(GROUP_KEY, "sess-band", messages, participants=[{"actorId": "olga"}, {"actorId": "omar"}])
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)  # reads the first 40 messages only

    receipt = await _erase(settings, redis)
    assert receipt.verified, receipt.verification
    await _sweep_until_done(settings, redis)

    assert _leaks(settings, [f"kayak{i}zq" for i in range(5)]) == []
    assert _leaks(settings, ["harbor104wv"])  # the group goes on for the others


async def test_an_unattributed_turn_past_line_4096_makes_the_session_unseparable(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = _world(tmp_path, sessions_root, unique)
    b = SessionStoreBuilder(sessions_root, "main")
    messages: list[Msg] = []
    for i in range(2100):  # 4,200 messages, every user turn naming its sender
        who = ("olga", "nadia")[i % 2]
        messages += _turn(who, _theirs(who, i))
    messages[4150:4152] = _turn(None, _hers(0), missing=True)  # hers, naming nobody
    b.add(GROUP_KEY, "sess-long", messages, participants=[{"actorId": "olga"}, {"actorId": "nadia"}])
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)

    receipt = await _erase(settings, redis)
    assert receipt.artifacts.shared_sessions_removed == 1 and receipt.artifacts.shared_sessions_separated == 0
    await _sweep_until_done(settings, redis)

    assert _leaks(settings, ["kayak0zq"]) == []


@pytest.mark.parametrize(
    "sender", ["", " ", "\t", "  \n ", 42, None, {"id": "nadia"}, ["nadia"], True], ids=repr
)
async def test_a_turn_whose_sender_is_missing_in_any_form_is_unattributed_everywhere(
    tmp_path, sessions_root, unique, redis, sender
) -> None:
    settings = _world(tmp_path, sessions_root, unique)
    b = SessionStoreBuilder(sessions_root, "main")
    messages = _turn("olga", _theirs("olga", 1)) + _turn("nadia", _hers(1)) + _turn(sender, _hers(2))
    b.add(GROUP_KEY, "sess-odd", messages, participants=[{"actorId": "olga"}, {"actorId": "nadia"}])
    await _sweep_until_done(settings, redis)

    receipt = await _erase(settings, redis)
    assert receipt.artifacts.shared_sessions_removed == 1  # not separable: removed whole
    await _sweep_until_done(settings, redis)

    assert _leaks(settings, ["kayak1zq", "kayak2zq"]) == []


async def test_a_sweep_that_read_before_the_erasure_stages_nothing_of_the_subject_after_it(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = _world(tmp_path, sessions_root, unique)
    b = SessionStoreBuilder(sessions_root, "main")
    messages = (
        _turn("olga", _theirs("olga", 1)) + _turn("nadia", _hers(1)) + _turn("olga", _theirs("olga", 2))
    )
    b.add(GROUP_KEY, "sess-live", messages, participants=[{"actorId": "olga"}, {"actorId": "nadia"}])
    b.add("agent:main:dm:nadia", "sess-dm", _turn("nadia", _hers(2)), participants=[{"actorId": "nadia"}])

    erased = threading.Event()
    paused = threading.Event()

    def hold_the_first_read() -> None:  # in the sweep's reading thread
        if not paused.is_set():
            paused.set()
            assert erased.wait(60)

    async def sweep() -> None:
        async with agent_runtime(settings, "main", redis=redis) as rt:
            await run_ingest_sweep(rt)

    with on_failpoint("ingest.scan.open", hold_the_first_read), anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sweep)
            await anyio.to_thread.run_sync(paused.wait)
            try:
                await _erase(settings, redis)  # while the sweep holds what it read
            finally:
                erased.set()
    await _sweep_until_done(settings, redis)

    assert _leaks(settings, ["kayak1zq", "kayak2zq"]) == []
    assert _leaks(settings, ["harbor2wv"])  # olga's part of the group stays


# --- the family ---------------------------------------------------------------------------------

_ODD_SENDERS = st.sampled_from(["", " ", "\t", 7, None, "MISSING"])


@st.composite
def group_chats(draw: st.DrawFn) -> dict[str, Any]:
    """A group chat of olga, omar and nadia: each turn by one of them, or with an odd sender at
    a random place, nadia's text marked; caps; when the erasure runs and what comes after it."""
    n = draw(st.integers(4, 40))
    turns: list[tuple[Any, bool]] = []  # (sender, is hers)
    for _ in range(n):
        who = draw(st.sampled_from(["olga", "omar", "nadia"]))
        odd = draw(st.integers(0, 9)) == 0
        turns.append((draw(_ODD_SENDERS) if odd else who, who == "nadia"))
    return {
        "turns": turns,
        "in_metadata": draw(st.booleans()),
        "per_file": draw(st.integers(5, 50)),
        "sweeps_before": draw(st.integers(0, 2)),
        "during": draw(st.booleans()),  # the erasure runs while a sweep holds what it read
        "later": draw(st.lists(st.sampled_from(["olga", "nadia"]), max_size=4)),
    }


def _messages(turns: list[tuple[Any, bool]], start: int) -> list[Msg]:
    out: list[Msg] = []
    for i, (sender, hers) in enumerate(turns, start=start):
        text = _hers(i) if hers else _theirs("someone", i)
        out += _turn(sender, text, missing=sender == "MISSING")
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(chat=group_chats())
def test_no_word_of_the_subject_survives_any_group_chat_or_interleaving(tmp_path_factory, chat) -> None:
    tmp = tmp_path_factory.mktemp("family")
    root = tmp / "sessions"
    root.mkdir()
    settings_ = _world(
        tmp,
        root,
        tmp.name,
        max_messages_per_file=chat["per_file"],
        max_messages_per_sweep=chat["per_file"],
    )
    participants = [{"actorId": "olga"}, {"actorId": "omar"}] + (
        [{"actorId": "nadia"}] if chat["in_metadata"] else []
    )
    b = SessionStoreBuilder(root, "main")
    messages = _messages(chat["turns"], 0)
    b.add(GROUP_KEY, "sess-family", messages, participants=participants)
    # Her turns naming no sender can be known as hers only where she is known in the session.
    findable = chat["in_metadata"] or any(sender == "nadia" for sender, _ in chat["turns"])
    hers = [
        f"kayak{i}zq" for i, (sender, h) in enumerate(chat["turns"]) if h and (findable or sender == "nadia")
    ]

    async def scenario() -> None:
        from redis.asyncio import Redis

        redis = Redis.from_url(REDIS_URL)
        try:
            async with agent_runtime(settings_, "main", redis=redis) as rt:
                for _ in range(chat["sweeps_before"]):
                    await run_ingest_sweep(rt)
            if chat["during"]:
                await _erase_during_a_sweep(settings_, redis)
            else:
                await erasure.run_erase(settings_, redis, EraseRequest(scope=NADIA))
            later = [(who, who == "nadia") for who in chat["later"]]
            b.append("sess-family", _messages(later, 1000), len(messages))
            await _sweep_until_done(settings_, redis)
        finally:
            await redis.aclose()

    anyio.run(scenario)
    later_hers = [f"kayak{1000 + i}zq" for i, who in enumerate(chat["later"]) if who == "nadia"]
    assert _leaks(settings_, hers + later_hers) == []


async def _erase_during_a_sweep(settings_: Settings, redis: Any) -> None:
    erased, paused = threading.Event(), threading.Event()

    def hold() -> None:
        if not paused.is_set():
            paused.set()
            assert erased.wait(60)

    async def sweep() -> None:
        try:
            async with agent_runtime(settings_, "main", redis=redis) as rt:
                await run_ingest_sweep(rt)
        finally:
            paused.set()  # a sweep with nothing to read never reaches the failpoint

    with on_failpoint("ingest.scan.open", hold), anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sweep)
            await anyio.to_thread.run_sync(paused.wait)
            try:
                await erasure.run_erase(settings_, redis, EraseRequest(scope=NADIA))
            finally:
                erased.set()


async def test_a_dreaming_phase_that_read_its_pool_before_the_erasure_publishes_nothing_of_her(
    tmp_path, sessions_root, unique, redis
) -> None:
    from memoryd.dreaming.sweep import run_dreaming

    settings = _world(tmp_path, sessions_root, unique)
    b = SessionStoreBuilder(sessions_root, "main")
    # Turns the owner marks as trusted, so the light phase takes them.
    messages = [
        Msg(m.role, m.text, owner=True, extra=m.extra)
        for m in _turn("olga", _theirs("olga", 1))
        + _turn("nadia", _hers(1))
        + _turn("olga", _theirs("olga", 2))
    ]
    b.add(GROUP_KEY, "sess-dream", messages, participants=[{"actorId": "olga"}, {"actorId": "nadia"}])
    await _sweep_until_done(settings, redis)

    erased = threading.Event()

    def erase_now() -> None:  # in the phase, between reading its pool and publishing (once)
        if erased.is_set():
            return
        erased.set()

        async def erase() -> None:
            from redis.asyncio import Redis

            client = Redis.from_url(REDIS_URL)
            try:
                await _erase(settings, client)
            finally:
                await client.aclose()

        done = threading.Thread(target=anyio.run, args=(erase,))
        done.start()
        done.join(60)

    async with agent_runtime(settings, "main", redis=redis) as rt:
        with on_failpoint("dream.select", erase_now):
            await run_dreaming(rt, ["light"])

    assert erased.is_set()
    assert _leaks(settings, ["kayak1zq"]) == []  # the phase read its pool again after the erasure


# --- live: a daemon with its watcher, turns arriving while the erasure runs ---------------------


@pytest.mark.slow
async def test_an_erasure_enqueued_while_turns_arrive_leaves_nothing_of_her_in_a_live_daemon(
    tmp_path, unique
) -> None:
    from memoryd.runtime.wire import queue_name
    from tests.daemon_harness import (
        DaemonProcess,
        NotifySocket,
        cleanup_redis,
        run_cli,
        write_config,
    )
    from tests.polling import until

    sessions_root = tmp_path / "sessions"
    host = f"h{unique}"
    b = SessionStoreBuilder(sessions_root, "main")
    first = _turn("olga", _theirs("olga", 0)) + _turn("nadia", _hers(0))
    b.add(GROUP_KEY, "sess-live", first, participants=[{"actorId": "olga"}, {"actorId": "nadia"}])
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=REDIS_URL,
        host_id=host,
        schedule=True,
        extra='[index]\nsources = ["memory", "sessions"]\n[dreaming]\nenabled = false\n',
    )
    settings_ = load_settings(config)
    notify = NotifySocket(tmp_path / "n.sock")
    daemon = DaemonProcess(config, notify, tmp_path / "daemon.log").start()
    stop = threading.Event()
    written = {"n": len(first)}

    def writer() -> None:  # olga and nadia keep talking in the group
        i = 1
        while not stop.is_set():
            b.append("sess-live", _turn("olga", _theirs("olga", i)) + _turn("nadia", _hers(i)), written["n"])
            written["n"] += 4
            i += 1
            stop.wait(0.05)

    try:
        notify.wait_for("READY=1", timeout_s=30)
        feeding = threading.Thread(target=writer)
        feeding.start()
        try:
            await anyio.sleep(1.0)
            done = await anyio.to_thread.run_sync(
                lambda: run_cli(
                    config,
                    "enqueue",
                    "erase",
                    "--scope",
                    NADIA,
                    "--queue",
                    queue_name(host),
                    "--wait",
                    timeout=120,
                )
            )
            assert done.returncode == 0, done.stdout + done.stderr
            await anyio.sleep(1.0)  # her later turns arrive too
        finally:
            stop.set()
            feeding.join()
        last = f"harbor{(written['n'] - len(first)) // 4}wv"
        await until(lambda: bool(_leaks(settings_, [last])), "olga's last turn staged", 60)
        assert daemon.stop() == 0
        hers = [f"kayak{i}zq" for i in range(written["n"] // 4 + 1)]
        assert _leaks(settings_, hers) == [], daemon.log()
    finally:
        daemon.kill()
        notify.close()
        cleanup_redis(REDIS_URL, [host], ["main"])
