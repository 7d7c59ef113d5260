"""Session backfill (reference §5.8): `memoryd backfill --agent A [--from D] [--to D]
[--limit-days N] [--rem | --apply | --rollback]`.

* preview (default): scan and coalesce, write nothing (no lock, no schema, no Redis);
* --rem: write grounded diary lines (the `## Session Backfill` block of DREAMS.md);
* --apply: also append corpus lines and stage the claims as short-term entries;
* --rollback: undo every run not yet rolled back, from its journal.

Sessions pass admission first (forgotten records, then the exclusion policy; only interactive
sessions) and only owner/agent lines are taken. Under the lock, forgotten records are read
again before anything is written. Every origin row (staged claim keys and diary keys) is
recorded, with the run's journal, *before* corpus, staged entries or diary text are
published. Rollback removes what the journal says the run added; it never removes forgotten
records, and it never resurrects an entry forget removed in the meantime.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import reduce

import anyio

from memoryd.agent_runtime import AgentRuntime
from memoryd.constants import (
    BACKFILL_DEFAULT_LIMIT_DAYS,
    DREAM_COMMIT_ATTEMPTS,
    EXCLUSION_STALE_RETRIES,
    SESSION_INGESTION_SCORE,
    SNIPPET_MAX_CHARS,
    SNIPPET_MIN_CHARS,
)
from memoryd.dreaming.backfill_plan import (
    BACKFILL_QUERY_PREFIX,
    Claim,
    Message,
    coalesce,
    diary_items,
    select_days,
)
from memoryd.dreaming.backfill_request import BackfillRequest
from memoryd.dreaming.diary import DIARY_HEADER, block_text, publish_block, read_diary, remove_block
from memoryd.dreaming.memory_file import commit_memory, marker_keys, read_memory_file
from memoryd.dreaming.report import BackfillDay, BackfillReport
from memoryd.dreaming.staged import TRUSTED_ORIGINS
from memoryd.dreaming.text import normalize_snippet
from memoryd.errors import OperationFailed, UsageError, WriteConflict
from memoryd.fileio import ABSENT, append_lines, commit_file, read_bytes_nofollow, sha256_hex
from memoryd.ingest.corpus import corpus_relative_path, render_line
from memoryd.ingest.scan import DayOf
from memoryd.ingest.staging import claim_hash, least_trusted, query_hash
from memoryd.markers import promotion_key
from memoryd.sessions.admission import admission_reason, policy_of
from memoryd.sessions.model import SessionInfo
from memoryd.sessions.transcript import iter_exported
from memoryd.store.backfill_journal import (
    active_run_ids,
    add_journal_rows,
    begin_run,
    journal_rows,
    mark_rolled_back,
    processed_days,
)
from memoryd.store.corpus_files import record_corpus_files
from memoryd.store.db import Connection
from memoryd.store.erased_senders import ErasedSenders, SenderTest, load_erased_senders
from memoryd.store.exclusions import ExclusionsChanged, check_exclusions, exclusion_generation
from memoryd.store.lines import CLAIM_KEY_PREFIX
from memoryd.store.origins import delete_origin_rows, origins_for_entries, record_origins
from memoryd.store.phase_signals import delete_signals
from memoryd.store.short_term import (
    add_grounded_signal,
    delete_entries,
    insert_raw_row,
    load_raw_row,
    load_raw_rows,
    restore_raw_row,
)
from memoryd.store.suppressions import suppressed_among
from memoryd.store.tombstones import forgotten_ids, hashed_session_ref, list_tombstones
from memoryd.utf16 import truncate_utf16

log = logging.getLogger("memoryd.backfill")

BLOCK, HEADING = "backfill", "Session Backfill"
DEFAULT_LIMIT_DAYS = BACKFILL_DEFAULT_LIMIT_DAYS


@dataclass(frozen=True, slots=True)
class Scan:
    messages: tuple[Message, ...]
    sessions_scanned: int
    excluded: dict[str, int]


def _tombstones(conn: Connection) -> set[str]:
    return {t.session_id for t in list_tombstones(conn)}


def _not_to_stage(
    conn: Connection, agent_id: str, keys: Sequence[str], pairs: Sequence[tuple[str, str]]
) -> set[tuple[str, str]]:
    """(entry key, session id) already staged, or suppressed (a claim forgotten from its
    session: forget --entry); `pairs` are the scan's (claim hash, session id)."""
    suppressed = {(CLAIM_KEY_PREFIX + claim, sid) for claim, sid in suppressed_among(conn, pairs)}
    return _already_staged(conn, agent_id, keys) | suppressed


