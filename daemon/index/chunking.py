"""Chunking (reference §6.1): text in, chunks out. No I/O.

* `MEMORY.md` / `USER.md` are chunked per entry: a top-level list item with its continuation
  lines, together with the promotion/lineage marker lines directly above it (forget finds a
  promoted entry's chunk by its marker). Plain paragraphs are entries too; headings are not.
* Other memory files and session transcripts are cut into windows of about `chunk_tokens`
  tokens (~4 characters each) with `overlap` tokens carried into the next window.
* Annotation comments (`<!-- trigger: a, b -->`, `<!-- importance: 7 -->`,
  `<!-- project: key -->`) are stripped before chunking and returned as recall metadata.

Each chunk has the stored `text` (markers kept) and the `search_text` FTS and the embedder
see (markers removed: they are bookkeeping, not memory).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from memoryd.derivations import chunk_hash
from memoryd.index.provenance import ChunkProvenance, least_trusted
from memoryd.index.transcript import TranscriptLine
from memoryd.markers import LINEAGE_LINE_RE, PROMOTION_LINE_RE, promotion_key

CHARS_PER_TOKEN = 4  # the reference's estimate; settings.index.chunk_tokens is in tokens
PER_ENTRY_FILES = frozenset({"MEMORY.md", "USER.md"})

_ANNOTATION_RE = re.compile(r"\s*<!--\s*(triggers?|importance|project)\s*:\s*([^\n]*?)\s*-->", re.IGNORECASE)
_LIST_ITEM_RE = re.compile(r"^(?:[-*+]|\d{1,3}[.)])\s+\S")
_HEADING_RE = re.compile(r"^#{1,6}(?:\s|$)")
MAX_TRIGGERS = 8


# NamedTuples, not dataclasses: a large run's chunks cross a pipe from the preparation worker
# (index/prepare_worker.py), and pickle handles tuples about ten times faster.
class Annotations(NamedTuple):
    importance: int | None = None
    triggers: tuple[str, ...] = ()
    project_key: str | None = None

    def merge(self, other: Annotations) -> Annotations:
        importance = (
            self.importance if other.importance is None else max(self.importance or 0, other.importance)
        )
        triggers = tuple(dict.fromkeys(self.triggers + other.triggers))[:MAX_TRIGGERS]
        return Annotations(importance, triggers, self.project_key or other.project_key)

    @property
    def empty(self) -> bool:
        return self.importance is None and not self.triggers and self.project_key is None


class Chunk(NamedTuple):
    start_line: int  # 1-based, inclusive (transcript line numbers for sessions)
    end_line: int
    text: str
    search_text: str
    hash: str  # sha256 of text: the embedding-cache key
    annotations: Annotations = Annotations()
    entry_keys: tuple[str, ...] = ()  # promotion-marker keys inside the chunk


Line = tuple[int, str]  # (1-based line number, text)
_NO_ANNOTATIONS = Annotations()


def strip_annotations(line: str) -> tuple[str, Annotations]:
    """Remove annotation comments from one line and parse them."""
    found = Annotations()
    if "<!--" not in line:
        return line, found

    def take(match: re.Match[str]) -> str:
        nonlocal found
        name, value = match.group(1).lower(), match.group(2).strip()
        if name.startswith("trigger"):
            tags = tuple(t.strip() for t in value.split(",") if t.strip())
            found = found.merge(Annotations(triggers=tags))
        elif name == "importance":
            if value.isdigit() and 1 <= int(value) <= 10:
                found = found.merge(Annotations(importance=int(value)))
        elif value:
            found = found.merge(Annotations(project_key=value))
        return ""

    return _ANNOTATION_RE.sub(take, line).rstrip(), found


def _is_marker(text: str) -> bool:
    return bool(PROMOTION_LINE_RE.match(text) or LINEAGE_LINE_RE.match(text))


def plain_chunk(
    start_line: int, end_line: int, text: str, annotations: Annotations = _NO_ANNOTATIONS
) -> Chunk:
    """A chunk whose text is searched as is (no memory-file markers in it)."""
    return Chunk(start_line, end_line, text, text, chunk_hash(text), annotations)


def make_chunk(
    lines: Sequence[Line], annotations: Annotations = _NO_ANNOTATIONS, markers: bool = True
) -> Chunk:
    """`markers=False` for transcript text, which never carries memory-file markers."""
    text = "\n".join([t for _, t in lines])
    if not markers:
        return plain_chunk(lines[0][0], lines[-1][0], text, annotations)
    digest = chunk_hash(text)
    search = "\n".join(t for _, t in lines if not _is_marker(t))
    keys = tuple(k for _, t in lines if (k := promotion_key(t)))
    return Chunk(lines[0][0], lines[-1][0], text, search, digest, annotations, keys)


def window_lines(lines: Sequence[Line], chunk_tokens: int, overlap_tokens: int) -> list[list[Line]]:
    """Group lines into windows of at most ~chunk_tokens; a longer line is split in pieces.

    The last lines of a window, up to ~overlap_tokens, start the next one, so a fact cut at a
    window edge is still found whole in one of them.
    """
    max_chars = max(32, chunk_tokens * CHARS_PER_TOKEN)
    overlap_chars = max(0, min(overlap_tokens * CHARS_PER_TOKEN, max_chars // 2))
    half = max_chars // 2
    windows: list[list[Line]] = []
    current: list[Line] = []
    size = 0
    for number, text in lines:
        # Almost every line fits in one window: no slicing then.
        pieces = (
            (text,)
            if len(text) <= max_chars
            else [text[i : i + max_chars] for i in range(0, len(text), max_chars)]
        )
        for piece in pieces:
            cost = len(piece) + 1
            if current and size + cost > max_chars:
                windows.append(current)
                # Carry whole lines until the overlap is reached, never half a window.
                start = len(current)
                kept = 0
                while start:
                    item_cost = len(current[start - 1][1]) + 1
                    if kept >= overlap_chars or kept + item_cost > half:
                        break
                    kept += item_cost
                    start -= 1
                current, size = current[start:], kept
                if size + cost > max_chars:  # no room beside the overlap: the piece starts alone
                    current, size = [], 0
            current.append((number, piece))
            size += cost
    if current:
        windows.append(current)
    return [w for w in windows if any(t.strip() for _, t in w)]


def chunk_plain(text: str, chunk_tokens: int, overlap_tokens: int) -> list[Chunk]:
    """Any memory file other than MEMORY.md/USER.md: annotation-stripped line windows."""
    lines: list[Line] = []
    notes: dict[int, Annotations] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        clean, found = strip_annotations(raw)
        if not clean.strip() and not found.empty:
            # An annotation-only line carries metadata, not text: it belongs to the line above.
            owner = lines[-1][0] if lines else number
            notes[owner] = notes.get(owner, Annotations()).merge(found)
            continue
        if not found.empty:
            notes[number] = notes.get(number, Annotations()).merge(found)
        lines.append((number, clean))
    chunks = []
    for window in window_lines(lines, chunk_tokens, overlap_tokens):
        window = _trim_blank(window)
        if window:
            merged = Annotations()
            for number, _ in window:
                merged = merged.merge(notes.get(number, Annotations()))
            chunks.append(make_chunk(window, merged))
    return chunks


def chunk_per_entry(text: str, chunk_tokens: int, overlap_tokens: int) -> list[Chunk]:
    """MEMORY.md / USER.md: one chunk per entry (an entry too long for one chunk is windowed)."""
    blocks: list[tuple[list[Line], Annotations]] = []
    pending_markers: list[Line] = []
    current: list[Line] | None = None
    notes = Annotations()

    def close() -> None:
        nonlocal current, notes
        if current and any(not _is_marker(t) for _, t in current):
            blocks.append((current, notes))
        current, notes = None, Annotations()

    for number, raw in enumerate(text.splitlines(), start=1):
        clean, found = strip_annotations(raw)
        stripped = clean.strip()
        if _is_marker(clean):
            close()
            pending_markers.append((number, stripped))
            continue
        if not stripped:
            if found.empty:  # a blank line ends an entry; an annotation-only line does not
                close()
            elif current is not None:
                notes = notes.merge(found)
            continue
        if _HEADING_RE.match(stripped):
            close()
            pending_markers = []
            continue
        starts_item = bool(_LIST_ITEM_RE.match(clean))  # top level only: no leading indent
        if current is None or starts_item:
            close()
            current = pending_markers + [(number, clean)]
            pending_markers = []
        else:
            current.append((number, clean))
        notes = notes.merge(found)
    close()

    chunks: list[Chunk] = []
    max_chars = max(32, chunk_tokens * CHARS_PER_TOKEN)
    for lines, block_notes in blocks:
        if sum(len(t) + 1 for _, t in lines) <= max_chars:
            chunks.append(make_chunk(lines, block_notes))
        else:
            chunks.extend(
                make_chunk(w, block_notes) for w in window_lines(lines, chunk_tokens, overlap_tokens)
            )
    return chunks


def chunk_memory_file(rel_path: str, text: str, chunk_tokens: int, overlap_tokens: int) -> list[Chunk]:
    if rel_path in PER_ENTRY_FILES:
        return chunk_per_entry(text, chunk_tokens, overlap_tokens)
    return chunk_plain(text, chunk_tokens, overlap_tokens)


def _trim_blank(window: list[Line]) -> list[Line]:
    start, end = 0, len(window)
    while start < end and not window[start][1].strip():
        start += 1
    while end > start and not window[end - 1][1].strip():
        end -= 1
    return window[start:end]


def chunk_session(
    lines: Sequence[TranscriptLine], session_kind: str, chunk_tokens: int, overlap_tokens: int
) -> list[tuple[Chunk, ChunkProvenance]]:
    """Transcript lines in windows; each window's provenance is its least trusted line's
    class, the session's kind and the newest line's time (reference §6.2)."""
    out: list[tuple[Chunk, ChunkProvenance]] = []
    # Windowed by position in `lines`: a window is a run of consecutive lines (a split line
    # repeats its position), so its members are a slice and need no lookup.
    for window in window_lines(
        [(i, line.text) for i, line in enumerate(lines)], chunk_tokens, overlap_tokens
    ):
        members = lines[window[0][0] : window[-1][0] + 1]
        chunk = plain_chunk(
            members[0].line_number, members[-1].line_number, "\n".join([t for _, t in window])
        )
        provenance = ChunkProvenance(
            least_trusted({m.origin_class for m in members}),
            session_kind,
            max([m.observed_at for m in members]),
        )
        out.append((chunk, provenance))
    return out
