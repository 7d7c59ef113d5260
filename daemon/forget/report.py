"""The forget report's model (reference §7.8): field names and order are the JSON emission
order. The data comes from memoryd.forget.summary (built without pydantic, for the CLI's dry
run); validating it into this model is what a job's result and the JSON Schema use.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memoryd.forget import summary
from memoryd.forget.plan import ForgetPlan
from memoryd.forget.summary import report_data
from memoryd.retention.receipts import Verification
from memoryd.stored_form import Content


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParticipantMatchModel(_Model):
    actorId: str  # JSON field names are the reference's
    identities: list[dict[str, Any]]


class SessionResolution(_Model):
    sessionId: str
    sessionKey: str | None = Field(default=None, exclude_if=lambda v: v is None)
    source: Literal["live", "archived", "recorded", "unresolved"]


class UnmatchedSelectorModel(_Model):
    selector: Literal["session", "participant", "hookSource", "match"]
    value: str
    closeMatches: list[str]  # the known values closest to it, most alike first


class EntryOriginModel(_Model):
    sessionId: str
    sessionKey: str | None = Field(default=None, exclude_if=lambda v: v is None)


class ForgottenEntry(_Model):
    """A fact chosen by `entries` or `match`, with the sessions it came from."""

    entryKey: str
    text: str  # the staged snippet or the promoted line ("" when neither is left: a rerun)
    origins: list[EntryOriginModel]


class CuratedWriteModel(_Model):
    relativePath: str
    observedAt: int  # Unix ms


class Artifacts(_Model):
    memoryFiles: int = 0  # memory and diary files changed
    memoryEntries: int = 0  # marked entries and session-reference sections removed
    memoryLines: int = 0  # extra whole lines removed for exact corpus snippets
    sessionCorpusFiles: int = 0  # corpus files changed (removed ones included)
    sessionCorpusLines: int = 0
    indexChunks: int = 0
    indexSources: int = 0
    ftsRows: int = 0
    vectorRows: int = 0
    embeddingCacheRows: int = 0
    shortTermEntries: int = 0
    seenHashScopes: int = 0
    backups: int = 0  # rewrite preimages scrubbed (rewritten, not deleted)
    originRows: int = 0  # origin rows of the selected keys, every session


class Counts(_Model):
    """What the report's lists hold, as numbers: kept in a stored result, which empties the lists."""

    sessionsMatched: int  # sessions the selectors resolved to (live, archived or unresolved)
    sessionsRecordedForgotten: int  # forgotten-session records written (0 for a dry run)
    entriesRemoved: int  # memory entries deleted (a dry run: that it would delete)
    mixedLineageEntriesRemoved: int
    untargetableEntries: int
    curatedWritesRetained: int
    participantsMatched: int
    refusals: int
    # A forget of single facts only: (claim, session) pairs suppressed (a dry run: to suppress).
    suppressedClaims: int | None = Field(default=None, exclude_if=lambda v: v is None)


class ForgetReport(_Model):
    agentId: str
    dryRun: bool
    # In a stored result (Redis) these lists are empty: they name sessions, people, content
    # hashes and files (daemon/stored_form.py); `artifacts` keeps the counts.
    sessionIds: Annotated[list[str], Content]
    participantMatches: Annotated[list[ParticipantMatchModel], Content]
    sessionResolutions: Annotated[list[SessionResolution], Content]
    entryKeys: Annotated[list[str], Content]
    mixedLineageEntryKeys: Annotated[list[str], Content]
    untargetableEntryKeys: Annotated[list[str], Content]
    curatedWrites: Annotated[list[CuratedWriteModel], Content]
    artifacts: Artifacts
    refusals: Annotated[list[str], Content]
    counts: Counts  # memoryd's: the reference's fields above, then these numbers
    # Beyond the reference, and only when there is one: selectors that matched nothing, so a
    # typo is not silent.
    unmatchedSelectors: Annotated[list[UnmatchedSelectorModel], Content] = Field(
        default_factory=list, exclude_if=lambda v: not v
    )
    # A forget of single facts (`entries`, `match`) only: each chosen entry with its origins.
    forgottenEntries: Annotated[list[ForgottenEntry] | None, Content] = Field(
        default=None, exclude_if=lambda v: v is None
    )
    # A purge with `verify` only: the retention verifier's run over the forgotten sessions'
    # content. Its stored form (Redis) names the kind of a workspace file, never its path.
    verification: Verification | None = Field(default=None, exclude_if=lambda v: v is None)


def build_report(plan: ForgetPlan, *, dry_run: bool) -> ForgetReport:
    return ForgetReport.model_validate(report_data(plan, dry_run=dry_run))


def render_human(report: ForgetReport) -> str:
    """A readable summary of the same report (the reference's human output, §7.8)."""
    return summary.render_human(report.model_dump(mode="json", by_alias=True))
