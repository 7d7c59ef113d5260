"""Deep phase: rank, gate, re-check and promote staged entries into MEMORY.md.

    prepare_promotion  (no lock)  read staged entries, rank and gate them, snapshot MEMORY.md
    (staged entries whose origin scopes all expired are held back: retention hides them)
    publish_promotion  (lock)     re-read live state, drop forgotten/changed entries, build the
                                  new file, reserve lineage, commit with the snapshot's hash,
                                  mark the staged entries promoted

The default is an append-only section with a promotion marker above every entry and needs no
model. When an OpenAI-compatible endpoint is configured, the model is consulted outside the
lock and its plan is applied only if every validation passes; any failure falls back to the
append. A MEMORY.md edited between read and commit raises WriteConflict inside the commit
helper: the reserved lineage is rolled back and the write is rebuilt from the new content.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from zoneinfo import ZoneInfo

import anyio

from memoryd.agent_runtime import AgentRuntime
from memoryd.constants import DREAM_COMMIT_ATTEMPTS
from memoryd.dreaming import consolidation
from memoryd.dreaming.expiry import drop_expired
from memoryd.dreaming.lineage import Transfer, reserve_transfers, rollback_rows
from memoryd.dreaming.memory_file import (
    AppendItem,
    MemorySnapshot,
    build_append,
    commit_memory,
    marker_keys,
    read_memory_file,
)
from memoryd.dreaming.rank import Candidate, PromotionGates, Ranking, Thresholds, rank_candidates
from memoryd.dreaming.rehydrate import Located, locate, read_sources
from memoryd.dreaming.report import PromotedEntry, PromoteReport, SkippedEntry
from memoryd.dreaming.staged import StagedEntry, read_staged
from memoryd.dreaming.text import normalize_snippet, truncate
from memoryd.errors import WriteConflict
from memoryd.failpoints import failpoint
from memoryd.settings import DreamingSettings
from memoryd.store.db import Connection, FenceToken
from memoryd.store.origins import EntryOrigin
from memoryd.store.preimages import drop_preimage, prune_preimages, store_preimage
from memoryd.store.short_term import mark_promoted
from memoryd.store.tombstones import forgotten_ids

APPEND_HEADING = "Promoted From Short-Term Memory ({day})"
MAX_COMMIT_ATTEMPTS = DREAM_COMMIT_ATTEMPTS


@dataclass(frozen=True, slots=True)
class PromotionPlan:
    now_ms: int
    day: str
    thresholds: Thresholds
    considered: int
    ranking: Ranking
    memory: MemorySnapshot
    expired: int = 0  # staged entries held back because their origin scopes expired


@dataclass(frozen=True, slots=True)
class Prepared:
    """A candidate checked against the live state: the entry line to write and its lineage."""

    candidate: Candidate
    located: Located
    text: str  # the snippet as it will appear (one line, budgeted)

    @property
    def key(self) -> str:
        return self.candidate.key

    @property
    def source_ref(self) -> str:
        return f"{self.candidate.primary.path}#L{self.located.start_line}-L{self.located.end_line}"

    def append_line(self) -> str:
        c = self.candidate
        return (
            f"- {self.text} [score={c.score:.3f} recalls={c.signal_count} avg={c.avg_score:.3f} "
            f"source={c.primary.path}:{self.located.start_line}-{self.located.end_line}]"
        )

    def transfer(self) -> Transfer | None:
        keys = self.candidate.member_keys
        return Transfer(self.key, keys) if len(keys) > 1 else None


def dreaming_day(now_ms: int, tz: str) -> str:
    return datetime.fromtimestamp(now_ms / 1000, ZoneInfo(tz)).strftime("%Y-%m-%d")


def entry_text(snippet: str, max_chars: int) -> str | None:
    """The promoted text: one line, no leading bullet, within budget; None if it cannot be
    written safely (it would forge or break a marker)."""
    text = normalize_snippet(snippet).lstrip("-*+ ").strip()
    if not text or "<!--" in text or "-->" in text:
        return None
    return truncate(text, max_chars)


async def prepare_promotion(
    rt: AgentRuntime, gates: PromotionGates | None = None, now_ms: int | None = None
) -> PromotionPlan:
    """Read and rank without the lock (slow work happens here, publication re-checks)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    settings = rt.settings.dreaming
    thresholds = Thresholds.resolve(settings, gates)
    store = rt.require_store()
    staged = await store.read(read_staged, rt.agent_id)
    entries, expired = await drop_expired(rt.settings, rt.sessions, staged)
    # CPU-bound and file reads: in a worker thread, so the event loop keeps serving.
    ranking = await anyio.to_thread.run_sync(rank_candidates, entries, thresholds, now)
    memory = await anyio.to_thread.run_sync(read_memory_file, rt.paths.workspace)
    return PromotionPlan(
        now, dreaming_day(now, settings.timezone), thresholds, len(staged), ranking, memory, expired
    )


