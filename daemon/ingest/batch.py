"""A batch: what one hold of the workspace lock commits (DESIGN §5 "Ingest sweep", step 5).

The serial scan fills it with candidates in memory; the parallel scan with ranges of rows in its
workers' scratch files (`parts`, daemon/ingest/parallel.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memoryd.constants import INGEST_FLUSH_MESSAGES, INGEST_FLUSH_MESSAGES_MAX, INGEST_FLUSH_STORE_DIVISOR
from memoryd.ingest.scan import Candidate, Cursor
from memoryd.sessions.model import Fingerprint, SessionInfo
from memoryd.store.checkpoints import Checkpoint
from memoryd.store.scratch import Part


def batch_limit(staged_before: int) -> int:
    """How many messages a batch may hold when the store has `staged_before` staged entries (those
    of the sweep's earlier batches counted). A commit dirties about one page of each random-keyed
    index (claims, entry keys) per message until the batch outnumbers that index's pages, so the
    WAL a commit writes per message grows with the store while batches stay one size; a batch that
    grows with the store keeps it near a small store's (bench merge_growth)."""
    return max(
        INGEST_FLUSH_MESSAGES, min(INGEST_FLUSH_MESSAGES_MAX, staged_before // INGEST_FLUSH_STORE_DIVISOR)
    )


@dataclass
class Batch:
    """What one lock hold commits."""

    limit: int  # messages it may hold (batch_limit)

    candidates: list[Candidate] = field(default_factory=list)
    cursors: dict[str, tuple[SessionInfo, Fingerprint, Cursor]] = field(default_factory=dict)
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)  # exclusions
    deletions: list[str] = field(default_factory=list)
    senders: dict[str, dict[str, Any]] = field(default_factory=dict)  # session id -> actor -> identity
    # Parallel scan (daemon/ingest/parallel.py): the candidates are rows of scratch files.
    parts: list[Part] = field(default_factory=list)
    staged_count: int = 0  # rows in `parts`
    seen_rowwise: set[str] = field(default_factory=set)  # sessions whose seen hashes add_seen writes
    part_sessions: dict[str, SessionInfo] = field(default_factory=dict)  # sessions with rows in `parts`

    def empty(self) -> bool:
        return not (self.candidates or self.parts or self.cursors or self.checkpoints or self.deletions)
