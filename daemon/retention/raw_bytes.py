"""Erased text in the raw bytes of a database (pure reads of the files, no SQLite).

The physical check: a piece's bytes (retention/pieces.py) or a hash prefix anywhere in a database file — in a page in use, in a
free page (the freelist), in the slack of a page — or in its WAL or rollback journal. Each hit
is placed, so a receipt says where deleted bytes survived: `page`, `free page`, `WAL frame`,
`journal`. The file is read as SQLite leaves it on disk (format: sqlite.org/fileformat2).
"""

from __future__ import annotations

import struct
from pathlib import Path

from memoryd.retention.needles import Needles
from memoryd.store.raw_files import read_outside

HEADER_BYTES = 100
WAL_HEADER_BYTES = 32
WAL_FRAME_HEADER_BYTES = 24


def page_size(header: bytes) -> int:
    size = struct.unpack(">H", header[16:18])[0]
    return 65536 if size == 1 else size


def free_pages(data: bytes) -> set[int]:
    """Page numbers (1-based) on the freelist: trunk pages and the leaves they list."""
    if len(data) < HEADER_BYTES:
        return set()
    size = page_size(data)
    trunk = struct.unpack(">I", data[32:36])[0]
    found: set[int] = set()
    while trunk and trunk not in found and trunk * size <= len(data):
        found.add(trunk)
        page = data[(trunk - 1) * size : trunk * size]
        next_trunk, count = struct.unpack(">II", page[:8])
        count = min(count, (size - 8) // 4)
        found.update(struct.unpack(f">{count}I", page[8 : 8 + 4 * count]))
        trunk = next_trunk
    return found


def _db_hits(data: bytes, needles: Needles) -> dict[str, int]:
    out: dict[str, int] = {}
    if len(data) < HEADER_BYTES:
        return out
    size = page_size(data)
    free = free_pages(data)
    for start in needles.raw_starts(data):
        kind = "free page" if start // size + 1 in free else "page"
        out[kind] = out.get(kind, 0) + 1
    return out


def raw_hits(path: Path, needles: Needles) -> dict[str, int]:
    """Occurrences of piece bytes in a database file, its WAL and journal, by where they are."""
    out: dict[str, int] = {}
    if needles.matcher is None:
        return out
    files = ((path, "db"), (Path(f"{path}-wal"), "WAL frame"), (Path(f"{path}-journal"), "journal"))
    for candidate, kind in files:
        data = read_outside(candidate)  # never a descriptor of ours: its close would drop our locks
        if data is None:
            continue
        if kind == "db":
            found = _db_hits(data, needles)
        else:
            n = len(needles.raw_starts(data))
            found = {kind: n} if n else {}
        for where, n in found.items():
            out[f"{candidate.name} {where}"] = n
    return out
