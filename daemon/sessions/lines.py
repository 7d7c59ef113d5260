"""Streaming line reader: a transcript is never loaded whole, and a giant line is skipped
without being held in memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from memoryd.constants import MAX_TRANSCRIPT_LINE_BYTES, READ_CHUNK_BYTES
from memoryd.sessions.model import OversizedLine


def iter_lines(fh: BinaryIO, *, max_line_bytes: int = MAX_TRANSCRIPT_LINE_BYTES) -> Iterator[bytes]:
    """Yield lines without their trailing b"\\n" (a trailing b"\\r" is kept); oversized lines
    are yielded as OversizedLine. A final line without a newline is yielded too."""
    buf = b""  # the start of a line that runs past the chunk read so far
    skipping = 0  # >0 while discarding the rest of an oversized line
    while True:
        chunk = fh.read(READ_CHUNK_BYTES)
        if not chunk:
            break
        # Splitting the chunk in C costs a fraction of a find() loop per line.
        pieces = chunk.split(b"\n")
        rest = pieces.pop()  # after the chunk's last newline: the start of a line, or b""
        if pieces:
            first = pieces[0]
            if skipping:
                yield OversizedLine(skipping + len(first))
                skipping = 0
            elif len(buf) + len(first) > max_line_bytes:
                yield OversizedLine(len(buf) + len(first))
            else:
                yield buf + first if buf else first
            buf = b""
            for i in range(1, len(pieces)):
                piece = pieces[i]
                yield OversizedLine(len(piece)) if len(piece) > max_line_bytes else piece
        if skipping:
            skipping += len(rest)
        elif len(buf) + len(rest) > max_line_bytes:
            skipping = len(buf) + len(rest)
            buf = b""
        else:
            buf += rest
    if skipping:
        yield OversizedLine(skipping)
    elif buf:
        yield buf