def _live_state(
    conn: Connection, agent_id: str, keys: Sequence[str], sessions: Sequence[str], secret: bytes | None
) -> tuple[list[StagedEntry], set[str]]:
    return read_staged(conn, agent_id, keys=keys, include_promoted=True), forgotten_ids(
        conn, sessions, secret
    )


def _refresh(
    candidate: Candidate, live: dict[str, StagedEntry], forgotten: set[str]
) -> tuple[Candidate | None, str]:
    """Keep only members still staged, unpromoted and with no forgotten origin session."""
    members: list[StagedEntry] = []
    reason = "gone"
    for m in candidate.members:
        cur = live.get(m.entry_key)
        if cur is None:
            continue
        if any(o.session_id in forgotten for o in cur.origins):
            reason = "forgotten"
            continue
        if cur.promoted_at is not None or not cur.trusted:
            reason = "promoted" if cur.promoted_at is not None else "untrusted"
            continue
        members.append(cur)
    if not members:
        return None, reason
    return replace(candidate, primary=members[0], members=tuple(members)), ""


def _reserve(
    conn: Connection,
    agent_id: str,
    transfers: Sequence[Transfer],
    sessions: Sequence[str],
    secret: bytes | None,
    preimage: tuple[str, int, str] | None,
) -> tuple[set[str], list[EntryOrigin], int | None]:
    """Right before publication, under the lock: re-check forgotten records, then reserve the
    survivors' lineage (and the rewrite preimage). Writes nothing if a session was forgotten."""
    gone = forgotten_ids(conn, sessions, secret)
    if gone:
        return gone, [], None
    added = reserve_transfers(conn, agent_id, transfers)
    backup = store_preimage(conn, preimage[0], preimage[1], preimage[2]) if preimage else None
    return set(), added, backup


def _undo(conn: Connection, agent_id: str, added: Sequence[EntryOrigin], backup: int | None) -> None:
    rollback_rows(conn, agent_id, added)
    if backup is not None:
        drop_preimage(conn, backup)


def _finish(conn: Connection, keys: Sequence[str], now_ms: int, rewrote: bool) -> int:
    if rewrote:
        prune_preimages(conn)
    return mark_promoted(conn, keys, now_ms)


@dataclass(frozen=True, slots=True)
class _Write:
    """What one attempt writes: MEMORY.md's new text, the entries it holds and their lineage."""

    text: str
    done: list[Prepared]  # the prepared entries the new text holds
    transfers: list[Transfer]
    rewrite: consolidation.Rewrite | None  # the model's accepted plan, or None for the append


@dataclass(frozen=True, slots=True)
class _Commit:
    added: list[EntryOrigin]  # lineage rows reserved for the written entries
    forgotten: set[str]  # sessions forgotten since the refresh: plan again without them
    conflict: bool  # MEMORY.md changed under us: rebuild from its new content