def _already_staged(conn: Connection, agent_id: str, keys: Sequence[str]) -> set[tuple[str, str]]:
    return {(o.entry_key, o.session_id) for o in origins_for_entries(conn, agent_id, keys)}


def scan_sessions(
    rt: AgentRuntime, forgotten: set[str], secret: bytes | None, erased: ErasedSenders | None = None
) -> Scan:
    """Read admitted sessions' transcripts; keep owner/agent messages (no lock held)."""
    policy = policy_of(rt.settings)
    day_of = DayOf(rt.settings.dreaming.timezone)
    listing = rt.sessions.list_sessions()
    excluded: dict[str, int] = {}
    messages: list[Message] = []
    scanned = 0
    with rt.sessions.reading():  # a database source reads every transcript from one snapshot
        for session in sorted(listing.sessions, key=lambda s: s.session_id):
            reason = admission_reason(session, policy, forgotten)
            if (
                reason is None
                and secret is not None
                and forgotten_hashed(session.session_id, forgotten, secret)
            ):
                reason = "forgotten"
            if reason is not None:
                excluded[reason] = excluded.get(reason, 0) + 1
                continue
            scanned += 1
            skips = erased.test_for(session.session_id) if erased is not None else None
            messages += _trusted_messages(rt, session, skips, day_of)
    return Scan(tuple(messages), scanned, excluded)


def _trusted_messages(
    rt: AgentRuntime, session: SessionInfo, skips: SenderTest | None, day_of: DayOf
) -> list[Message]:
    """The owner/agent messages of one transcript that backfill may stage."""
    skipped: dict[str, int] = {}
    fallback = session.updated_at or session.created_at or 0
    out: list[Message] = []
    with rt.sessions.open_transcript(session) as lines:
        for line in iter_exported(lines, skipped, erased=skips):
            if line.origin_class not in TRUSTED_ORIGINS:
                continue  # backfill accepts owner/agent provenance only
            snippet = truncate_utf16(normalize_snippet(line.text), SNIPPET_MAX_CHARS)
            observed = line.timestamp_ms or fallback
            if len(snippet) < SNIPPET_MIN_CHARS or observed <= 0:
                continue
            out.append(
                Message(
                    rt.agent_id,
                    session.session_id,
                    session.session_key,
                    line.line_number,
                    snippet,
                    line.origin_class,
                    observed,
                    day_of(observed),
                )
            )
    return out


def forgotten_hashed(session_id: str, forgotten: set[str], secret: bytes) -> bool:
    return hashed_session_ref(secret, session_id) in forgotten


Cursor = dict[tuple[str, str], int]  # (day, session id) -> last line read; session '' = all


def read_cursor(rows: Iterable[tuple[str, str]]) -> Cursor:
    """The backfill cursor from its journal rows (`processed_days`)."""
    cursor: Cursor = {}
    for key, sid in rows:
        day, _, line = key.partition("#")
        last = int(line) if line.isdigit() else sys.maxsize  # an older run's row: the whole day
        cursor[(day, sid)] = max(cursor.get((day, sid), 0), last)
    return cursor


def plan_claims(
    scan: Scan, cursor: Cursor, request: BackfillRequest, staged: set[tuple[str, str]]
) -> tuple[list[str], list[Claim], list[tuple[str, str]]]:
    """Days to do, their claims (leaving out messages already staged from the same session),
    and the cursor rows the run adds: `(<day>#<last line read>, session id)`. The cursor is per
    day and session and remembers the last line read, so a session that appears, or a message
    appended, after its day was done is still read."""
    pending = [
        m
        for m in scan.messages
        if (m.day, "") not in cursor and m.line_number > cursor.get((m.day, m.session_id), 0)
    ]
    days = select_days((m.day for m in pending), set(), request.from_day, request.to_day, request.limit_days)
    chosen = set(days)
    fresh = [
        m
        for m in pending
        if m.day in chosen and (CLAIM_KEY_PREFIX + claim_hash(m.snippet), m.session_id) not in staged
    ]
    last: dict[tuple[str, str], int] = {}
    for m in pending:
        if m.day in chosen:
            last[(m.day, m.session_id)] = max(last.get((m.day, m.session_id), 0), m.line_number)
    done = sorted((f"{day}#{line}", sid) for (day, sid), line in last.items())
    return days, coalesce(fresh), done


