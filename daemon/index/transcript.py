"""A session transcript as indexable lines (reference §3.1, §6.1). No I/O.

The line export and its per-line provenance (owner/agent/untrusted/system) are the ones
ingestion uses (`memoryd.sessions.transcript`), so a chunk's origin class and a staged
entry's never disagree. Here they are collected for chunking, with the transcript's stat
time standing in for a message without a timestamp.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from typing import NamedTuple

from memoryd.constants import SNIPPET_MAX_CHARS
from memoryd.derivations import claim_hash
from memoryd.sessions.transcript import SKIP_MALFORMED, SKIP_OVERSIZED, iter_exported
from memoryd.utf16 import truncate_utf16


class TranscriptLine(NamedTuple):
    """One exported line. (A NamedTuple: one is built per message, and fast.)"""

    line_number: int
    text: str
    origin_class: str
    observed_at: int  # Unix ms; the message timestamp, else the caller's fallback


@dataclass(frozen=True, slots=True)
class RenderedTranscript:
    lines: tuple[TranscriptLine, ...]
    malformed: int = 0
    oversized: int = 0

    @property
    def system_only(self) -> bool:
        """Every line is scaffolding: such a transcript is never indexed (reference §6.1)."""
        return bool(self.lines) and all(line.origin_class == "system" for line in self.lines)


def render_transcript(
    raw_lines: Iterable[bytes], fallback_ms: int, erased: Callable[[str], bool] | None = None
) -> RenderedTranscript:
    """The transcript's exported lines; `erased`: senders whose turns (and replies) are left out."""
    skipped: dict[str, int] = {}
    lines = tuple(
        [
            TranscriptLine(line.line_number, line.text, line.origin_class, line.timestamp_ms or fallback_ms)
            for line in iter_exported(raw_lines, skipped, erased=erased)
        ]
    )
    return RenderedTranscript(lines, skipped.get(SKIP_MALFORMED, 0), skipped.get(SKIP_OVERSIZED, 0))


def without_suppressed(
    rendered: RenderedTranscript, session_id: str, suppressed: Collection[tuple[str, str]]
) -> RenderedTranscript:
    """Less the lines whose claim was forgotten from this session (forget --entry): the claim of a
    line is that of the snippet ingestion stages from it (cut at SNIPPET_MAX_CHARS)."""
    kept = tuple(
        line
        for line in rendered.lines
        if (claim_hash(truncate_utf16(line.text, SNIPPET_MAX_CHARS)), session_id) not in suppressed
    )
    return rendered if len(kept) == len(rendered.lines) else replace(rendered, lines=kept)
