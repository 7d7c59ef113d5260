"""Files for ingest tests: the corpus as one text, FIFOs that notice any reader, and test-sized
batches."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from memoryd.ingest import batch as batch_module
from memoryd.settings import Settings


def batches_of(
    monkeypatch: pytest.MonkeyPatch, least: int, most: int | None = None, divisor: int = 10
) -> None:
    """Sweeps cut batches of `least` messages, growing to `most` with one message for every
    `divisor` entries staged (ingest/batch.py `batch_limit`); `most` None: always `least`."""
    monkeypatch.setattr(batch_module, "INGEST_FLUSH_MESSAGES", least)
    monkeypatch.setattr(batch_module, "INGEST_FLUSH_MESSAGES_MAX", least if most is None else most)
    monkeypatch.setattr(batch_module, "INGEST_FLUSH_STORE_DIVISOR", divisor)


def corpus_text(settings: Settings, agent: str = "main") -> str:
    root = settings.workspace_for(agent) / "memory" / ".dreams" / "session-corpus"
    if not root.exists():
        return ""
    return "".join(p.read_text() for p in sorted(root.glob("*.txt")))


def make_fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


class FifoWatch:
    """Notices any reader opening the FIFOs: opening one for writing without blocking succeeds
    only while a reader has it open. If one ever does, it is fed a line so the reader does not
    hang, and the watch remembers it."""

    def __init__(self, fifos: list[Path]):
        self.fifos = fifos
        self.opened: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for fifo in self.fifos:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as exc:
                    assert exc.errno == errno.ENXIO  # no reader: the expected state
                    continue
                self.opened.append(fifo.name)
                os.write(fd, b'{"type":"message","message":{"role":"user","content":"POISON read"}}\n')
                os.close(fd)
            self._stop.wait(0.01)

    def __enter__(self) -> FifoWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