def staged_key(claim: Claim) -> str:
    return CLAIM_KEY_PREFIX + claim_hash(claim.first.snippet)


async def run_backfill(rt: AgentRuntime, request: BackfillRequest) -> BackfillReport:
    """Preview, stage or roll back (module doc). A purge that commits between the scan and the
    publication changes what may be read: the whole run starts again under the new set."""
    for _ in range(EXCLUSION_STALE_RETRIES):
        try:
            return await _run_backfill(rt, request)
        except ExclusionsChanged:
            log.info("backfill %s: a purge committed during the scan; scanning again", rt.agent_id)
    raise OperationFailed(
        f"agent {rt.agent_id}: purges kept committing while backfill scanned; nothing was published, run it again"
    )


async def _run_backfill(rt: AgentRuntime, request: BackfillRequest) -> BackfillReport:
    if request.agent != rt.agent_id:
        raise UsageError(f"agent: request is for {request.agent!r}, runtime is {rt.agent_id!r}")
    report = BackfillReport(
        agent_id=rt.agent_id, mode=request.mode, from_day=request.from_day, to_day=request.to_day
    )
    if request.mode == "rollback":
        return await _rollback(rt, report)
    store = rt.store
    # Without a store nothing was ever forgotten; asking for the key would create it.
    secret = rt.secret() if store is not None else None
    forgotten: set[str] = set()
    cursor: Cursor = {}
    erased = ErasedSenders(secret)
    generation = 0
    if store is not None:
        generation = await store.read(exclusion_generation)  # before the set it stands for
        forgotten = await store.read(_tombstones)
        cursor = read_cursor(await store.read(processed_days))
        erased = await store.read(load_erased_senders, secret)
    # Reads every admitted transcript: in a worker thread, so the event loop keeps serving.
    scan = await anyio.to_thread.run_sync(scan_sessions, rt, forgotten, secret, erased)
    keys = list({CLAIM_KEY_PREFIX + claim_hash(m.snippet) for m in scan.messages})
    pairs = sorted({(claim_hash(m.snippet), m.session_id) for m in scan.messages})
    staged = await store.read(_not_to_stage, rt.agent_id, keys, pairs) if store is not None else set()
    days, claims, done = plan_claims(scan, cursor, request, staged)
    _summarize(report, scan, days, claims)
    if request.mode == "preview" or not claims:
        return report
    return await _apply(rt, request, report, claims, done, generation)


def _summarize(report: BackfillReport, scan: Scan, days: list[str], claims: list[Claim]) -> None:
    report.sessions_scanned = scan.sessions_scanned
    report.sessions_excluded = dict(sorted(scan.excluded.items()))
    for day in days:
        day_claims = [c for c in claims if c.day == day]
        if not day_claims:
            continue
        report.days.append(
            BackfillDay(
                day=day,
                sessions=len({s for c in day_claims for s in c.session_ids}),
                candidates=sum(len(c.messages) for c in day_claims),
                claims=len(day_claims),
            )
        )
    report.candidates = sum(len(c.messages) for c in claims)
    report.claims = len(claims)


# --- apply ------------------------------------------------------------------------------------


