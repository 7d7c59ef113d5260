"""One task of the parallel scan, run in a worker process: read, export and hash whole sessions
and write their rows into the worker's scratch file (store/scratch.py).

What a task does per session is what the serial sweep's `_scan_one` does (daemon/ingest/sweep.py)
with no cap that could stop it (the sweep sends only sessions no cap can cut short), and what the
serial commit derives from each candidate (corpus line, claim, seen hash) is derived here, so the
sweep's process only moves rows. The task's inputs and results are plain data (pickled by the
pool); the module imports only the scanner, the staging hashes and the scratch writer.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.constants import INGEST_TAKE_CHUNK, STAGED_SNIPPET_MAX_CHARS
from memoryd.errors import MemorydError
from memoryd.ingest.checkpoints import seen_scope
from memoryd.ingest.corpus import corpus_relative_path, render_line
from memoryd.ingest.plan import ScanPlan
from memoryd.ingest.scan import Candidate, Cursor, DayOf, TranscriptScanner
from memoryd.ingest.staging import claim_hash, query_hash, session_query
from memoryd.sessions.json_store import JsonSessionSource
from memoryd.sessions.model import Fingerprint, SessionInfo
from memoryd.store.erased_senders import ErasedSenders
from memoryd.store.lines import CLAIM_KEY_PREFIX
from memoryd.store.scratch import CandRow, scratch_name, write_rows


@dataclass(frozen=True, slots=True)
class SessionJob:
    ordinal: int  # the session's place in the sweep's reading order
    session: SessionInfo
    fingerprint: Fingerprint
    plan: ScanPlan
    seen: frozenset[str]  # the session's stored seen hashes


@dataclass(frozen=True, slots=True)
class ScanTask:
    task: int
    agent_id: str
    sessions_dir: str
    root: str
    timezone: str
    scratch_dir: str
    sweep_pid: int
    token: str
    erased: ErasedSenders  # the sweep's erased senders: the same skip as a serial scan
    sessions: tuple[SessionJob, ...]


@dataclass(frozen=True, slots=True)
class SessionResult:
    ordinal: int
    opened: bool  # the transcript was opened (counts as scanned)
    candidates: int
    cursor: Cursor | None  # None: nothing was read (its checkpoint stays as it was)
    senders: dict[str, Any]
    rewritten: bool
    error: str | None


@dataclass(frozen=True, slots=True)
class TaskResult:
    task: int
    path: str  # the scratch file ("" when the task found no candidate)
    lo: int  # seq of its first and last rows in that file
    hi: int
    sessions: tuple[SessionResult, ...]
    skipped: dict[str, int] = field(default_factory=dict)


def exit_with_owner() -> None:
    """Pool initializer: the worker ends when the process that asked for it dies (SIGKILL too).
    A pool worker blocks on a call queue whose write end it holds itself, and it holds the
    forkserver's liveness pipe: nothing else would ever end it, or the forkserver."""
    owner = multiprocessing.parent_process()  # under a forkserver: the requesting process
    if owner is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([owner.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="memoryd-owner-watch", daemon=True).start()


def run_task(task: ScanTask) -> TaskResult:
    source = JsonSessionSource(task.agent_id, Path(task.sessions_dir), None, root=Path(task.root))
    day_of = DayOf(task.timezone)
    skipped: dict[str, int] = {}
    rows: list[CandRow] = []
    results: list[SessionResult] = []
    day_counts: dict[str, int] = {}
    day_facts: dict[str, tuple[str, str]] = {}  # day -> (corpus path, query hash)
    for job in task.sessions:
        result, found = _scan_session(source, job, task.agent_id, day_of, skipped, task.erased)
        results.append(result)
        _rows_of(task, job.session, found, rows, day_counts, day_facts)
    if not rows:
        return TaskResult(task.task, "", 0, -1, tuple(results), skipped)
    path = Path(task.scratch_dir) / scratch_name(task.sweep_pid, task.token, os.getpid())
    lo, hi = write_rows(path, rows)
    return TaskResult(task.task, str(path), lo, hi, tuple(results), skipped)


def _scan_session(
    source: JsonSessionSource,
    job: SessionJob,
    agent_id: str,
    day_of: DayOf,
    skipped: dict[str, int],
    erased: ErasedSenders,
) -> tuple[SessionResult, list[Candidate]]:
    session = job.session
    scanner = TranscriptScanner(
        source,
        session,
        job.plan,
        job.fingerprint,
        seen_scope(agent_id, session.session_id),
        set(job.seen),
        day_of,
        skipped,
        erased.test_for(session.session_id),
    )
    found: list[Candidate] = []
    cursor: Cursor | None = None
    senders: dict[str, Any] = {}
    opened = False
    error = None
    try:
        scanner.open()
        opened = True
        while True:
            found.extend(scanner.take(INGEST_TAKE_CHUNK))
            cursor = scanner.cursor()
            if scanner.senders:
                senders.update(scanner.take_senders())
            if scanner.finished:
                break
    except (MemorydError, OSError) as exc:
        # As the serial sweep: the last cursor matches the candidates kept.
        error = f"session {session.session_id}: {exc}"
    finally:
        scanner.close()
    rewritten = scanner.rewritten or job.plan.rewrite
    return SessionResult(job.ordinal, opened, len(found), cursor, senders, rewritten, error), found


def _rows_of(
    task: ScanTask,
    session: SessionInfo,
    found: list[Candidate],
    rows: list[CandRow],
    day_counts: dict[str, int],
    day_facts: dict[str, tuple[str, str]],
) -> None:
    if not found:
        return
    # A session staged in one batch numbers its seen hashes in staging order: by day, then line.
    order = sorted(range(len(found)), key=lambda i: (found[i].day, i))
    seen_seq = [0] * len(found)
    for rank, i in enumerate(order, 1):
        seen_seq[i] = rank
    agent, kind, session_path = task.agent_id, session.session_kind, session.session_path
    for i, c in enumerate(found):
        facts = day_facts.get(c.day)
        if facts is None:
            facts = day_facts[c.day] = (corpus_relative_path(c.day), query_hash(session_query(c.day)))
        day_idx = day_counts.get(c.day, 0)
        day_counts[c.day] = day_idx + 1
        claim = claim_hash(c.snippet)
        rows.append(
            CandRow(
                task.task,
                c.session_id,
                c.session_key,
                i + 1,
                seen_seq[i],
                c.day,
                day_idx,
                facts[0],
                CLAIM_KEY_PREFIX + claim,
                c.snippet[:STAGED_SNIPPET_MAX_CHARS],
                c.origin_class,
                kind,
                c.observed_at,
                claim,
                facts[1],
                c.seen_hash,
                render_line(agent, session_path, c.line_number, c.snippet),
            )
        )
