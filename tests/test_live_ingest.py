"""Live ingestion on a real daemon process and real Redis: a message appended to a transcript
is staged and searchable within seconds although the interval sweeps are 300 s apart; a burst
of appends is a few sweeps, not one each; an excluded session is never read on the way."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.builders import Msg, conversation, exchange
from tests.daemon_harness import (
    cleanup_redis,
    run_cli,
)
from tests.ingest_harness import FifoWatch, corpus_text, make_fifo
from tests.live_harness import World
from tests.openclaw_fixture import OpenClawDbBuilder
from tests.openclaw_fixture import sid as oc_sid
from tests.polling import until

pytestmark = pytest.mark.slow  # runs memoryd as a process


@pytest.fixture
def world(tmp_path: Path, redis_url: str, unique: str):
    w = World(tmp_path, redis_url, unique, 'sources = ["memory", "sessions"]\n')
    yield w
    w.cleanup()


async def _first_sweep_done(w: World) -> None:
    await until(lambda: "orchard" in w.corpus() and "harbour" in w.corpus(), "the first sweep", 30)


def _search_finds(w: World, word: str) -> bool:
    done = run_cli(w.config, "search", "--agent", w.agent, word, "--json")
    return done.returncode == 0 and word in done.stdout and json.loads(done.stdout)["results"] != []


async def test_an_appended_message_is_staged_and_searchable_within_seconds(world):
    world.start()
    await _first_sweep_done(world)
    started = time.monotonic()
    world.append("s-one", "Remember that the quincewood gate code changes on Fridays.")
    await until(lambda: "quincewood" in world.corpus(), "the appended message in the corpus", 10)
    staged_s = time.monotonic() - started
    await until(lambda: _search_finds(world, "quincewood"), "search finding the appended message", 15, 0.2)
    assert staged_s < 10  # the interval sweep is 300 s away: only the watcher can have done it
    # The agent without a sessions directory: one line, and the daemon serves on.
    assert world.daemon is not None and world.daemon.proc is not None and world.daemon.proc.poll() is None
    lines = [line for line in world.daemon.log().splitlines() if "cannot watch" in line]
    assert len(lines) == 1 and world.ghost in lines[0] and "interval sweeps cover it" in lines[0]
    assert "Traceback" not in world.daemon.log()


async def test_a_burst_of_appends_is_a_few_sweeps_not_a_storm(world):
    world.start()
    await _first_sweep_done(world)
    await until(lambda: world.sweeps_done() >= 1, "the first sweep's job counted", 10)
    await until(lambda: world.live_sweeps_enqueued() >= 1, "the catch-up sweep once watching", 10)
    enqueued_before = world.live_sweeps_enqueued()
    for i in range(200):
        world.append(
            "s-one" if i % 2 else "s-two", f"Remember burst item number {i:03d} of the tidewater list."
        )
    # 100 messages per session against the per-file cap of 80: two sweeps read them all.
    await until(lambda: world.corpus().count("tidewater") == 200, "all 200 burst messages staged", 30)
    # A storm would be enqueued while the burst is written, long before its last message is staged.
    assert 1 <= world.live_sweeps_enqueued() - enqueued_before <= 6


async def test_a_live_sweep_and_its_index_sync_look_only_at_the_session_that_changed(world):
    world.start()
    await _first_sweep_done(world)
    await world.quiet("after the first sweep")
    world.append("s-one", "Remember that the wicker basket holds the spare fuses.")
    await until(lambda: _search_finds(world, "wicker"), "search finding the appended message", 15, 0.2)
    await world.quiet("after the appended message")
    sweep = world.live_results()[-1]
    # Only s-one was stated: s-two, unchanged, is not counted as looked at.
    assert (sweep["sessionsScanned"], sweep["sessionsUnchanged"], sweep["messagesStaged"]) == (1, 0, 1)
    index = world.live_results("index_sync")[-1]
    assert (index["files"]["indexed"], index["files"]["removed"]) == (1, 0)
    assert index["files"]["unchanged"] == 0  # s-two's source was not listed nor planned


@pytest.fixture
def excluded_world(tmp_path: Path, redis_url: str, unique: str):
    w = World(tmp_path, redis_url, unique, "")
    w.builder.add(f"agent:{w.agent}:signal:direct:omar", "s-ex", [], channel="signal", chatType="direct")
    fifo = w.builder.dir / "s-ex.jsonl"
    make_fifo(fifo)
    with FifoWatch([fifo]) as watch:
        yield w, watch
    w.cleanup()


async def test_an_excluded_session_is_never_read_by_the_sweeps_a_change_starts(excluded_world):
    w, watch = excluded_world
    w.start()
    await _first_sweep_done(w)
    # The excluded session's metadata changes and an admitted session gets a message.
    w.builder.entries[f"agent:{w.agent}:signal:direct:omar"]["updatedAt"] += 1000
    w.builder.save()
    w.append("s-two", "Remember that the juniper shed key moved to the red box.")
    await until(lambda: "juniper" in w.corpus(), "the admitted message in the corpus", 10)
    assert watch.opened == []
    assert "POISON" not in w.corpus()


@pytest.fixture
def backlog_world(tmp_path: Path, redis_url: str, unique: str):
    w = World(
        tmp_path, redis_url, unique, "", caps="max_messages_per_sweep = 20\nmax_messages_per_file = 10\n"
    )
    w.builder.add(
        f"agent:{w.agent}:long", "s-long", conversation("saltmarsh", "s-long", 100), chatType="direct"
    )
    yield w
    w.cleanup()


async def test_a_sweep_that_hits_its_cap_is_followed_at_once_and_the_backlog_is_shown(backlog_world):
    w = backlog_world
    w.start()
    # 104 messages at 20 per sweep: the first sweeps leave a backlog, and only sweeps that follow
    # at once (not the interval, 300 s away) stage them all.
    await until(lambda: w.corpus().count("saltmarsh") == 100, "the backlog drained", 30)
    assert w.live_sweeps_enqueued() >= 4
    assert w.notify is not None and "ingest backlog" in w.notify.wait_for("STATUS=", timeout_s=10)
    await until(
        lambda: (
            w.metric(rf'memoryd_ingest_backlog_sessions\{{agent="{w.agent}"\}}') == 0.0
            and f'agent="{w.agent}"' in httpx.get(w.metrics_url(), timeout=5).text
        ),
        "the backlog gauge back at 0",
        10,
    )


@pytest.fixture
def openclaw_world(tmp_path: Path, redis_url: str, unique: str):
    w = World(tmp_path, redis_url, unique, "")
    w.openclaw = OpenClawDbBuilder(tmp_path / "sessions", f"o{unique}")
    w.openclaw.session(w.openclaw.key("main"), oc_sid(1), exchange("kestrel"))
    w.oc_agent = f"o{unique}"
    yield w
    w.openclaw.close()
    w.cleanup()
    cleanup_redis(redis_url, [], [w.oc_agent])


async def test_a_message_appended_to_the_openclaw_database_is_staged_within_seconds(openclaw_world):
    w = openclaw_world
    w.start()
    await until(lambda: "kestrel" in corpus_text(w.settings, w.oc_agent), "the first sweep", 30)
    w.openclaw.append(oc_sid(1), [Msg("user", "Remember that the wrenfield bridge closes at dusk.")])
    await until(lambda: "wrenfield" in corpus_text(w.settings, w.oc_agent), "the appended event staged", 10)
    # Reading the database (the daemon's sweeps do, and here three commands) changes only the
    # WAL's metadata (SQLite chowns it on open as root): that starts no sweep, so none loops.
    await w.quiet("the daemon after the append")
    before = w.live_sweeps_enqueued()
    for _ in range(3):
        assert run_cli(w.config, "sessions", "--agent", w.oc_agent).returncode == 0
    await w.quiet("the daemon after the reads")
    assert w.live_sweeps_enqueued() - before <= 1
