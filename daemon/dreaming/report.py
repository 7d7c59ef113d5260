"""Report models of the dreaming commands and jobs. Field order is the JSON order."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from memoryd.stored_form import Content


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class PromotedEntry(_Model):
    entry_key: Annotated[str, Content]
    score: float
    session_ids: Annotated[list[str], Content]
    # staged keys coalesced into this entry
    merged_keys: Annotated[list[str], Content] = Field(default_factory=list)
    text: Annotated[str, Content]


class SkippedEntry(_Model):
    entry_key: Annotated[str, Content]
    reason: str  # forgotten | source_changed | source_missing | budget | refused_content | gone | promoted | untrusted


class PromoteReport(_Model):
    agent_id: str
    memory_path: Annotated[str, Content]
    mode: str = "append"  # append | consolidated | none
    considered: int = 0
    eligible: int = 0
    promoted: list[PromotedEntry] = Field(default_factory=list)
    # marker already present: marked promoted only
    reconciled: Annotated[list[str], Content] = Field(default_factory=list)
    skipped: list[SkippedEntry] = Field(default_factory=list)
    rejected: dict[str, int] = Field(default_factory=dict)  # gate -> staged entries it held back
    origin_rows_added: int = 0
    write_conflicts: int = 0
    consolidation: dict[str, int] | None = None  # added/merged/superseded when a rewrite committed
    fallback_reason: Annotated[str | None, Content] = None
    warnings: Annotated[list[str], Content] = Field(default_factory=list)


class LightReport(_Model):
    considered: int = 0
    candidates: int = 0
    diary_lines: int = 0
    signals_recorded: int = 0


class RemReport(_Model):
    considered: int = 0
    themes: Annotated[list[str], Content] = Field(default_factory=list)
    truths: int = 0
    diary_lines: int = 0
    signals_recorded: int = 0


class DreamReport(_Model):
    agent_id: str
    sweep_at: str
    phases: list[str]
    light: LightReport | None = None
    rem: RemReport | None = None
    deep: PromoteReport | None = None
    warnings: Annotated[list[str], Content] = Field(default_factory=list)


class BackfillDay(_Model):
    day: str
    sessions: int
    candidates: int
    claims: int


class BackfillReport(_Model):
    agent_id: str
    mode: str  # preview | rem | apply | rollback
    from_day: str | None = None
    to_day: str | None = None
    days: list[BackfillDay] = Field(default_factory=list)
    sessions_scanned: int = 0
    sessions_excluded: dict[str, int] = Field(default_factory=dict)
    candidates: int = 0
    claims: int = 0
    staged_entries: int = 0
    corpus_lines: int = 0
    diary_lines: int = 0
    origin_rows: int = 0
    run_id: int | None = None
    rolled_back_runs: list[int] = Field(default_factory=list)
    warnings: Annotated[list[str], Content] = Field(default_factory=list)


class ScorePart(_Model):
    name: str  # relevance, frequency, diversity, recency, consolidation, conceptual, phaseBoost
    value: float  # the signal, 0..1 (the phase boost is added as it is)
    weight: float
    contribution: float  # value × weight: what it adds to the score


class GateResult(_Model):
    name: str  # max_age_days | min_recall_count | min_unique_queries | min_score
    required: float
    actual: float
    passed: bool


class PromoteExplanation(_Model):
    """`memoryd promote --explain KEY`: why one staged entry would or would not be promoted now."""

    agent_id: str
    entry_key: str
    would_promote: bool
    verdict: str  # promote | not_staged | expired | untrusted | promoted | empty | too_old | min_*
    claim_keys: list[str]  # staged entries coalesced into the same claim (promoted as one)
    score: float | None
    parts: list[ScorePart]
    gates: list[GateResult]
