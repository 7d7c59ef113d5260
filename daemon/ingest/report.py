"""Report models of the ingest commands and job. Field order is the JSON order (camelCase)."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from memoryd.stored_form import Content


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class IngestReport(_Model):
    agent_id: str
    sessions_seen: int = 0  # live sessions the metadata lists
    sessions_scanned: int = 0  # transcripts opened and read
    sessions_unchanged: int = 0  # a stat matched the checkpoint: not a byte read
    sessions_excluded: dict[str, int] = Field(default_factory=dict)  # reason -> sessions, never read
    sessions_missing: int = 0  # admitted, but the transcript does not exist (or is a symlink, never read)
    sessions_deferred: int = 0  # admitted but left for the next sweep by the per-sweep cap
    sessions_capped: int = 0  # read up to the per-file or per-sweep cap, the rest left for the next sweep
    sessions_rewritten: int = 0  # scanned again from the start: the consumed part had changed
    messages_staged: int = 0
    messages_dropped_forgotten: int = 0  # parsed, then dropped: forgotten before they could be staged
    messages_suppressed: int = 0  # parsed, then dropped: a claim forgotten from its session (forget --entry)
    lines_skipped: dict[str, int] = Field(default_factory=dict)  # kind -> transcript lines skipped
    checkpoints_removed: int = 0  # transcript gone, or session no longer listed
    # workspace-relative day files appended to
    corpus_files: Annotated[list[str], Content] = Field(default_factory=list)
    errors: Annotated[list[str], Content] = Field(default_factory=list)  # one line each; the sweep went on

    @property
    def backlog(self) -> int:
        """Sessions this sweep left for the next: deferred by the per-sweep cap, or read up to a cap."""
        return self.sessions_deferred + self.sessions_capped


def combine_sweeps(reports: list[IngestReport]) -> IngestReport:
    """One report of sweeps run back to back: what they did, summed; what is left (sessions
    seen, unchanged, excluded, missing, deferred, capped), as the last one found it."""
    last = reports[-1]
    skipped: Counter[str] = Counter()
    for r in reports:
        skipped.update(r.lines_skipped)
    return last.model_copy(
        update={
            "sessions_scanned": sum(r.sessions_scanned for r in reports),
            "sessions_rewritten": sum(r.sessions_rewritten for r in reports),
            "messages_staged": sum(r.messages_staged for r in reports),
            "messages_dropped_forgotten": sum(r.messages_dropped_forgotten for r in reports),
            "lines_skipped": dict(sorted(skipped.items())),
            "checkpoints_removed": sum(r.checkpoints_removed for r in reports),
            "corpus_files": list(dict.fromkeys(f for r in reports for f in r.corpus_files)),
            "errors": [e for r in reports for e in r.errors],
        }
    )


class SessionRow(_Model):
    session_id: str
    session_key: str | None
    session_kind: str
    chat_type: str | None
    channel: str | None
    hook_external_content_source: str | None
    participants: list[str]
    created_at: int | None
    updated_at: int | None
    excluded_reason: str | None  # what the next sweep would record; None = admitted


class SessionsReport(_Model):
    agent_id: str
    total: int
    shown: int
    sessions: list[SessionRow]
    archives: int  # retained reset/deleted generations (never ingested)
    errors: list[str]


class FingerprintView(_Model):
    mtime_ms: int
    size: int
    content_hash: str


class CursorView(_Model):
    line_count: int  # transcript lines consumed
    last_content_line: int  # message lines exported from them
    at_end: bool


class CheckpointRow(_Model):
    session_id: str
    session_key: str | None
    state_key: str
    fingerprint: FingerprintView
    cursor: CursorView
    excluded_reason: str | None
    updated_at: int


class CheckpointsReport(_Model):
    agent_id: str
    checkpoints: list[CheckpointRow]


class RuleView(_Model):
    rule: str
    value: str  # what the session has for the rule ("-": nothing)
    result: Literal["keeps out", "passes"]
    reason: str | None  # the reason recorded when this rule keeps the session out


class ExplainedSession(_Model):
    session_id: str
    session_key: str | None
    source: Literal["live", "archived", "recorded"]
    decision: str  # "admitted", or the reason the session is kept out
    rules: list[RuleView]  # every rule, in the order admission checks them
    checkpoint: CheckpointRow | None  # what the last sweep recorded, if anything
    forgotten: bool


class SessionExplanation(_Model):
    agent_id: str
    query: str
    sessions: list[ExplainedSession]