def _begin_run(
    conn: Connection,
    agent_id: str,
    request: BackfillRequest,
    now_ms: int,
    done: Sequence[tuple[str, str]],
    claims: Sequence[Claim],
    diary_existed: bool,
    secret: bytes | None,
    generation: int,
) -> tuple[int, set[str], int]:
    """Under the lock, before anything is published: re-check the exclusion set (moved on since
    the scan: ExclusionsChanged) and forgotten records, open the run's journal and reserve the
    lineage of every staged claim and diary line it will write."""
    check_exclusions(conn, generation)
    origins = [o for c in claims for o in c.diary_line().origins]
    if request.mode == "apply":
        origins += [o for c in claims for o in c.origins(staged_key(c))]
    gone = forgotten_ids(conn, {o.session_id for o in origins}, secret)
    if gone:
        return 0, gone, 0
    run_id = begin_run(conn, now_ms, request.mode, request.from_day, request.to_day)
    added = record_origins(conn, agent_id, origins)
    rows = [("origin", o.entry_key, o.session_id) for o in added] + [("day", key, sid) for key, sid in done]
    rows += [("diary_key", c.diary_line().key, "") for c in claims]
    if not diary_existed:
        rows.append(("diary_created", "DREAMS.md", ""))
    add_journal_rows(conn, run_id, rows)
    return run_id, set(), len(added)


def _stage(
    conn: Connection, run_id: int, claims: Sequence[Claim], citations: dict[str, tuple[str, int]], now_ms: int
) -> int:
    """Upsert one grounded signal per claim; journal each entry's prior state first."""
    keys = [staged_key(c) for c in claims]
    prior = {r[0]: r for r in load_raw_rows(conn, keys)}
    journal: list[tuple[str, str, str]] = []
    for claim, key in zip(claims, keys, strict=True):
        row = prior.get(key)
        q = query_hash(BACKFILL_QUERY_PREFIX + claim.day)
        origin = reduce(least_trusted, [m.origin_class for m in claim.messages])
        observed = max(m.observed_at for m in claim.messages)
        if row is None:
            path, line = citations[key]
            journal.append(("staged_new", key, ""))
            insert_raw_row(
                conn,
                (
                    key,
                    path,
                    line,
                    line,
                    claim.first.snippet[:800],
                    0,
                    0,
                    1,
                    SESSION_INGESTION_SCORE,
                    SESSION_INGESTION_SCORE,
                    now_ms,
                    now_ms,
                    json.dumps([q]),
                    json.dumps([claim.day]),
                    "[]",
                    origin,
                    "interactive",
                    observed,
                    claim_hash(claim.first.snippet),
                    None,
                    None,
                ),
            )
            prior[key] = load_raw_row(conn, key)
            continue
        if not any(j[0] in ("staged_new", "staged_prior") and j[1] == key for j in journal):
            journal.append(("staged_prior", key, json.dumps(list(row))))
        queries, days = json.loads(row[12]), json.loads(row[13])
        if q in queries and claim.day in days:
            continue  # dedupe per query per day: a repeat is not extra evidence
        queries = (queries + [q])[-32:]
        days = (days + [claim.day])[-16:] if claim.day not in days else days
        add_grounded_signal(
            conn,
            key,
            SESSION_INGESTION_SCORE,
            now_ms,
            json.dumps(queries),
            json.dumps(days),
            least_trusted(row[15], origin),
            observed,
        )
        prior[key] = load_raw_row(conn, key)
    add_journal_rows(conn, run_id, journal)
    return len(claims)


