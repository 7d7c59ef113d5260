"""One ingest sweep's state: a typed object that the sweep (daemon/ingest/sweep.py) passes to
each of its steps — the serial commit (daemon/ingest/commit.py), the pooled commit
(daemon/ingest/merge.py) and the pooled scan (daemon/ingest/parallel.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.ingest.batch import Batch, batch_limit
from memoryd.ingest.corpus import CorpusAppender
from memoryd.ingest.report import IngestReport
from memoryd.ingest.scan import DayOf
from memoryd.store.erased_senders import ErasedSenders

if TYPE_CHECKING:
    from memoryd.agent_runtime import AgentRuntime
    from memoryd.ops.op import ProgressFn
    from memoryd.settings import Settings
    from memoryd.store.db import Store


@dataclass(slots=True)
class SweepState:
    """What a sweep has read and decided so far, and where its output goes."""

    rt: AgentRuntime
    store: Store
    agent: str
    settings: Settings
    report: IngestReport
    now_ms: int  # the sweep's clock: staged entries' recall times, checkpoints' update times
    day_of: DayOf
    day_bucket: str  # today, in the dreaming time zone
    corpus: CorpusAppender
    secret: bytes | None
    erased: ErasedSenders  # read with the forgotten records
    progress: ProgressFn | None
    generation: int = 0  # the exclusion set's generation the sweep read it at
    # A purge committed while this sweep read (the generation moved): nothing more of it is
    # committed, and run_ingest_sweep reads again under the new exclusion set.
    stale: bool = False
    messages_read: int = 0  # candidates taken so far (progress)
    staged_before: int = 0  # entries the store had staged when the sweep began (batch_limit)
    sessions_to_read: int = 0
    paths_by_id: dict[str, str] = field(default_factory=dict)  # of the sessions to read
    kinds_by_id: dict[str, str] = field(default_factory=dict)
    scratch_dir: Path | None = None  # the parallel scan's, once it is used
    scratch_token: str = ""
    scratch_reclaim: bool = False  # delete merged scratch rows (a sweep reading a lot)

    @classmethod
    def start(cls, rt: AgentRuntime, progress: ProgressFn | None) -> SweepState:
        settings = rt.settings
        now_ms = int(time.time() * 1000)
        day_of = DayOf(settings.dreaming.timezone)
        secret = rt.secret()
        return cls(
            rt=rt,
            store=rt.require_store(),
            agent=rt.agent_id,
            settings=settings,
            report=IngestReport(agent_id=rt.agent_id),
            now_ms=now_ms,
            day_of=day_of,
            day_bucket=day_of(now_ms),
            corpus=CorpusAppender(rt.paths.workspace),
            secret=secret,
            erased=ErasedSenders(secret),
            progress=progress,
        )

    def new_batch(self, messages_before: int) -> Batch:
        """An empty batch, to follow batches holding `messages_before` messages of this sweep."""
        return Batch(limit=batch_limit(self.staged_before + messages_before))

    def messages_taken(self, n: int) -> None:
        """`n` more candidates were read (progress)."""
        self.messages_read += n
        if self.progress:
            self.progress("messages", self.messages_read, 0)

    def sessions_progress(self) -> None:
        if self.progress:
            self.progress("sessions", self.report.sessions_scanned, self.sessions_to_read)
