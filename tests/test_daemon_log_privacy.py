"""The daemon's log goes to journald, which forget and erase cannot reach: a real daemon process
over a store with unreadable and odd transcripts, an odd listing entry and a forgotten session
writes no session id, session key, transcript path or participant id into it, at any log
level (the libraries' debug lines name files and query arguments)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.builders import exchange
from tests.daemon_harness import run_cli
from tests.ingest_harness import make_fifo
from tests.live_harness import World
from tests.polling import until

pytestmark = pytest.mark.slow  # runs memoryd as a process


@pytest.fixture
def world(tmp_path: Path, redis_url: str, unique: str):
    w = World(tmp_path, redis_url, unique, 'sources = ["memory", "sessions"]\n')
    yield w
    w.cleanup()


async def test_the_daemon_log_names_no_session_key_path_or_participant(world):
    w = world
    a = w.agent
    odd = {  # session id -> its key
        f"sid-fifo-{a}": f"agent:{a}:telegram:direct:fifo-{a}",
        f"sid-dir-{a}": f"agent:{a}:telegram:direct:dir-{a}",
        f"sid-link-{a}": f"agent:{a}:telegram:direct:link-{a}",
        f"sid-junk-{a}": f"agent:{a}:telegram:direct:junk-{a}",
        f"sid-gone-{a}": f"agent:{a}:telegram:direct:gone-{a}",
    }
    for sid, key in odd.items():
        w.builder.add(
            key, sid, exchange("lantern"), chatType="direct", participants=[{"actorId": f"actor-{sid}"}]
        )
    d = w.builder.dir
    for name in (f"sid-fifo-{a}", f"sid-dir-{a}", f"sid-link-{a}"):
        (d / f"{name}.jsonl").unlink()
    make_fifo(d / f"sid-fifo-{a}.jsonl")  # not a regular file
    (d / f"sid-dir-{a}.jsonl").mkdir()  # a directory where the transcript should be
    os.symlink("/etc/hostname", d / f"sid-link-{a}.jsonl")  # a symlink out of the store
    with (d / f"sid-junk-{a}.jsonl").open("ab") as fh:
        fh.write(b'\xff\xfe not json at all\n{"type": "message", "message": 5}\n')
    # A listing entry the source cannot use (no session id), named by its key only.
    w.builder.entries[f"agent:{a}:telegram:direct:broken-{a}"] = {"sessionKind": "interactive"}
    w.builder.save()

    w.start("--log-level", "DEBUG")  # what an operator turns on to see more: still no id
    await until(lambda: "orchard" in w.corpus() and "harbour" in w.corpus(), "the first sweep", 30)
    done = run_cli(w.config, "enqueue", "forget", "--agent", a, "--session", f"sid-gone-{a}", "--wait")
    assert done.returncode == 0, done.stderr
    w.append("s-one", "Remember that the copper kettle lives on the top shelf.")
    w.builder.append(f"sid-gone-{a}", exchange("forgotten-words"), 2)  # a forgotten session changes
    await until(lambda: "copper kettle" in w.corpus(), "the appended message", 15)
    await w.quiet("after the appends")
    assert w.daemon is not None and w.daemon.stop() == 0

    log = w.daemon.log()
    assert "watching" in log and "ready:" in log  # the log is the daemon's, and it was written
    secrets = {"s-one", "s-two", *odd, *odd.values(), *(f"actor-{sid}" for sid in odd)}
    secrets |= {f"agent:{a}:main", f"agent:{a}:work", f"agent:{a}:telegram:direct:broken-{a}"}
    leaked = sorted(s for s in secrets if s in log)
    assert leaked == [], f"the daemon log names {leaked}:\n{log}"
    assert "Traceback" not in log
