"""A batch: what one hold of the workspace lock commits (DESIGN §5 "Ingest sweep", step 5).

The serial scan fills it with candidates in memory; the parallel scan with ranges of rows in its
workers' scratch files (`parts`, daemon/ingest/parallel.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memoryd.ingest.scan import Candidate, Cursor
from memoryd.sessions.model import Fingerprint, SessionInfo
from memoryd.store.checkpoints import Checkpoint
from memoryd.store.scratch import Part


@dataclass
class Batch:
    """What one lock hold commits."""

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