async def _apply(
    rt: AgentRuntime,
    request: BackfillRequest,
    report: BackfillReport,
    claims: list[Claim],
    done: list[tuple[str, str]],
    generation: int,
) -> BackfillReport:
    store = rt.require_store()
    secret = rt.secret()
    now_ms = int(time.time() * 1000)
    staging = request.mode == "apply"
    async with rt.lock().hold() as lease:
        diary = read_diary(rt.paths.workspace)
        diary_existed = diary.content_hash != ABSENT
        run_id, gone, added = await store.write(
            _begin_run,
            rt.agent_id,
            request,
            now_ms,
            done,
            claims,
            diary_existed,
            secret,
            generation,
            fence=lease.fence,
        )
        while gone:  # a session was forgotten after the scan: drop its messages and re-plan
            claims = coalesce([m for c in claims for m in c.messages if m.session_id not in gone])
            done = [(key, sid) for key, sid in done if sid not in gone]
            run_id, gone, added = await store.write(
                _begin_run,
                rt.agent_id,
                request,
                now_ms,
                done,
                claims,
                diary_existed,
                secret,
                generation,
                fence=lease.fence,
            )
        report.run_id = run_id
        report.origin_rows = added
        report.claims = len(claims)
        report.candidates = sum(len(c.messages) for c in claims)
        if staging and claims:
            # Reserved before the append, so forget can find every line written.
            await store.write(
                record_corpus_files,
                [(m.session_id, corpus_relative_path(c.day)) for c in claims for m in c.messages],
                fence=lease.fence,
            )
            citations = _append_corpus(rt, claims)
            await store.write(
                add_journal_rows,
                run_id,
                [("corpus_line", path, line) for path, line in citations[1]],
                fence=lease.fence,
            )
            report.corpus_lines = len(citations[1])
            report.staged_entries = await store.write(
                _stage, run_id, claims, citations[0], now_ms, fence=lease.fence
            )
        existing = block_text(read_diary(rt.paths.workspace).text or "", BLOCK)
        written, diary_rows, warnings = await publish_block(
            rt, lease, BLOCK, HEADING, diary_items(existing, claims)
        )
        if diary_rows:  # only if a line's lineage was not reserved above (never, unless raced)
            await store.write(
                add_journal_rows,
                run_id,
                [("origin", o.entry_key, o.session_id) for o in diary_rows],
                fence=lease.fence,
            )
        report.diary_lines = written
        report.origin_rows += len(diary_rows)
        report.warnings += warnings
    return report


def _append_corpus(
    rt: AgentRuntime, claims: Sequence[Claim]
) -> tuple[dict[str, tuple[str, int]], list[tuple[str, str]]]:
    """One corpus line per message (forget finds each session's lines); the claim cites the first."""
    citations: dict[str, tuple[str, int]] = {}
    lines_added: list[tuple[str, str]] = []
    by_day: dict[str, list[Claim]] = {}
    for c in claims:
        by_day.setdefault(c.day, []).append(c)
    for day, day_claims in sorted(by_day.items()):
        rendered = [
            render_line(rt.agent_id, m.session_path, m.line_number, m.snippet)
            for c in day_claims
            for m in c.messages
        ]
        rel = corpus_relative_path(day)
        # A read + hash-checked commit: backfill batches are bounded, and a crash never leaves
        # half a line (ingestion's appender streams; both write under the workspace lock).
        first = append_lines(rt.paths.workspace / rel, rendered, root=rt.paths.workspace) + 1
        n = first
        for c in day_claims:
            citations.setdefault(staged_key(c), (rel, n))
            n += len(c.messages)
        lines_added += [(rel, r) for r in rendered]
    return citations, lines_added


# --- rollback ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Journal:
    run_ids: tuple[int, ...]
    origins: tuple[tuple[str, str], ...]
    staged_new: tuple[str, ...]
    staged_prior: tuple[tuple[str, str], ...]
    corpus_lines: tuple[tuple[str, str], ...]
    diary_keys: frozenset[str]
    diary_created: bool


def _read_journal(conn: Connection) -> Journal:
    runs = active_run_ids(conn)
    rows = journal_rows(conn, runs)

    def of(kind: str) -> list[tuple[str, str]]:
        return [(k, p) for _, kd, k, p in rows if kd == kind]

    # The oldest run's prior state is the state before any backfill (runs are undone together).
    prior: dict[str, str] = {}
    for key, payload in reversed(of("staged_prior")):
        prior.setdefault(key, payload)
    return Journal(
        runs,
        tuple(of("origin")),
        tuple(k for k, _ in of("staged_new")),
        tuple(prior.items()),
        tuple(of("corpus_line")),
        frozenset(k for k, _ in of("diary_key")),
        bool(of("diary_created")),
    )


def _undo_store(
    conn: Connection, agent_id: str, journal: Journal, keep: set[str], now_ms: int
) -> dict[str, int]:
    counts = {"staged": 0, "origins": 0}
    new = [k for k in journal.staged_new if k not in keep]
    counts["staged"] += delete_entries(conn, new)
    # Signals a sweep recorded for them since would otherwise outlive the entries.
    delete_signals(conn, new)
    for key, payload in journal.staged_prior:
        if key in keep:
            continue
        values = json.loads(payload)
        # Only an entry that still exists is restored: one forget removed stays removed.
        counts["staged"] += restore_raw_row(conn, [key, *values[1:]])
    counts["origins"] = delete_origin_rows(
        conn, agent_id, [(key, sid) for key, sid in journal.origins if key not in keep]
    )
    mark_rolled_back(conn, journal.run_ids, now_ms)
    return counts


