"""A transcript swapped mid-sweep for a symlink to a FIFO (after it was opened, before the
unfinished-last-line check looks at it again), and a FIFO listed as a transcript: the sweep
never opens them in a way that blocks, and counts what it could not read (issue 18, finding 4).

A watcher thread stands in for a writer: it opens the FIFO for writing whenever a reader is
blocked on it (which ends that read), and records that it had to."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

from memoryd.agent_runtime import agent_runtime
from memoryd.failpoints import on_failpoint
from memoryd.ingest.sweep import run_ingest_sweep
from tests.builders import SessionStoreBuilder, exchange


class FifoWatcher:
    def __init__(self, fifo: Path):
        self.fifo = fifo
        self.unblocked = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # nobody is reading: nothing is blocked
                    continue
                raise
            self.unblocked += 1
            os.close(fd)

    def __enter__(self) -> FifoWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def test_a_transcript_swapped_for_a_fifo_symlink_mid_sweep_never_blocks(
    settings, sessions_root, redis, tmp_path
):
    builder = SessionStoreBuilder(sessions_root, "main")
    path = builder.add("agent:main:main", "s-one", exchange("orchard"), chatType="direct")
    with path.open("ab") as fh:
        fh.write(b'{"type":"message","unfinished')  # a last line still being written
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def swap() -> None:
        os.rename(path, path.with_name("s-one.jsonl.moved"))
        os.symlink(fifo, path)

    with FifoWatcher(fifo) as watcher, on_failpoint("ingest.scan.open", swap):
        async with agent_runtime(settings, "main", redis=redis) as rt:
            report = await run_ingest_sweep(rt)
    assert watcher.unblocked == 0, "the sweep blocked opening the FIFO"
    assert report.sessions_scanned == 1 and report.messages_staged == 2
    assert report.lines_skipped == {"malformedJson": 1}  # the last line, no longer the file's


async def test_a_fifo_listed_as_a_transcript_is_reported_and_never_opened(settings, sessions_root, redis):
    builder = SessionStoreBuilder(sessions_root, "main")
    builder.add("agent:main:main", "s-one", exchange("orchard"), chatType="direct")
    builder.add("agent:main:other", "s-pipe", write_transcript=False, chatType="direct")
    fifo = builder.dir / "s-pipe.jsonl"
    os.mkfifo(fifo)
    with FifoWatcher(fifo) as watcher:
        async with agent_runtime(settings, "main", redis=redis) as rt:
            report = await run_ingest_sweep(rt)
    assert watcher.unblocked == 0
    assert report.messages_staged == 2
    assert [e for e in report.errors if "s-pipe.jsonl" in e and "not a regular file" in e]