async def publish_promotion(rt: AgentRuntime, plan: PromotionPlan) -> PromoteReport:
    settings = rt.settings.dreaming
    report = _new_report(rt, plan)
    candidates = list(plan.ranking.candidates)
    if not candidates:
        report.mode = "none"
        return report
    max_chars = settings.max_promoted_snippet_tokens * 4
    secret = rt.secret()
    proposal = await _consult_model(rt, plan, candidates, max_chars, report)
    snapshot = plan.memory
    async with rt.lock().hold() as lease:
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            fresh = await _still_eligible(rt, candidates, secret, report)
            if attempt:
                snapshot = read_memory_file(rt.paths.workspace)
            if not snapshot.writable:
                report.warnings.append(snapshot.problem or "memory file not writable")
                report.mode = "none"
                return report
            present = marker_keys(snapshot.text or "")
            reconciled = [c for c in fresh if set(c.member_keys) & present]
            unreconciled = [c for c in fresh if c not in reconciled]
            # Reads the sources: in a worker thread, so the event loop keeps serving.
            prepared = await anyio.to_thread.run_sync(_prepare, unreconciled, rt, max_chars, report)
            # The model's plan was made for the first snapshot only.
            write = _build_write(
                proposal if attempt == 0 else None, snapshot, prepared, plan, settings, report
            )
            added: list[EntryOrigin] = []
            if write.done:
                commit = await _commit_write(rt, plan, snapshot, write, secret, lease.fence, report)
                if commit.forgotten:
                    candidates = [c for c in candidates if not set(c.session_ids) & commit.forgotten]
                    continue
                if commit.conflict:
                    continue
                added = commit.added
            failpoint("dream.promote.mark")
            finished = [k for c in reconciled for k in c.member_keys]
            finished += [k for p in write.done for k in p.candidate.member_keys]
            await rt.require_store().write(
                _finish, finished, plan.now_ms, write.rewrite is not None, fence=lease.fence
            )
            _record_published(report, reconciled, write, added)
            return report
        report.warnings.append(
            f"MEMORY.md kept changing during {MAX_COMMIT_ATTEMPTS} attempts; "
            "candidates stay eligible for the next sweep"
        )
        report.mode = "none"
        return report


def _new_report(rt: AgentRuntime, plan: PromotionPlan) -> PromoteReport:
    report = PromoteReport(
        agent_id=rt.agent_id,
        memory_path=plan.memory.relative_path,
        considered=plan.considered,
        eligible=len(plan.ranking.candidates),
    )
    for rej in plan.ranking.rejections:
        report.rejected[rej.reason] = report.rejected.get(rej.reason, 0) + 1
    if plan.expired:
        report.rejected["expired"] = plan.expired
    return report


async def _consult_model(
    rt: AgentRuntime,
    plan: PromotionPlan,
    candidates: Sequence[Candidate],
    max_chars: int,
    report: PromoteReport,
) -> consolidation.Proposal | None:
    """The model (if configured) sees only trusted, rehydrated candidates, outside the lock."""
    settings = rt.settings.dreaming
    if not (consolidation.enabled(settings) and plan.memory.writable):
        return None
    pre = await anyio.to_thread.run_sync(_prepare, candidates, rt, max_chars, None)
    try:
        return await consolidation.propose(settings, plan.memory, [_model_input(p) for p in pre])
    except consolidation.ConsolidationRejected as exc:
        report.fallback_reason = str(exc)
        return None


async def _still_eligible(
    rt: AgentRuntime, candidates: Sequence[Candidate], secret: bytes | None, report: PromoteReport
) -> list[Candidate]:
    """Under the lock: the candidates with the members still live; the others are reported skipped."""
    keys = [k for c in candidates for k in c.member_keys]
    sessions = sorted({o.session_id for c in candidates for o in c.origins})
    rows, forgotten = await rt.require_store().read(_live_state, rt.agent_id, keys, sessions, secret)
    report.skipped = []
    # One pass over every candidate: in a worker thread, so the event loop keeps serving.
    return await anyio.to_thread.run_sync(_refresh_all, candidates, rows, forgotten, report)


def _refresh_all(
    candidates: Sequence[Candidate], rows: list[StagedEntry], forgotten: set[str], report: PromoteReport
) -> list[Candidate]:
    live = {e.entry_key: e for e in rows}
    fresh: list[Candidate] = []
    for c in candidates:
        kept, reason = _refresh(c, live, forgotten)
        if kept is None:
            report.skipped.append(SkippedEntry(entry_key=c.key, reason=reason))
        else:
            fresh.append(kept)
    return fresh


def _build_write(
    proposal: consolidation.Proposal | None,
    snapshot: MemorySnapshot,
    prepared: Sequence[Prepared],
    plan: PromotionPlan,
    settings: DreamingSettings,
    report: PromoteReport,
) -> _Write:
    """The model's rewrite if its plan still validates against this snapshot, else the append."""
    rewrite = _rewrite(proposal, snapshot, prepared, plan, settings, report) if proposal else None
    if rewrite is not None:
        return _Write(rewrite.text, list(prepared), list(rewrite.transfers), rewrite)
    items = [AppendItem(p.key, p.append_line()) for p in prepared]
    new_text, written = build_append(
        snapshot.text or "", APPEND_HEADING.format(day=plan.day), items, settings.memory_file_max_chars
    )
    for p in prepared:
        if p.key not in written:
            report.skipped.append(SkippedEntry(entry_key=p.key, reason="budget"))
    done = [p for p in prepared if p.key in written]
    return _Write(new_text, done, [t for p in done if (t := p.transfer())], None)