def _remove_diary_lines(text: str, keys: frozenset[str]) -> str:
    """Remove the run's marked lines (marker, line, indented details) and emptied day headings."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        key = promotion_key(lines[i])
        if key is not None and key in keys:
            i += 1
            if i < len(lines) and promotion_key(lines[i]) is None:
                i += 1
                while i < len(lines) and re.match(r"^\s+\S", lines[i]):
                    i += 1
            continue
        out.append(lines[i])
        i += 1
    # Drop `### day` headings whose section lost every line.
    cleaned: list[str] = []
    for j, line in enumerate(out):
        if line.startswith("### "):
            nxt = out[j + 1] if j + 1 < len(out) else ""
            if nxt.startswith("### ") or nxt.startswith("<!-- memoryd:dreaming:") or not nxt.strip():
                continue
        cleaned.append(line)
    return "\n".join(cleaned)


async def _rollback(rt: AgentRuntime, report: BackfillReport) -> BackfillReport:
    store = rt.require_store()
    async with rt.lock().hold() as lease:
        journal = await store.read(_read_journal)
        if not journal.run_ids:
            return report
        # Entries promoted into MEMORY.md since keep their lineage: rollback never orphans memory.
        memory = read_memory_file(rt.paths.workspace)
        keep = marker_keys(memory.text or "") & (
            {k for k, _ in journal.origins} | set(journal.staged_new) | {k for k, _ in journal.staged_prior}
        )
        if keep:
            report.warnings.append(
                f"{len(keep)} backfilled entries were promoted since; their lineage is kept"
            )
        _undo_diary(rt, journal)
        _undo_corpus(rt, journal)
        counts = await store.write(
            _undo_store, rt.agent_id, journal, keep, int(time.time() * 1000), fence=lease.fence
        )
        report.staged_entries = counts["staged"]
        report.origin_rows = counts["origins"]
        report.corpus_lines = len(journal.corpus_lines)
        report.diary_lines = len(journal.diary_keys)
        report.rolled_back_runs = sorted(journal.run_ids)
    return report


def _undo_diary(rt: AgentRuntime, journal: Journal) -> None:
    for _ in range(DREAM_COMMIT_ATTEMPTS):
        snap = read_diary(rt.paths.workspace)
        if not snap.writable or snap.content_hash == ABSENT:
            return
        text = _remove_diary_lines(snap.text or "", journal.diary_keys)
        body = block_text(text, BLOCK)
        if body is not None and not body.strip():
            text = remove_block(text, BLOCK, HEADING)
        if journal.diary_created and text.strip() in ("", DIARY_HEADER):
            try:
                commit_file(snap.path, None, expected_hash=snap.content_hash, root=rt.paths.workspace)
                return
            except WriteConflict:
                continue
        if text == snap.text:
            return
        try:
            commit_memory(snap, text, rt.paths.workspace)
            return
        except WriteConflict:
            continue


def _undo_corpus(rt: AgentRuntime, journal: Journal) -> None:
    by_path: dict[str, list[str]] = {}
    for rel, line in journal.corpus_lines:
        by_path.setdefault(rel, []).append(line)
    for rel, remove in by_path.items():
        path = rt.paths.workspace / rel
        for _ in range(DREAM_COMMIT_ATTEMPTS):
            data = read_bytes_nofollow(path)
            if data is None:
                break
            lines = data.decode("utf-8", errors="replace").split("\n")
            pending = list(remove)
            kept = []
            for ln in lines:
                if ln in pending:
                    pending.remove(ln)
                    continue
                kept.append(ln)
            content = "\n".join(kept)
            try:
                commit_file(
                    path,
                    content if content.strip() else None,
                    expected_hash=sha256_hex(data),
                    root=rt.paths.workspace,
                )
                break
            except WriteConflict:
                continue
