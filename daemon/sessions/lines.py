"""Streaming line reader: a transcript is never loaded whole, and a giant line is skipped
without being held in memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from daemon.constants import MAX_TRANSCRIPT_LINE_BYTES
from daemon.sessions.model import OversizedLine

_CHUNK = 1 << 20


def iter_lines(fh: BinaryIO, *, max_line_bytes: int = MAX_TRANSCRIPT_LINE_BYTES) -> Iterator[bytes]:
    """Yield lines without their trailing b"\\n" (a trailing b"\\r" is kept); oversized lines
    are yielded as OversizedLine. A final line without a newline is yielded too."""
    buf = b""
    skipping = 0  # >0 while discarding the rest of an oversized line
    while True:
        chunk = fh.read(_CHUNK)
        if not chunk:
            break
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                rest = chunk[start:]
                if skipping:
                    skipping += len(rest)
                elif len(buf) + len(rest) > max_line_bytes:
                    skipping = len(buf) + len(rest)
                    buf = b""
                else:
                    buf += rest
                break
            piece = chunk[start:nl]
            if skipping:
                yield OversizedLine(skipping + len(piece))
                skipping = 0
            elif len(buf) + len(piece) > max_line_bytes:
                yield OversizedLine(len(buf) + len(piece))
                buf = b""
            else:
                yield buf + piece
                buf = b""
            start = nl + 1
    if skipping:
        yield OversizedLine(skipping)
    elif buf:
        yield buf
