"""Pure sweep decisions (reference §4.4, §5.2): what to do with each session, and the caps.

Data in, plan out; no I/O. The sweep feeds it metadata, checkpoints and stats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from memoryd.constants import MIN_MESSAGES_PER_FILE
from memoryd.sessions.model import Fingerprint
from memoryd.store.checkpoints import Checkpoint, CheckpointStamp


class ScanAction(Enum):
    UNCHANGED = "unchanged"  # a stat matches a finished checkpoint: not a byte is read
    RESUME = "resume"  # verify the consumed prefix by hash, then continue after it
    RESCAN = "rescan"  # start from the first line (new session, rewrite, lifted exclusion)
    ABSENT = "absent"  # the transcript is gone: its checkpoint goes


@dataclass(frozen=True, slots=True)
class ScanPlan:
    action: ScanAction
    start_line: int = 0  # transcript lines to skip (their hash must match expected_hash)
    expected_hash: str = ""
    produced: int = 0  # exported lines already produced before start_line
    carry: str = ""
    rewrite: bool = False  # a scanned transcript that no longer extends what was consumed


def settled_fingerprint(previous: Checkpoint | CheckpointStamp | None) -> tuple[int, int] | None:
    """The (mtime_ms, size) under which `previous` counts as unchanged; None when no stat can
    make it so (never fully scanned, excluded, or lines were left unread)."""
    if previous is None or not previous.content_hash or previous.excluded_reason or not previous.at_end:
        return None
    return previous.mtime_ms, previous.size


def is_unchanged(previous: Checkpoint | CheckpointStamp | None, fingerprint: Fingerprint | None) -> bool:
    """plan_scan(...).action is UNCHANGED, decided from a stamp (no full checkpoint needed)."""
    return fingerprint is not None and settled_fingerprint(previous) == fingerprint


def plan_scan(previous: Checkpoint | None, fingerprint: Fingerprint | None) -> ScanPlan:
    if fingerprint is None:
        return ScanPlan(ScanAction.ABSENT)
    if previous is None or not previous.content_hash or previous.excluded_reason:
        return ScanPlan(ScanAction.RESCAN)
    same_stat = previous.mtime_ms == fingerprint.mtime_ms and previous.size == fingerprint.size
    if same_stat and previous.at_end:
        return ScanPlan(ScanAction.UNCHANGED)
    if fingerprint.size < previous.size:
        return ScanPlan(ScanAction.RESCAN, rewrite=True)  # shrank: not an append, so a rewrite
    return ScanPlan(
        ScanAction.RESUME,
        previous.line_count,
        previous.content_hash,
        previous.last_content_line,
        previous.carry,
    )


def per_file_cap(n_sources: int, max_per_sweep: int, max_per_file: int) -> int:
    """The reference's `min(80, max(12, ceil(240 / max(1, n))))`, with configurable 240/80."""
    return min(max_per_file, max(MIN_MESSAGES_PER_FILE, math.ceil(max_per_sweep / max(1, n_sources))))


def file_cap(per_file: int, remaining: int) -> int:
    return max(1, min(per_file, remaining))


def excluded_checkpoint_needs_write(
    previous: Checkpoint | CheckpointStamp | None, reason: str, mtime_ms: int
) -> bool:
    """An exclusion is recorded once; an unchanged excluded session costs no write per sweep."""
    return (
        previous is None
        or previous.excluded_reason != reason
        or previous.content_hash != ""
        or previous.mtime_ms != mtime_ms
    )