def _rewrite(
    proposal: consolidation.Proposal,
    snapshot: MemorySnapshot,
    prepared: Sequence[Prepared],
    plan: PromotionPlan,
    settings: DreamingSettings,
    report: PromoteReport,
) -> consolidation.Rewrite | None:
    try:
        return consolidation.apply_proposal(
            proposal,
            snapshot,
            [_model_input(p) for p in prepared],
            plan.day,
            settings.memory_file_max_chars,
            settings.max_prior_entry_loss_fraction,
        )
    except consolidation.ConsolidationRejected as exc:
        report.fallback_reason = str(exc)
        return None


async def _commit_write(
    rt: AgentRuntime,
    plan: PromotionPlan,
    snapshot: MemorySnapshot,
    write: _Write,
    secret: bytes | None,
    fence: FenceToken,
    report: PromoteReport,
) -> _Commit:
    """Reserve the lineage (re-checking forgotten records), then commit MEMORY.md against the
    snapshot's hash; the reservation is undone if the file cannot be committed."""
    store = rt.require_store()
    sessions = sorted({o.session_id for p in write.done for o in p.candidate.origins})
    preimage = (snapshot.text or "", plan.now_ms, snapshot.relative_path) if write.rewrite else None
    gone, added, backup = await store.write(
        _reserve, rt.agent_id, write.transfers, sessions, secret, preimage, fence=fence
    )
    if gone:  # a forget finished in between
        return _Commit([], gone, conflict=False)
    try:
        failpoint("dream.promote.commit")
        commit_memory(snapshot, write.text, rt.paths.workspace)
    except WriteConflict as exc:
        await store.write(_undo, rt.agent_id, added, backup, fence=fence)
        report.write_conflicts += 1
        if write.rewrite is not None:
            report.fallback_reason = str(exc)
        return _Commit([], set(), conflict=True)
    except BaseException:
        await store.write(_undo, rt.agent_id, added, backup, fence=fence)
        raise
    return _Commit(added, set(), conflict=False)


def _record_published(
    report: PromoteReport, reconciled: Sequence[Candidate], write: _Write, added: Sequence[EntryOrigin]
) -> None:
    report.reconciled = [c.key for c in reconciled]
    report.promoted = [
        PromotedEntry(
            entry_key=p.key,
            score=round(p.candidate.score, 4),
            session_ids=list(p.candidate.session_ids),
            merged_keys=list(p.candidate.member_keys[1:]),
            text=p.text,
        )
        for p in write.done
    ]
    report.origin_rows_added = len(added)
    report.mode = "consolidated" if write.rewrite is not None else ("append" if write.done else "none")
    if write.rewrite is not None:
        report.consolidation = dict(write.rewrite.counts)
        report.fallback_reason = None


def _prepare(
    candidates: Sequence[Candidate], rt: AgentRuntime, max_chars: int, report: PromoteReport | None
) -> list[Prepared]:
    """Re-read each candidate's live source; keep those whose snippet is still there."""
    sources = read_sources(rt.paths.workspace, [c.primary.path for c in candidates])
    out: list[Prepared] = []
    for c in candidates:
        located = locate(c.primary, sources.get(c.primary.path))
        text = entry_text(c.primary.snippet, max_chars)
        if located.status != "ok" or text is None:
            if report is not None:
                reason = "refused_content" if text is None else f"source_{located.status}"
                report.skipped.append(SkippedEntry(entry_key=c.key, reason=reason))
            continue
        out.append(Prepared(c, located, text))
    return out


def _model_input(p: Prepared) -> consolidation.CandidateInput:
    c = p.candidate
    tags = tuple(dict.fromkeys(t for m in c.members for t in m.concept_tags))
    return consolidation.CandidateInput(
        key=p.key,
        text=p.text,
        source_ref=p.source_ref,
        origin_class=c.primary.origin_class,
        project_key=c.primary.project_key,
        supersedes_key=None,
        tags=tags[:3],
        parent_keys=c.member_keys,
    )


async def run_promote(
    rt: AgentRuntime, gates: PromotionGates | None = None, *, now_ms: int | None = None
) -> PromoteReport:
    """The `promote` command and the deep phase of a dreaming sweep."""
    plan = await prepare_promotion(rt, gates, now_ms)
    return await publish_promotion(rt, plan)
