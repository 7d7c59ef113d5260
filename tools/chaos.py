"""The fault campaign: `python -m tools.chaos --rounds N --seconds S [--seed X]`.

Runs `memoryd run` as a subprocess against a Redis server this runner starts itself (a child
`redis-server` on a free loopback port, no persistence) and a generated session store, while a
driver keeps appending to transcripts and enqueues forget jobs (sessions, participants, hook
sources) and erase jobs (the user scope `tenant:<t>:user:<u>` of a participant) through
memoryd.runtime.client. At random points it kills the daemon with SIGKILL and starts it
again, and restarts its Redis (`redis-cli -p P shutdown nosave`, then starts it again). It also
plants poisoned jobs (records arq's decoding trips over, members scored -inf or not UTF-8),
SIGSTOPs the daemon past its lease while this runner forgets sessions under the lock the
stopped daemon lost, and steps the fence ahead as a clock running an hour fast would, before a
Redis restart loses the counter. It swaps session files for FIFOs, symlinks and /dev/zero
(tools/chaos_files.py), SIGSTOPs the daemon past its lease right before each kind of file
write (failpoints), and, as root with --tmpfs-mb, fills the state directory's tmpfs. After
every round it checks the invariants against a model of the expected state:

* no resurrection: nothing of a session whose forget or erase completed is in the workspace files
  (memory files, diary, daily notes, corpus), staged entries, entry origins, seen hashes,
  index chunks, FTS, vectors, the embedding cache or memory backups (preimages);
* no collateral loss: the staged lineage (origin rows, corpus lines) of sessions no forget
  names never shrinks, and after the final drain holds every message the driver wrote;
* forgotten records are never lost (an erase may turn them into `hmac:` records: both forms
  count, checked with the agent's secret), so erased sessions stay excluded from ingestion;
  the stored fence never goes backwards; the lock is only
  ever held by the running daemon (or a killed one, until its lease expires);
* every enqueued forget completes (re-enqueued when Redis lost it or a run failed), each
  session it selects gets a forgotten record and no session that no forget names does (its
  stored result names no session); every enqueued erase completes with
  a receipt whose state is `complete` and whose verification passed (the campaign places no
  legal hold, so `refused`/`partial` is a violation); the daemon never exits by itself;
* every poisoned job leaves the queue (failed alone) unless a Redis restart lost it first;
* a swapped file never blocks the daemon (a forget enqueued meanwhile ends, and completes once
  the file is back), no text planted outside sessions_root reaches the state directory, and
  with a transcript swapped the agent's other sessions keep being ingested;
* the corpus holds each transcript line once, and at the end each line is cited by exactly one
  staged entry; on a full disk the daemon does not exit and the CLI prints one line.

Bounded in count (rounds), time (seconds per round, a bounded final drain) and space (tmp dir).
Only the Redis server started here is ever restarted or shut down.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from tools.chaos_files import REPLACEMENTS, TARGETS, Swap, Tmpfs, planted_in, target_path

REPO = Path(__file__).resolve().parent.parent
AGENT = "chaos"
HOST = "chaos-host"
LOCK_TTL_MS = 3000
JOB_TIMEOUT_S = 8  # arq re-runs a killed job once its in-progress key (timeout + 10 s) expires
DRAIN_S = 90.0  # bound of the final drain
STORE_READ_TRIES = 5  # opens of the store for one invariant check (see check_invariants)
READY_LINE = "memoryd.service: ready"  # the daemon's log line once stores and Redis are up
# A daemon restarted in the last round gets this long to be ready before the next round's pause
# starts, most of the time (READY_WAIT_RATE): killed before it is ready in every round, under
# load it never runs a job, and the backlog only grows. The other rounds hit it while it starts.
READY_WAIT_S = 30.0
READY_WAIT_RATE = 0.8
# A forget enqueued while a session file is swapped completes within this bound (a daemon
# blocked on a FIFO never would); so does the staging of a message appended to another session.
SWAP_WAIT_S = 60.0
# A forget's run may fail with these while a session file is swapped (and only then): the
# agent's session listing is not a regular file, so a selection cannot be resolved.
SWAP_ERRORS = frozenset({"UnsafeFile"})
# While the agent directory itself is swapped it is no agent (not a directory): a daemon
# started then does not serve it until the directory is back, and finds it again within a
# few heartbeats (daemon/runtime/service.py).
AGENT_DIR_SWAP_ERRORS = SWAP_ERRORS | {"AgentNotServed"}
# The daemon's line for a background loop that failed on something it did not expect and was
# started again (daemon/runtime/supervise.py): it kept serving, but the error is a bug.
LOOP_RESTART_MARK = "; starting it again in "
# The daemon's line for an agent left out because its store cannot be opened (a full disk):
# its jobs are refused as not served until the store opens, which it tries at every heartbeat.
STORE_WAIT_MARK = f"agent {AGENT}: not served until its store opens"
ENDED_RUNS_KEPT = 3  # a job's failure is judged within a round, and a round restarts at most twice
# A daemon restarted with a write failpoint armed reaches that write within this bound or is
# restarted without it (the write did not come up: nothing to promote, no erasure queued).
WRITE_STOP_WAIT_S = 20.0
# The file writes a SIGSTOP past the lease lands right before (daemon/failpoints.py): a daemon
# resuming from there must be refused (lease check) or have its write undone.
WRITE_STEPS = {
    "corpus append": "ingest.corpus.write",
    "MEMORY.md": "file.commit.memory",
    "DREAMS.md": "file.commit.diary",
    "corpus rewrite": "file.commit.corpus",
    "last-sweep file": "ingest.last_sweep.write",
    "erasure journal key": "erase.journal",
}
# Failures a fault may cause and a rerun cures (Redis gone mid-run, a lease lost or fenced off,
# a file changed under the purge; arq cancelling a run that outlived daemon.job_timeout_s, which a
# short --job-timeout makes likely for an erase and its verification). Anything else is a bug.
TRANSIENT_ERRORS = frozenset(
    {
        "OperationFailed",
        "LockLost",
        "LockTimeout",
        "FencedOut",
        "WriteConflict",
        "SourceChanged",
        "TimeoutError",
        # An erasure deletes the queued jobs whose payload names its subject (their job keys):
        # arq then fails such a member as "job expired", and the runner sends the request again.
        "JobExecutionFailed",
        # The agent's session listing is not a regular file (this campaign swapped it): a
        # selection cannot be resolved until it is back, and the job says so in one line.
        "UnsafeFile",
    }
)
VICTIMS = [f"s{i:02d}" for i in range(8)]  # sessions forget may select
KEEPERS = [f"s{i:02d}" for i in range(8, 12)]  # sessions no forget ever names
PARTICIPANTS = {sid: f"p{i % 4}" for i, sid in enumerate(VICTIMS)} | {sid: f"k{sid}" for sid in KEEPERS}
TENANT = "default"  # settings.retention.tenant; a session's user is its first non-agent participant
HOOKS = {"s00": "gmail", "s06": "gmail", "s03": "webhook"}


def token(sid: str) -> str:
    """A word only this session's messages contain (no token is a substring of another)."""
    return f"zq{sid}tok"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """A redis-server child on a free loopback port; restarts never touch any other server."""

    def __init__(
        self,
        workdir: Path,
        extra_args: tuple[str, ...] = (),
        port: int | None = None,
        cli_args: tuple[str, ...] = (),
    ):
        self.workdir = workdir
        self.port = port or free_port()
        self.extra_args = extra_args
        self.cli_args = cli_args  # e.g. ("--user", u, "--pass", p) for an ACL server
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> PrivateRedis:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                str(self.workdir),
                *self.extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server on port {self.port} exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server on port {self.port} did not start in {timeout_s}s")

    def shutdown_nosave(self) -> None:
        subprocess.run(
            ["redis-cli", "-p", str(self.port), *self.cli_args, "shutdown", "nosave"],
            capture_output=True,
            timeout=10,
        )
        self._reap()

    def restart(self) -> None:
        self.shutdown_nosave()
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.shutdown_nosave()
        self._reap()

    def _reap(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # only our own child, by its handle
            self.proc.wait(5)


class Daemon:
    """`memoryd run` as a subprocess of this runner."""

    def __init__(self, config: Path, log_path: Path):
        self.config = config
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed: list[tuple[int, float]] = []  # (pid, when) of SIGKILLed daemons
        self.stopped = False
        self.log_offset = 0
        self.helpers: set[int] = set()  # this runner's CLI processes (they take the lock too)
        self.loop_restart_lines: list[str] = []  # not yet taken (take_loop_restarts)
        self.disk_full: Callable[[], bool] = lambda: False  # is the state directory's disk full now?
        self.started_on_full_disk = False  # the current run started while it was
        self.loop_restarts_seen = 0  # of the current run's log
        # The logs of the runs that ended last: a job refused by one of them may be judged
        # after the daemon was restarted (a kill in the same round).
        self.ended_runs: deque[str] = deque(maxlen=ENDED_RUNS_KEPT)

    def start(self, env_extra: dict[str, str] | None = None) -> None:
        self._collect_loop_restarts()  # of the run that ended
        if self.log_path.exists():
            self.ended_runs.append(self._log_tail())
        self.started_on_full_disk = self.disk_full()
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.loop_restarts_seen = 0
        env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
        env.pop("NOTIFY_SOCKET", None)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memoryd.cli", "--config", str(self.config), "run"],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def _log_tail(self) -> str:
        with self.log_path.open("rb") as fh:
            fh.seek(self.log_offset)
            return fh.read().decode(errors="replace")

    def exit_cause(self) -> str:
        """The last lines of this run's log that say why it ended: its error line, or the last
        line of a traceback (the exception), with the frame above it."""
        lines = [ln.strip() for ln in self._log_tail().splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("memoryd: error:")]
        if errors:
            return errors[-1]
        if any(ln.startswith("Traceback") for ln in lines):
            frames = [ln for ln in lines if ln.startswith("File ") or ln.startswith("| File ")]
            return " / ".join([*frames[-1:], lines[-1]])
        return lines[-1] if lines else "(no log line)"

    def said(self, mark: str, *, lately: bool = False) -> bool:
        """Did the current run log a line containing `mark` (`lately`: or one of the runs that
        ended last)?"""
        if lately and any(mark in tail for tail in self.ended_runs):
            return True
        return self.log_path.exists() and mark in self._log_tail()

    def take_loop_restarts(self) -> list[str]:
        """The lines of background loops started again after an unexpected error, of every run
        so far, each returned once."""
        self._collect_loop_restarts()
        lines, self.loop_restart_lines = self.loop_restart_lines, []
        return lines

    def _collect_loop_restarts(self) -> None:
        if not self.log_path.exists():
            return
        lines = [ln for ln in self._log_tail().splitlines() if LOOP_RESTART_MARK in ln]
        self.loop_restart_lines += lines[self.loop_restarts_seen :]
        self.loop_restarts_seen = len(lines)

    async def wait_ready(self, timeout_s: float) -> bool:
        """Until this run logged READY (stores and Redis up), it exited, or `timeout_s` passed."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.exited() is None:
            if READY_LINE in self._log_tail():
                return True
            await asyncio.sleep(0.05)
        return False

    def refused_start(self) -> bool:
        """Did the last run exit 1 refusing to start because Redis was down (as designed; systemd's
        Restart=on-failure starts it again)? Anything else is a crash."""
        tail = self._log_tail()
        return self.exited() == 1 and "memoryd: error: redis_url" in tail and "Traceback" not in tail

    def refused_start_on_full_disk(self) -> bool:
        """Did it refuse to start in one line because its state directory is full (a disk-full
        fault is on)? Also as designed: it names the problem and exits 1."""
        lines = [ln for ln in self._log_tail().splitlines() if ln.startswith("memoryd: error:")]
        return self.exited() == 1 and len(lines) == 1 and "Traceback" not in self._log_tail()

    def pause(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)
            self.stopped = True

    def resume(self) -> None:
        if self.proc is not None and self.stopped:
            self.proc.send_signal(signal.SIGCONT)
            self.stopped = False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.killed.append((self.proc.pid, time.monotonic()))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


# --- the world and its model -------------------------------------------------------------------


def write_config(
    path: Path, state_dir: Path, sessions_root: Path, redis_url: str, job_timeout_s: float = JOB_TIMEOUT_S
) -> None:
    path.write_text(f"""state_dir = "{state_dir}"
sessions_root = "{sessions_root}"
redis_url = "{redis_url}"

[ingest]
interval_s = 1.0

[dreaming]
interval_s = 2.0
min_score = 0.0
min_recall_count = 0
min_unique_queries = 0

[index]
interval_s = 1.0
sources = ["memory", "sessions"]
[index.embedding]
provider = "hashing"
dims = 16

[retention]
interval_s = 3600.0

[daemon]
host_id = "{HOST}"
metrics_listen = "127.0.0.1:0"
schedule = true
poll_delay_s = 0.02
max_jobs = 4
job_timeout_s = {job_timeout_s}
shutdown_grace_s = 1.0
redis_retry_max_s = 0.5

[lock]
ttl_ms = {LOCK_TTL_MS}
wait_s = 10.0
""")


def message_text(sid: str, n: int) -> str:
    """Words of this session only: dreaming merges similar text across sessions into entries of
    mixed lineage, which a forget rightly removes whole; the collateral check wants none."""
    words = " ".join(f"{sid}w{(n * 5 + j) % 40}" for j in range(6))
    return f"{token(sid)} {words} n{n}"


@dataclass
class Pending:
    request: dict[str, Any]
    targets: frozenset[str]
    job_id: str
    attempt: int = 0
    erase: bool = False  # an erasure; else a forget

    @property
    def kind(self) -> str:
        from memoryd.ops import erase, forget

        return (erase.OP if self.erase else forget.OP).contract.name


@dataclass
class Tally:
    rounds: int = 0
    kills: int = 0
    redis_restarts: int = 0
    appends: int = 0
    forget_enqueued: int = 0
    forget_reenqueued: int = 0
    forget_completed: int = 0
    erase_enqueued: int = 0
    erase_reenqueued: int = 0
    erase_completed: int = 0
    erased_sessions: int = 0  # sessions the erase receipts sent through the forget pipeline
    # Receipts whose redis check waited for queued purge jobs naming the subject (no purge deletes
    # another): each must be verified by the end of the drain, once those jobs have run.
    waiting_receipts: list[str] = field(default_factory=list)
    checks: int = 0
    faults_mid_forget: int = 0  # kills / Redis restarts that hit a running forget or erase job
    lock_samples: int = 0
    promoted_watched: int = 0
    embeddings_watched: int = 0  # cached embeddings of forgotten sessions that had to go
    refused_starts: int = 0  # starts refused because Redis was restarting (exit 1, started again)
    poisoned: int = 0  # broken job records planted in the queue
    poisoned_failed: int = 0  # of them, failed alone and gone from the queue
    stops: int = 0  # SIGSTOPs of the daemon past its lease
    stop_forgets: int = 0  # forgets this runner completed while the daemon was stopped
    fence_steps: int = 0  # fence counters stepped an hour ahead (then lost with Redis)
    swaps: dict[str, int] = field(default_factory=dict)  # "<target>/<replacement>" -> count
    swap_forgets: int = 0  # forgets enqueued during a swap that completed within SWAP_WAIT_S
    swap_ingests: int = 0  # messages of another session staged during a transcript swap
    planted_checks: int = 0  # scans of the state directory for text planted outside sessions_root
    write_stops: dict[str, int] = field(default_factory=dict)  # file write -> SIGSTOPs right before it
    write_stops_missed: int = 0  # armed daemons that did not reach their write in time
    disk_fills: int = 0  # times the tmpfs state directory was filled with ballast
    disk_full_rounds: int = 0  # rounds run with it full
    disk_full_cli: int = 0  # CLI forgets run on the full disk (one line or success, checked)
    full_disk_refusals: int = 0  # starts refused in one line on the full disk
    corpus_lines_checked: int = 0  # corpus lines checked for duplicates and citations at the end
    store_checks_skipped: int = 0  # store checks a full disk kept SQLite from opening the store for
    violations: list[str] = field(default_factory=list)
    failures_seen: dict[str, int] = field(default_factory=dict)  # job error class -> count (then retried)
    failure_examples: dict[str, str] = field(default_factory=dict)  # job error class -> first message


class World:
    def __init__(self, root: Path, rng: random.Random):
        from tests.builders import Msg, SessionStoreBuilder

        self.root = root
        self.rng = rng
        self.sessions_root = root / "sessions"
        self.builder = SessionStoreBuilder(self.sessions_root, AGENT)
        self.written: dict[str, list[str]] = {}  # sid -> message texts appended so far
        for sid in VICTIMS + KEEPERS:
            meta: dict[str, Any] = {"participants": [{"actorId": PARTICIPANTS[sid]}], "chatType": "direct"}
            if sid in HOOKS:
                meta["hookExternalContentSource"] = HOOKS[sid]
            texts = [message_text(sid, 0), message_text(sid, 1)]
            self.builder.add(
                f"agent:{AGENT}:{sid}", sid, [Msg("user", texts[0]), Msg("assistant", texts[1])], **meta
            )
            self.written[sid] = texts
        self._msg = Msg

    def append(self, sid: str, count: int) -> None:
        start = len(self.written[sid])
        texts = [message_text(sid, start + j) for j in range(count)]
        msgs = [self._msg("user" if (start + j) % 2 == 0 else "assistant", t) for j, t in enumerate(texts)]
        self.builder.append(sid, msgs, start_index=start)
        self.written[sid].extend(texts)

    def random_request(self) -> tuple[dict[str, Any], frozenset[str]]:
        kind = self.rng.choice(["session", "session_key", "participant", "hook"])
        if kind == "session":
            sid = self.rng.choice(VICTIMS)
            return {"agent": AGENT, "sessions": [sid]}, frozenset({sid})
        if kind == "session_key":
            sid = self.rng.choice(VICTIMS)
            return {"agent": AGENT, "sessions": [f"agent:{AGENT}:{sid}"]}, frozenset({sid})
        if kind == "participant":
            who = self.rng.choice(sorted({PARTICIPANTS[s] for s in VICTIMS}))
            return {"agent": AGENT, "participants": [who]}, frozenset(
                s for s in VICTIMS if PARTICIPANTS[s] == who
            )
        hook = self.rng.choice(sorted(set(HOOKS.values())))
        return {"agent": AGENT, "hook_sources": [hook]}, frozenset(s for s, h in HOOKS.items() if h == hook)

    def random_erase(self) -> tuple[dict[str, Any], frozenset[str]]:
        """Erase one participant's user scope: by the default scope rule it holds exactly the
        sessions whose first non-agent participant is that user (keepers' users are never named)."""
        who = self.rng.choice(sorted({PARTICIPANTS[s] for s in VICTIMS}))
        return (
            {"scope": f"tenant:{TENANT}:user:{who}"},
            frozenset(s for s in VICTIMS if PARTICIPANTS[s] == who),
        )


# --- invariant checks ----------------------------------------------------------------------------


@dataclass
class Observed:
    origins: dict[str, int] = field(default_factory=dict)  # keeper -> origin rows last seen
    corpus: dict[str, int] = field(default_factory=dict)  # keeper -> corpus lines last seen
    fence: int = 0
    tombstones: set[str] = field(default_factory=set)
    promoted: set[str] = field(default_factory=set)  # keeper claims seen promoted into MEMORY.md
    chunk_hashes: dict[str, set[str]] = field(default_factory=dict)  # sid -> content hashes of its chunks


# Every staged claim's origins, (entry key, session id) once each: the claims of the staged lines
# (ingest_lines, keyed by session number) and claim keys recorded in memory_entry_origins.
_CLAIM_ORIGINS = (
    "SELECT DISTINCT printf('memory:claim:%012x', l.claim) AS entry_key, s.session_id FROM ingest_lines l "
    "JOIN ingest_sessions s ON s.session_no = l.session_no WHERE l.claim IS NOT NULL "
    "UNION SELECT entry_key, session_id FROM memory_entry_origins WHERE entry_key LIKE 'memory:claim:%'"
)


def _count(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> int:
    return int(conn.execute(sql, params).fetchone()[0])


def _rows_of_forgotten_sessions(conn: Any, done: list[str]) -> list[str]:
    if not done:
        return []
    leaks: list[str] = []
    marks = ",".join("?" * len(done))
    for table, col in (
        ("memory_entry_origins", "session_id"),
        ("ingest_sessions", "session_id"),  # numbers of sessions, with their staged lines
        ("memory_index_chunks", "session_id"),
        ("memory_index_sources", "session_id"),
        ("curated_writes", "session_id"),
    ):
        n = _count(conn, f"SELECT count(*) FROM {table} WHERE {col} IN ({marks})", tuple(done))
        if n:
            leaks.append(f"{table}: {n} rows of forgotten sessions")
    n = _count(
        conn,
        "SELECT count(*) FROM ingest_lines l JOIN ingest_sessions s ON s.session_no = l.session_no "
        f"WHERE s.session_id IN ({marks})",
        tuple(done),
    )
    if n:
        leaks.append(f"ingest_lines: {n} staged lines (origins, seen hashes) of forgotten sessions")
    n = _count(
        conn,
        f"SELECT count(*) FROM ingest_checkpoints WHERE session_id IN ({marks}) AND excluded_reason IS NULL",
        tuple(done),
    )
    if n:
        leaks.append(f"ingest_checkpoints: {n} admitted checkpoints of forgotten sessions")
    return leaks


def _store_facts(
    conn: Any, done: list[str], tokens: list[str], watch: list[str], live: list[str], secret: bytes | None
) -> dict[str, Any]:
    # Its own SQL, not the repositories' (daemon/store/): an oracle that shared their queries
    # would share their mistakes. Only the forgotten-record check, with its keyed hash, is theirs.
    from memoryd.store.tombstones import forgotten_ids

    facts: dict[str, Any] = {"leaks": _rows_of_forgotten_sessions(conn, done), "origins": {}, "hashes": {}}
    for tok in tokens:
        like = f"%{tok}%"
        for table, col in (
            ("short_term_entries", "snippet"),
            ("memory_index_chunks", "text"),
            ("memory_backups", "content"),
        ):
            n = _count(conn, f"SELECT count(*) FROM {table} WHERE {col} LIKE ?", (like,))
            if n:
                facts["leaks"].append(f"{table}: {n} rows quoting {tok}")
        n = _count(
            conn, "SELECT count(*) FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH ?", (tok,)
        )
        if n:
            facts["leaks"].append(f"fts: {n} rows matching {tok}")
    n = _count(
        conn,
        "SELECT count(*) FROM memory_index_vectors WHERE chunk_rowid NOT IN "
        "(SELECT rowid FROM memory_index_chunks)",
    )
    if n:
        facts["leaks"].append(f"memory_index_vectors: {n} vectors of removed chunks")
    for sid in live:
        facts["hashes"][sid] = {
            h
            for (h,) in conn.execute(
                "SELECT hash FROM memory_index_chunks WHERE session_id = ? OR text LIKE ?",
                (sid, f"%{token(sid)}%"),
            )
        }
    for sid in watch:
        # Staged claims (one per ingested message) whose whole lineage is in sessions no forget
        # names. (Dreaming's own REM/light entries are recomputed each run, so they come and go.)
        facts["origins"][sid] = _count(
            conn,
            f"SELECT count(*) FROM ({_CLAIM_ORIGINS}) WHERE session_id = ? AND entry_key NOT IN "
            f"(SELECT entry_key FROM ({_CLAIM_ORIGINS}) WHERE session_id NOT IN ({','.join('?' * len(watch))}))",
            (sid, *watch),
        )
    marks_w = ",".join("?" * len(watch))
    facts["keeper_claims"] = {
        k
        for (k,) in conn.execute(
            f"SELECT DISTINCT entry_key FROM ({_CLAIM_ORIGINS}) WHERE entry_key "
            f"NOT IN (SELECT entry_key FROM ({_CLAIM_ORIGINS}) WHERE session_id NOT IN ({marks_w}))",
            tuple(watch),
        )
    }
    facts["cache"] = {h for (h,) in conn.execute("SELECT hash FROM memory_embedding_cache")}
    facts["corpus_snippets"] = Counter(
        s
        for (s,) in conn.execute("SELECT snippet FROM short_term_entries WHERE path LIKE '%session-corpus/%'")
    )
    # Forgotten sessions by either record form: an erase keeps only `hmac:<hex>` records.
    facts["tombstones"] = forgotten_ids(conn, VICTIMS + KEEPERS, secret)
    row = conn.execute("SELECT max(token) FROM fence").fetchone()
    facts["fence"] = int(row[0] or 0)
    return facts


@dataclass(frozen=True)
class WorkspaceScan:
    """What the workspace files hold: text of forgotten sessions, corpus lines of each keeper."""

    found: list[str]
    corpus_lines: dict[str, int]
    corpus_text: str
    memory_md: str


def scan_workspace(ws: Path, done: set[str]) -> WorkspaceScan:
    """Memory files, diary, daily notes and the corpus."""
    found: list[str] = []
    corpus_lines: dict[str, int] = dict.fromkeys(KEEPERS, 0)
    corpus_text = ""
    memory_md = ""
    for p in sorted(ws.rglob("*")) if ws.exists() else []:
        if p.is_symlink() or not p.is_file() or ".tmp-" in p.name:
            continue
        try:
            text = p.read_text(errors="replace")
        except FileNotFoundError:
            continue  # replaced between listing and reading
        rel = p.relative_to(ws)
        if str(rel) == "MEMORY.md":
            memory_md = text
        found += [
            f"{rel}: holds text of forgotten session {sid}"
            for sid in done
            if token(sid) in text or f"sessions/{AGENT}/{sid}#" in text
        ]
        if "session-corpus" in rel.parts:
            corpus_text += text
            for sid in KEEPERS:
                corpus_lines[sid] += text.count(f"[{AGENT}/sessions/{AGENT}/{sid}#L")
    return WorkspaceScan(found, corpus_lines, corpus_text, memory_md)


async def read_store_facts(settings: Any, done: set[str], watch: list[str]) -> dict[str, Any] | None:
    from memoryd.agents import agent_paths
    from memoryd.store.db import Store

    paths = agent_paths(settings, AGENT)
    store = await Store.open_existing(paths.db_path)
    if store is None:
        return None
    try:
        live = [s for s in VICTIMS + KEEPERS if s not in done]
        secret = paths.secret_path.read_bytes() if paths.secret_path.exists() else None
        tokens = [token(s) for s in sorted(done)]
        return await store.read(_store_facts, sorted(done), tokens, watch, live, secret)
    finally:
        await store.close()


def judge_citations(scan: WorkspaceScan, facts: dict[str, Any]) -> tuple[int, list[str]]:
    """After recovery: each corpus line is cited by exactly one staged entry (its snippet), and
    no staged corpus entry cites a line the corpus lacks: no orphan, no duplicate (lines checked,
    findings)."""
    lines = corpus_lines(scan.corpus_text)
    texts = Counter(line.split("] ", 1)[1] if "] " in line else "" for line in lines)
    cited: Counter[str] = facts["corpus_snippets"]
    orphans = [t for t in texts if cited.get(t, 0) == 0]
    doubled = [t for t in texts if cited.get(t, 0) > 1]
    missing = [t for t in cited if t not in texts]
    found = []
    if orphans:
        found.append(f"corpus: {len(orphans)} lines no staged entry cites (orphans)")
    if doubled:
        found.append(f"corpus: {len(doubled)} lines cited by more than one staged entry")
    if missing:
        found.append(f"staged entries: {len(missing)} cite corpus lines that are gone")
    return len(lines), found


def judge_store(facts: dict[str, Any], done: set[str], obs: Observed, memory_md: str) -> list[str]:
    """The store's leaks, lost records and collateral losses; updates what was observed."""
    from memoryd.forget.scrub import promotion_keys_on_lines

    found = list(facts["leaks"])
    for sid in done:
        stale = obs.chunk_hashes.get(sid, set()) & facts["cache"]
        if stale:
            found.append(f"memory_embedding_cache: {len(stale)} embeddings of forgotten session {sid}")
    lost = obs.tombstones - facts["tombstones"]
    if lost:
        found.append(f"forgotten records lost: {sorted(lost)}")
    missing = done - facts["tombstones"]
    if missing:
        found.append(f"forget completed without a forgotten record: {sorted(missing)}")
    overreach = facts["tombstones"] & set(KEEPERS)
    if overreach:
        found.append(f"forgotten records of sessions no forget selects: {sorted(overreach)}")
    if facts["fence"] < obs.fence:
        found.append(f"stored fence went backwards: {obs.fence} -> {facts['fence']}")
    for sid in KEEPERS:
        if facts["origins"].get(sid, 0) < obs.origins.get(sid, 0):
            found.append(
                f"collateral loss: origin rows of {sid} {obs.origins[sid]} -> {facts['origins'][sid]}"
            )
        obs.origins[sid] = max(obs.origins.get(sid, 0), facts["origins"].get(sid, 0))
    for sid, hashes in facts["hashes"].items():
        if sid not in done:
            obs.chunk_hashes.setdefault(sid, set()).update(hashes)
    promoted_now = set(promotion_keys_on_lines(memory_md))
    gone = obs.promoted - promoted_now
    if gone:
        found.append(f"collateral loss: {len(gone)} promoted entries of untouched sessions left MEMORY.md")
    obs.promoted |= promoted_now & facts["keeper_claims"]
    obs.tombstones |= facts["tombstones"]
    obs.fence = max(obs.fence, facts["fence"])
    return found


def corpus_lines(corpus_text: str) -> list[str]:
    return [line for line in corpus_text.splitlines() if line.startswith("[")]


def committed_lines(scan: WorkspaceScan, committed: Counter[str] | None) -> dict[str, int]:
    """Keeper corpus lines a staged entry cites (all of them without a store). Lines of a batch
    whose commit has not happened yet may be cut back, rightly: they are not counted."""
    if committed is None:
        return scan.corpus_lines
    counts = dict.fromkeys(KEEPERS, 0)
    for line in corpus_lines(scan.corpus_text):
        mark, _, text = line.partition("] ")
        sid = mark.rsplit("/", 1)[-1].split("#", 1)[0]
        if sid in counts and committed.get(text, 0) > 0:
            counts[sid] += 1
    return counts


def judge_corpus(
    scan: WorkspaceScan, obs: Observed, world: World, final: bool, committed: Counter[str] | None = None
) -> list[str]:
    """No keeper loses committed corpus lines, no transcript line is in the corpus twice; at the
    end, every keeper message is staged."""
    found: list[str] = []
    counted = committed_lines(scan, committed)
    marks = Counter(line.split("] ", 1)[0] for line in corpus_lines(scan.corpus_text))
    twice = sorted(m for m, n in marks.items() if n > 1)
    if twice:
        found.append(f"corpus: {len(twice)} transcript lines appended more than once (first: {twice[0]}])")
    for sid in KEEPERS:
        if counted[sid] < obs.corpus.get(sid, 0):
            found.append(f"collateral loss: corpus lines of {sid} {obs.corpus[sid]} -> {counted[sid]}")
        obs.corpus[sid] = max(obs.corpus.get(sid, 0), counted[sid])
    if final:
        for sid in KEEPERS:
            absent = [t for t in world.written[sid] if t not in scan.corpus_text]
            if absent:
                found.append(f"expected state: {len(absent)} messages of {sid} never staged")
    return found


def _store_files(settings: Any) -> str:
    """The agent store's files and their sizes, and the space left where they are: what to
    look at when the store cannot be opened."""
    from memoryd.agents import agent_paths

    db = agent_paths(settings, AGENT).db_path
    sizes = []
    for suffix in ("", "-wal", "-shm"):
        f = Path(f"{db}{suffix}")
        sizes.append(f"{f.name} {f.stat().st_size:,} B" if f.exists() else f"no {f.name}")
    try:
        st = os.statvfs(db.parent)
        sizes.append(f"{st.f_bavail * st.f_frsize:,} B free")
    except OSError:
        pass
    return ", ".join(sizes)


async def check_invariants(
    settings: Any,
    done: set[str],
    watch: list[str],
    obs: Observed,
    tally: Tally,
    label: str,
    final: bool,
    world: World,
    planted: bool = False,
    disk_full: bool = False,
) -> None:
    from memoryd.agents import agent_paths

    scan = scan_workspace(agent_paths(settings, AGENT).workspace, done)
    found = list(scan.found)
    tally.checks += 1
    facts = None
    for attempt in range(STORE_READ_TRIES):
        try:
            facts = await read_store_facts(settings, done, watch)
            break
        except Exception as exc:
            if disk_full:  # SQLite cannot open the store on a full tmpfs: its checks wait for space
                tally.store_checks_skipped += 1
                break
            # A read-only open can race the daemon's last connection removing the WAL and -shm
            # files (SIGKILLed or closing): SQLite says "disk I/O error" once; open again.
            if "disk I/O error" in str(exc) and attempt < STORE_READ_TRIES - 1:
                await asyncio.sleep(0.2)
                continue
            tally.violations.append(
                f"{label}: the store could not be read: {type(exc).__name__}: {exc} [{_store_files(settings)}]"
            )
            break
    if facts is not None:
        found += judge_store(facts, done, obs, scan.memory_md)
        if final:
            checked, cites = judge_citations(scan, facts)
            tally.corpus_lines_checked = checked
            found += cites
    found += judge_corpus(scan, obs, world, final, facts["corpus_snippets"] if facts is not None else None)
    tally.checks += 1
    if final or planted:
        found += [
            f"{where}: holds text planted outside sessions_root" for where in planted_in(settings.state_dir)
        ]
        tally.planted_checks += 1
        tally.checks += 1
    for item in found:
        tally.violations.append(f"{label}: {item}")


# --- the campaign --------------------------------------------------------------------------------


class LockWatch:
    """Samples the workspace lock; its holder must be the running daemon, or a killed one whose
    lease has not yet expired."""

    def __init__(self, redis_url: str, lock_key: str, daemon: Daemon, tally: Tally):
        self.redis_url = redis_url
        self.lock_key = lock_key
        self.daemon = daemon
        self.tally = tally
        self.samples = 0

    async def run(self, stop: asyncio.Event) -> None:
        from redis.asyncio import Redis

        client = Redis.from_url(self.redis_url, socket_connect_timeout=1, socket_timeout=1)
        try:
            while not stop.is_set():
                try:
                    value = await client.get(self.lock_key)
                except (RedisError, OSError):
                    value = None
                if value is not None:
                    self.samples += 1
                    self._judge(value.decode())
                try:
                    await asyncio.wait_for(stop.wait(), 0.05)
                except TimeoutError:
                    pass
        finally:
            await client.aclose()

    def _judge(self, token_value: str) -> None:
        holder = token_value.rsplit("#", 1)[0]
        pid = int(holder.rsplit(":", 1)[1]) if ":" in holder and holder.rsplit(":", 1)[1].isdigit() else -1
        if pid in (self.daemon.pid, os.getpid(), *self.daemon.helpers):  # this runner's forgets, its CLI runs
            return
        now = time.monotonic()
        grace = LOCK_TTL_MS / 1000 + 1.0  # the lease's TTL, plus a sampling margin
        if any(p == pid and now - when <= grace for p, when in self.daemon.killed):
            return
        self.tally.violations.append(
            f"lock held by {holder!r}, which is neither the daemon nor a fresh corpse"
        )


def _shape(value: Any) -> str:
    """A value's type and, for a mapping, its keys (a result may name the subject: no values)."""
    if isinstance(value, dict):
        return f"dict with keys {sorted(value)}"
    return type(value).__name__


async def _raw_result(client: Any, job_id: str) -> str:
    """What arq stored for a job whose result the client did not read as a report: the record's
    fields, with the shape of its result in place of the result (it may name the subject)."""
    from arq.constants import result_key_prefix

    try:
        raw = await client.redis.get(result_key_prefix + job_id)
        record = json.loads(raw) if raw else None
    except (RedisError, OSError, ValueError) as exc:
        return f"record unreadable ({type(exc).__name__})"
    if not isinstance(record, dict):
        return f"record {_shape(record)}"
    return "record " + str(
        {k: (_shape(v) if k == "r" else v) for k, v in record.items() if k in ("f", "s", "t", "q", "r")}
    )


def _judge_erase(job: Pending, result: dict[str, Any], tally: Tally) -> None:
    """No hold exists, so the receipt must be complete and verified, and have erased (this time,
    or already by an earlier forget) nothing but its user's sessions."""
    if not result.get("state"):
        # Not a receipt: say what it was, to find where it came from.
        tally.violations.append(
            f"erase {job.request} completed with a result that is not a receipt: {_shape(result)}"
        )
        return
    if result.get("state") != "complete":
        tally.violations.append(f"erase {job.request} ended {result.get('state')!r} with no hold placed")
    if not result.get("verified"):
        failed = [
            (c.get("name"), c.get("locations"))
            for c in ((result.get("verification") or {}).get("checks") or [])
            if c.get("status") not in ("passed", "waiting")
        ]
        if failed or not (result.get("verification") or {}).get("waitingFor"):
            tally.violations.append(f"erase {job.request} receipt not verified (failed checks: {failed})")
        else:
            tally.waiting_receipts.append(str(result.get("receiptId")))
    sessions = int((result.get("artifacts") or {}).get("sessions", 0))
    if sessions > len(job.targets):
        tally.violations.append(
            f"erase {job.request} erased {sessions} sessions, its user has {len(job.targets)}"
        )
    tally.erased_sessions += sessions


async def poll_pending(
    client: Any,
    pending: list[Pending],
    done: set[str],
    tally: Tally,
    queue: str,
    also_transient: frozenset[str] = frozenset(),
) -> list[Pending]:
    from memoryd.ops import forget

    still: list[Pending] = []
    for job in pending:
        try:
            report = await client.job(job.job_id)
        except (RedisError, OSError):
            still.append(job)
            continue
        if report.state == "complete" and job.erase:
            if report.result is None:
                tally.violations.append(
                    f"erase {job.request} completed with a result that is not a receipt: "
                    f"{await _raw_result(client, job.job_id)}"
                )
            else:
                _judge_erase(job, report.result, tally)
            done.update(job.targets)
            tally.erase_completed += 1
            continue
        if report.state == "complete":
            # A stored result names no session (content-free): what it selected is judged in
            # the store, by its forgotten records (judge_store).
            done.update(job.targets)
            tally.forget_completed += 1
            continue
        if report.state in ("failed", "not_found"):
            if report.state == "failed":
                name = (report.error or "?").split(":", 1)[0]
                tally.failures_seen[name] = tally.failures_seen.get(name, 0) + 1
                tally.failure_examples.setdefault(name, report.error or "")
                if name not in TRANSIENT_ERRORS | also_transient and not _disk_full(report.error or ""):
                    tally.violations.append(f"{job.kind} {job.request} failed unexpectedly: {report.error}")
                job.attempt += 1
            try:  # each send is a job of its own (a random id): the retry runs, whatever came before
                if job.erase:
                    enq = await client.enqueue_erase(job.request, queue=queue, queue_anyway=True)
                else:
                    enq = await client.enqueue(forget.OP.contract.name, job.request, queue=queue)
            except (RedisError, OSError):
                still.append(job)
                continue
            job.job_id = enq.job_id
            if job.erase:
                tally.erase_reenqueued += 1
            else:
                tally.forget_reenqueued += 1
        still.append(job)
    return still


@dataclass
class Run:
    """One campaign's parts and what it has seen so far."""

    rng: random.Random
    tally: Tally
    redis: PrivateRedis
    world: World
    daemon: Daemon
    settings: Any
    queue: str
    seconds: float
    forget_rate: float
    erase_rate: float
    pending: list[Pending] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    obs: Observed = field(default_factory=Observed)
    poisoned: list[bytes] = field(default_factory=list)  # planted queue members not yet gone
    flush_next: bool = False  # a fence stepped ahead: lose it with a Redis restart next round
    reported: int = 0  # violations already printed (--verbose)
    root: Path = Path(".")  # the work directory (outside sessions_root and the state directory)
    config: Path = Path("memoryd.toml")
    tmpfs: Tmpfs | None = None  # the state directory's tmpfs (--tmpfs-mb, as root)
    full_left: int = 0  # rounds the tmpfs stays full
    needs_ready: bool = False  # the daemon was started in the last round
    swapped: bool = False  # a session file was swapped this round: look for planted text
    last_fault: str = ""  # this round's fault (--verbose)

    async def round(self, client: Any, r: int, verbose: bool) -> None:
        self.tally.rounds += 1
        self.swapped = False
        if self.needs_ready:
            self.needs_ready = False
            if self.rng.random() < READY_WAIT_RATE:
                await self.daemon.wait_ready(READY_WAIT_S)
        if self.full_left:
            self.tally.disk_full_rounds += 1
            self.full_left -= 1
            if not self.full_left and self.tmpfs is not None:
                self.tmpfs.free()  # space returns
        for sid in self.rng.sample(VICTIMS + KEEPERS, self.rng.randint(1, 3)):
            self.world.append(sid, self.rng.randint(1, 2))
            self.tally.appends += 1
        await self.enqueue_requests(client)
        # Right after an enqueue, half the time: aim the fault at the forget in flight.
        aim = bool(self.pending) and self.rng.random() < 0.5
        if aim and await _wait_running(client, self.pending, timeout_s=max(self.seconds, 2.0)):
            await asyncio.sleep(self.rng.uniform(0.0, 0.08))
        else:
            await asyncio.sleep(self.rng.uniform(0.1, self.seconds))
        await self.inject_fault(client)
        self.restart_if_exited(f"round {r}")
        self.pending = await poll_pending(
            client, self.pending, self.done, self.tally, self.queue, also_transient=self.explained()
        )
        await self.check_poisoned(client, final=False)
        self.note_loop_restarts()
        await check_invariants(
            self.settings,
            self.done,
            KEEPERS,
            self.obs,
            self.tally,
            f"round {r}",
            False,
            self.world,
            self.swapped,
            disk_full=self.full_left > 0,
        )
        if verbose:
            t = self.tally
            for v in t.violations[self.reported :]:
                print(f"round {r}: VIOLATION {v}", flush=True)
            self.reported = len(t.violations)
            print(
                f"round {r} ({self.last_fault}): kills={t.kills} redis={t.redis_restarts} pending={len(self.pending)} "
                f"done={sorted(self.done)} violations={len(t.violations)}",
                flush=True,
            )

    async def enqueue_requests(self, client: Any) -> None:
        from memoryd.errors import MemorydError
        from memoryd.ops import forget

        if self.rng.random() < self.forget_rate:
            request, targets = self.world.random_request()
            try:
                enq = await client.enqueue(forget.OP.contract.name, request, queue=self.queue)
                self.pending.append(Pending(request, targets, enq.job_id))
                self.tally.forget_enqueued += 1
            except (RedisError, OSError, MemorydError):
                pass  # Redis is restarting: the request was never accepted
        if self.rng.random() < self.erase_rate:
            request, targets = self.world.random_erase()
            try:
                enq = await client.enqueue_erase(request, queue=self.queue, queue_anyway=True)
                self.pending.append(Pending(request, targets, enq.job_id, erase=True))
                self.tally.erase_enqueued += 1
            except (RedisError, OSError, MemorydError):
                pass

    async def inject_fault(self, client: Any) -> None:
        """SIGKILL the daemon (40%), restart Redis (18%), both (4%), plant a poisoned job (8%),
        SIGSTOP the daemon past its lease at a random point (4%), step the fence ahead (3%), swap
        a session file for something hostile (8%), SIGSTOP the daemon past its lease right
        before a file write (6%), fill the state directory's tmpfs (3%, with --tmpfs-mb), or
        nothing."""
        fault = self.rng.random()
        if self.flush_next:
            self.flush_next = False
            fault = 0.5  # the Redis restart that loses the stepped fence counter
        self.last_fault = _fault_name(fault, self.tmpfs is not None and not self.full_left)
        if fault < 0.62 and await _forget_running(client, self.pending):
            self.tally.faults_mid_forget += 1
        if 0.62 <= fault < 0.70:
            await self.plant_poisoned(client)
        elif 0.70 <= fault < 0.74:
            await self.stop_past_lease(client)
        elif 0.74 <= fault < 0.77:
            await self.step_fence_ahead(client)
        elif 0.77 <= fault < 0.85:
            await self.swap_session_file(client)
        elif 0.85 <= fault < 0.91:
            await self.stop_at_write(client)
        elif 0.91 <= fault < 0.94 and self.tmpfs is not None and not self.full_left:
            await self.fill_disk()
        if fault < 0.40:
            self.restart_daemon()
        elif fault < 0.58:
            self.redis.restart()
            self.tally.redis_restarts += 1
        elif fault < 0.62:
            self.daemon.kill()
            self.tally.kills += 1
            self.redis.restart()
            self.tally.redis_restarts += 1
            self.restart_daemon()

    def restart_daemon(self, env: dict[str, str] | None = None) -> None:
        """SIGKILL (if it runs) and start again."""
        if self.daemon.exited() is None:
            self.daemon.kill()
            self.tally.kills += 1
        self.daemon.start(env)
        self.needs_ready = True

    async def swap_session_file(self, client: Any) -> None:
        """Replace a transcript, sessions.json, the sessions/ directory or the agent directory by
        a FIFO, a symlink to a FIFO, a symlink out of sessions_root (to a planted copy), a
        symlink loop or /dev/zero; meanwhile a forget must complete and, for a transcript,
        another session's new message must be staged; then put the original back."""
        from memoryd.errors import MemorydError
        from memoryd.ops import forget

        target = self.rng.choice(TARGETS)
        replacement = self.rng.choice(REPLACEMENTS)
        swapped_sid = self.rng.choice(VICTIMS + KEEPERS)
        path = target_path(self.world.sessions_root, AGENT, target, swapped_sid)
        n = sum(self.tally.swaps.values())
        swap = Swap.make(path, replacement, self.root, n)
        kind = f"{target}/{replacement}"
        self.tally.swaps[kind] = self.tally.swaps.get(kind, 0) + 1
        self.swapped = True
        try:
            victim = self.rng.choice(VICTIMS)
            request = {"agent": AGENT, "sessions": [victim]}
            try:
                enq = await client.enqueue(forget.OP.contract.name, request, queue=self.queue)
            except (RedisError, OSError, MemorydError):
                return
            job = Pending(request, frozenset({victim}), enq.job_id)
            self.pending.append(job)
            self.tally.forget_enqueued += 1
            keeper_text = None
            if target == "transcript":
                other = self.rng.choice([k for k in KEEPERS if k != swapped_sid])
                self.world.append(other, 1)
                self.tally.appends += 1
                keeper_text = self.world.written[other][-1]
            ended, staged = await self._await_swap(client, job, keeper_text, target == "agent_dir")
            if not ended:
                self.tally.violations.append(
                    f"swap {kind}: a forget enqueued meanwhile did not end within {SWAP_WAIT_S:.0f}s (blocked?)"
                )
            if keeper_text is not None and staged:
                self.tally.swap_ingests += 1
            elif keeper_text is not None:
                self.tally.violations.append(
                    f"swap {kind}: another session's new message was not staged within {SWAP_WAIT_S:.0f}s"
                )
        finally:
            swap.restore()
        # Put back, the agent's files read again: the forget (re-enqueued if it failed) completes,
        # unless the disk is full too (then it completes once space returns: the drain checks).
        agent_dir = target == "agent_dir"
        if job in self.pending and not self.full_left and not await self._await_done(client, job, agent_dir):
            self.tally.violations.append(
                f"swap {kind}: its forget did not complete within {SWAP_WAIT_S:.0f}s after"
            )

    async def _await_swap(
        self, client: Any, job: Pending, keeper_text: str | None, agent_dir: bool
    ) -> tuple[bool, bool]:
        """(the forget's run ended, the other session's message was staged) within SWAP_WAIT_S.
        A forget whose selection needs the agent's session listing cannot run while the listing
        is not a regular file: it fails in one line naming the file (UnsafeFile), which counts
        as ending, not blocking; it must complete once the file is back."""
        deadline = time.monotonic() + SWAP_WAIT_S
        ended, staged = False, keeper_text is None
        tries = job.attempt
        while time.monotonic() < deadline and not (ended and staged):
            self.pending = await poll_pending(
                client,
                self.pending,
                self.done,
                self.tally,
                self.queue,
                also_transient=(AGENT_DIR_SWAP_ERRORS if agent_dir else SWAP_ERRORS) | self.explained(),
            )
            self.restart_if_exited("swap")
            if job not in self.pending:
                self.tally.swap_forgets += 1
                ended = True
            ended = ended or job.attempt > tries
            staged = staged or (keeper_text is not None and keeper_text in _corpus_text(self.settings))
            await asyncio.sleep(0.2)
        return ended, staged

    async def _await_done(self, client: Any, job: Pending, agent_dir: bool) -> bool:
        """Until `job` completes (SWAP_WAIT_S at most). After an agent directory is put back, a
        daemon started while it was away finds the agent within a few heartbeats: until then
        its jobs are refused as not served."""
        deadline = time.monotonic() + SWAP_WAIT_S
        transient = frozenset({"AgentNotServed"}) if agent_dir else frozenset()
        transient |= self.explained()
        while time.monotonic() < deadline:
            self.pending = await poll_pending(
                client, self.pending, self.done, self.tally, self.queue, also_transient=transient
            )
            self.restart_if_exited("swap")
            if job not in self.pending:
                return True
            await asyncio.sleep(0.2)
        return False

    async def stop_at_write(self, client: Any) -> None:
        """Restart the daemon with a failpoint that SIGSTOPs it right before one kind of file
        write; once it stopped there, hold it past its lease while this runner forgets under the
        lock, then SIGCONT: the write must be refused or undone (the invariants check it)."""
        from memoryd.errors import MemorydError
        from memoryd.failpoints import STOP_ENV_VAR, TRACE_ENV_VAR

        what = self.rng.choice(sorted(WRITE_STEPS))
        step = WRITE_STEPS[what]
        trace = self.root / "failpoint-trace"
        self.restart_daemon({STOP_ENV_VAR: step, TRACE_ENV_VAR: str(trace)})
        if what == "erasure journal key":  # an erasure to run up to its journal
            request, targets = self.world.random_erase()
            try:
                enq = await client.enqueue_erase(request, queue=self.queue, queue_anyway=True)
                self.pending.append(Pending(request, targets, enq.job_id, erase=True))
                self.tally.erase_enqueued += 1
            except (RedisError, OSError, MemorydError):
                pass
        if not await _stopped_at(self.daemon, trace, step, WRITE_STOP_WAIT_S):
            self.tally.write_stops_missed += 1
            self.restart_daemon()  # unarmed: it must not stop by itself later
            return
        self.daemon.stopped = True
        self.tally.write_stops[what] = self.tally.write_stops.get(what, 0) + 1
        await self.forget_while_stopped()

    async def fill_disk(self) -> None:
        """Fill the state directory's tmpfs for one to three rounds; a CLI forget meanwhile ends
        complete or with one line (no traceback)."""
        assert self.tmpfs is not None
        self.tmpfs.fill()
        self.full_left = self.rng.randint(1, 3)
        self.tally.disk_fills += 1
        victim = self.rng.choice(VICTIMS)
        cli = await asyncio.create_subprocess_exec(
            sys.executable,
            *(
                "-m",
                "memoryd.cli",
                "--config",
                str(self.config),
                "forget",
                "--agent",
                AGENT,
                "--session",
                victim,
            ),
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.daemon.helpers.add(cli.pid)
        try:
            _out, err_bytes = await asyncio.wait_for(cli.communicate(), 120)
        finally:
            self.daemon.helpers.discard(cli.pid)
            self.daemon.killed.append((cli.pid, time.monotonic()))  # its lease may outlive it a little
        code = -1 if cli.returncode is None else cli.returncode
        done = subprocess.CompletedProcess(
            ["memoryd", "forget"], code, "", err_bytes.decode(errors="replace")
        )
        self.tally.disk_full_cli += 1
        if done.returncode == 0:
            self.done.add(victim)
            return
        lines = done.stderr.strip().splitlines()
        if len(lines) != 1 or "Traceback" in done.stderr:
            self.tally.violations.append(
                f"CLI forget on a full disk exited {done.returncode} with {len(lines)} lines: {done.stderr[-300:]!r}"
            )

    async def plant_poisoned(self, client: Any) -> None:
        member, record, score = poisoned_job(self.rng, self.tally.poisoned)
        try:
            async with client.redis.pipeline(transaction=True) as pipe:
                pipe.set(b"arq:job:" + member, record)
                pipe.zadd(self.queue, {member: score})
                await pipe.execute()
        except (RedisError, OSError):
            return
        self.poisoned.append(member)
        self.tally.poisoned += 1

    async def check_poisoned(self, client: Any, final: bool) -> None:
        """A poisoned member leaves the queue at the next poll; one still there at the end, or
        after its round, is a job that did not fail alone."""
        left: list[bytes] = []
        for member in self.poisoned:
            try:
                queued = await client.redis.zscore(self.queue, member) is not None
            except (RedisError, OSError):
                left.append(member)
                continue
            if not queued:
                self.tally.poisoned_failed += 1
            elif final:
                self.tally.violations.append(f"poisoned job {member!r} is still queued")
            else:
                left.append(member)
        self.poisoned = left

    async def stop_past_lease(self, client: Any) -> None:
        """SIGSTOP the daemon (mid-job, when one runs) until its lease expired; meanwhile this
        runner forgets a random selection under the lock; then SIGCONT. Whatever the daemon
        writes when it resumes must be fenced off or undone: the invariants check it."""

        self.daemon.pause()
        self.tally.stops += 1
        await self.forget_while_stopped()

    async def forget_while_stopped(self) -> None:
        """With the daemon stopped: past its lease, forget a random selection under the lock it
        lost; then SIGCONT."""
        from memoryd.ops import forget
        from memoryd.ops.execute import LocalResources, execute

        request, targets = self.world.random_request()
        resources = LocalResources(self.settings)
        try:
            await asyncio.sleep(LOCK_TTL_MS / 1000 * 0.5)
            report = await execute(forget.OP, resources, forget.OP.contract.parse(request))
            selected = set(getattr(report, "sessionIds", None) or [])
            if selected and selected != set(targets):
                self.tally.violations.append(f"forget {request} selected {sorted(selected)}")
            self.done.update(targets)
            self.tally.stop_forgets += 1
        except Exception as exc:  # judged below: one of memoryd's transient errors, or a full disk
            name = type(exc).__name__
            self.tally.failures_seen[name] = self.tally.failures_seen.get(name, 0) + 1
            if name not in TRANSIENT_ERRORS and not _disk_full(str(exc)):
                self.tally.violations.append(f"forget {request} under SIGSTOP failed: {name}: {exc}")
        finally:
            await resources.close()
            self.daemon.resume()

    async def step_fence_ahead(self, client: Any) -> None:
        """The token a clock an hour fast hands out; the next round's Redis restart loses it."""
        from memoryd.constants import FENCE_KEY
        from memoryd.lock import workspace_key

        key = FENCE_KEY.format(workspace=workspace_key(self.settings.workspace_for(AGENT)))
        try:
            await client.redis.set(key, int((time.time() + 3600) * 1_000_000))
        except (RedisError, OSError):
            return
        self.tally.fence_steps += 1
        self.flush_next = True

    def explained(self) -> frozenset[str]:
        """Refusals the daemon's own log explains: an agent whose store could not be opened (a
        full disk) is not served until it can be, and says so in one line."""
        said = self.daemon.said(STORE_WAIT_MARK, lately=True)
        return frozenset({"AgentNotServed"}) if said else frozenset()

    def note_loop_restarts(self) -> None:
        """Each background loop the daemon had to start again is a violation (with its line)."""
        for line in self.daemon.take_loop_restarts():
            self.tally.violations.append(f"the daemon started a loop again: {line}")

    def restart_if_exited(self, where: str) -> None:
        code = self.daemon.exited()
        if code is None:
            return
        if self.daemon.refused_start():
            self.tally.refused_starts += 1  # started while its Redis restarted
        elif (
            self.full_left or self.daemon.started_on_full_disk
        ) and self.daemon.refused_start_on_full_disk():
            self.tally.full_disk_refusals += 1
        else:
            self.tally.violations.append(
                f"{where}: the daemon exited by itself with {code}: {self.daemon.exit_cause()}"
            )
        self.daemon.start()
        self.needs_ready = True

    async def drain(self, client: Any) -> None:
        """Every forget completes, and every keeper message is staged; then two more scheduled
        sweeps, after which nothing may have come back."""
        if self.tmpfs is not None and self.full_left:
            self.tmpfs.free()  # space returns before the drain
            self.full_left = 0
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline:
            self.pending = await poll_pending(
                client, self.pending, self.done, self.tally, self.queue, also_transient=self.explained()
            )
            self.restart_if_exited("drain")
            staged_all = await _keepers_staged(self.settings, self.world)
            waiting = await _receipts_waiting(self.settings, self.tally.waiting_receipts)
            if not self.pending and staged_all and not waiting:
                break
            await asyncio.sleep(0.5)
        for job in self.pending:
            self.tally.violations.append(f"{job.kind} {job.request} did not complete within the drain")
        for receipt_id in await _receipts_waiting(self.settings, self.tally.waiting_receipts):
            self.tally.violations.append(f"erase receipt {receipt_id} not verified by the end of the drain")
        await self.check_poisoned(client, final=True)
        self.note_loop_restarts()
        await asyncio.sleep(2.5)
        await check_invariants(
            self.settings, self.done, KEEPERS, self.obs, self.tally, "final", True, self.world
        )
        self.tally.promoted_watched = len(self.obs.promoted)
        self.tally.embeddings_watched = sum(len(self.obs.chunk_hashes.get(s, ())) for s in self.done)


async def campaign(
    rounds: int,
    seconds: float,
    seed: int,
    root: Path,
    verbose: bool = False,
    job_timeout_s: float = JOB_TIMEOUT_S,
    forget_rate: float = 0.35,
    erase_rate: float = 0.15,
    tmpfs: Tmpfs | None = None,
) -> Tally:
    from memoryd.constants import LOCK_KEY
    from memoryd.lock import workspace_key
    from memoryd.runtime.client import MemorydClient
    from memoryd.runtime.wire import queue_name
    from memoryd.settings import load_settings

    rng = random.Random(seed)
    tally = Tally()
    redis = PrivateRedis(root / "redis").start()
    world = World(root, rng)
    config = root / "memoryd.toml"
    write_config(config, root / "state", world.sessions_root, redis.url, job_timeout_s)
    settings = load_settings(config)
    daemon = Daemon(config, root / "daemon.log")
    if tmpfs is not None:
        daemon.disk_full = tmpfs.ballast.exists
    daemon.start()
    run = Run(rng, tally, redis, world, daemon, settings, queue_name(HOST), seconds, forget_rate, erase_rate)
    run.root, run.config, run.tmpfs, run.needs_ready = root, config, tmpfs, True
    lock_key = LOCK_KEY.format(workspace=workspace_key(settings.workspace_for(AGENT)))
    watch = LockWatch(redis.url, lock_key, daemon, tally)
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch.run(stop))
    try:
        async with MemorydClient.connect(settings, poll_delay_s=0.05) as client:
            for r in range(rounds):
                await run.round(client, r, verbose)
            await run.drain(client)
    finally:
        # The children first: on SIGTERM asyncio.run has cancelled the watcher too, and awaiting
        # it raises at once.
        stop.set()
        daemon.stop()
        redis.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        tally.lock_samples = watch.samples
    return tally


def _disk_full(error: str) -> bool:
    """A store or file write refused because the disk is full (the tmpfs fault): the job fails in
    one line and a rerun converges once space returns."""
    return any(
        said in error
        for said in ("No space left on device", "database or disk is full", "its filesystem is full")
    )


def _fault_name(fault: float, can_fill: bool) -> str:
    bands = (
        (0.40, "kill"),
        (0.58, "redis restart"),
        (0.62, "kill + redis restart"),
        (0.70, "poisoned job"),
        (0.74, "stop past lease"),
        (0.77, "fence step"),
        (0.85, "file swap"),
        (0.91, "stop before a write"),
        (0.94, "disk fill" if can_fill else "none"),
    )
    return next((name for bound, name in bands if fault < bound), "none")


async def _wait_running(client: Any, pending: list[Pending], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await _forget_running(client, pending):
            return True
        await asyncio.sleep(0.01)
    return False


async def _forget_running(client: Any, pending: list[Pending]) -> bool:
    for job in pending:
        try:
            if (await client.job(job.job_id)).state == "running":
                return True
        except (RedisError, OSError):
            return False
    return False


def _corpus_text(settings: Any) -> str:
    from memoryd.agents import agent_paths

    text = ""
    for p in sorted(agent_paths(settings, AGENT).corpus_dir.glob("*.txt")):
        try:
            text += p.read_text(errors="replace")
        except FileNotFoundError:
            continue
    return text


async def _stopped_at(daemon: Daemon, trace: Path, step: str, timeout_s: float) -> bool:
    """Did the daemon reach `step` (its trace line) and stop itself there within `timeout_s`?"""
    line = f"{step} {daemon.pid}\n"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and daemon.exited() is None:
        try:
            reached = line in trace.read_text()
        except FileNotFoundError:
            reached = False
        if reached and _process_state(daemon.pid) == "T":
            return True
        await asyncio.sleep(0.05)
    return False


def _process_state(pid: int | None) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "?"
    return stat.rsplit(")", 1)[1].split()[0]


async def _receipts_waiting(settings: Any, receipt_ids: list[str]) -> list[str]:
    """The receipts among `receipt_ids` that are not verified (yet), as the retention store says."""
    if not receipt_ids:
        return []
    from memoryd.retention.api import list_receipts

    verified = {r.receipt_id for r in (await list_receipts(settings)).receipts if r.verified}
    return [r for r in receipt_ids if r not in verified]


async def _keepers_staged(settings: Any, world: World) -> bool:
    from memoryd.agents import agent_paths

    corpus = agent_paths(settings, AGENT).corpus_dir
    try:
        text = "".join(p.read_text(errors="replace") for p in corpus.glob("*.txt"))
    except FileNotFoundError:
        return False
    return all(t in text for sid in KEEPERS for t in world.written[sid])


# Records that made arq's run_job or start_jobs raise and end the worker (issue 18, item 1).
_GOOD_RECORD = b'{"f":"ingest_sweep","a":[{"agent":"chaos"}],"k":{},"t":null,"et":1}'
POISONED_RECORDS = (
    b'{"f":{},"a":[{"agent":"chaos"}],"k":{},"t":null,"et":1}',
    b'{"f":"ingest_sweep","a":[{"agent":"chaos"}],"k":{},"t":"5","et":1}',
    b'{"f":"ingest_sweep","a":[{"agent":"chaos"}],"k":{},"t":null,"et":null}',
    b'{"f":"ingest_sweep","a":[{"agent":"chaos"}],"k":{},"t":null,"et":"x"}',
    b'{"f":"ingest_sweep","a":[{"agent":"chaos"}],"k":{},"t":null,"et":1e30}',
    b"\xff\x00 not json",
)


def poisoned_job(rng: random.Random, n: int) -> tuple[bytes, bytes, float]:
    """(queue member, job record, score) of a poisoned job: a broken record, a good record
    scored -inf, or a good record under a member that is not UTF-8."""
    now_ms = time.time() * 1000
    kind = rng.randrange(len(POISONED_RECORDS) + 2)
    if kind < len(POISONED_RECORDS):
        return f"ingest_sweep:poison-{n}".encode(), POISONED_RECORDS[kind], now_ms
    if kind == len(POISONED_RECORDS):
        return f"ingest_sweep:poison-{n}".encode(), _GOOD_RECORD, float("-inf")
    return b"ingest_sweep:poison-\xff\xfe" + str(n).encode(), _GOOD_RECORD, now_ms


def format_table(t: Tally, elapsed_s: float) -> str:
    rows = [
        ("rounds", t.rounds),
        ("daemon kills (SIGKILL)", t.kills),
        ("Redis restarts (nosave)", t.redis_restarts),
        ("starts refused while Redis restarted", t.refused_starts),
        ("poisoned jobs planted", t.poisoned),
        ("poisoned jobs failed alone (left the queue)", t.poisoned_failed),
        ("SIGSTOPs past the lease", t.stops),
        ("forgets completed while the daemon was stopped", t.stop_forgets),
        ("fence steps an hour ahead (then Redis restarted)", t.fence_steps),
        ("session files swapped (FIFO, symlink, loop, /dev/zero)", sum(t.swaps.values())),
        ("forgets completed during a swap", t.swap_forgets),
        ("other sessions' messages staged during a swap", t.swap_ingests),
        ("scans for text planted outside sessions_root", t.planted_checks),
        ("SIGSTOPs past the lease right before a file write", sum(t.write_stops.values())),
        ("armed write stops not reached (restarted unarmed)", t.write_stops_missed),
        ("disk fills of the tmpfs state directory", t.disk_fills),
        ("rounds with the disk full", t.disk_full_rounds),
        ("CLI forgets on the full disk (done, or one line)", t.disk_full_cli),
        ("starts refused in one line on the full disk", t.full_disk_refusals),
        ("store checks skipped on the full disk", t.store_checks_skipped),
        ("corpus lines checked for orphans and duplicates", t.corpus_lines_checked),
        ("transcript appends", t.appends),
        ("forget jobs enqueued", t.forget_enqueued),
        ("faults during a running forget or erase", t.faults_mid_forget),
        ("forget jobs re-enqueued", t.forget_reenqueued),
        ("forget jobs completed", t.forget_completed),
        ("erase jobs enqueued", t.erase_enqueued),
        ("erase jobs re-enqueued", t.erase_reenqueued),
        ("erase jobs completed (receipt complete)", t.erase_completed),
        ("sessions erased by receipts", t.erased_sessions),
        ("erase receipts that waited for queued purges (then verified)", len(t.waiting_receipts)),
        ("lock holder samples", t.lock_samples),
        ("promoted entries watched", t.promoted_watched),
        ("embeddings of forgotten sessions watched", t.embeddings_watched),
        ("invariant checks", t.checks),
        ("violations", len(t.violations)),
        ("wall time (s)", f"{elapsed_s:.0f}"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"| {'measure'.ljust(width)} | value |", f"|{'-' * (width + 2)}|-------|"]
    lines += [f"| {k.ljust(width)} | {v} |" for k, v in rows]
    return "\n".join(lines)


def print_report(tally: Tally, elapsed_s: float) -> None:
    print(format_table(tally, elapsed_s))
    if tally.failures_seen:
        print(
            "forget/erase runs that failed and were re-enqueued: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(tally.failures_seen.items()))
        )
    if tally.swaps:
        print("swaps: " + ", ".join(f"{k} x{v}" for k, v in sorted(tally.swaps.items())))
    if tally.write_stops:
        print("stops before a write: " + ", ".join(f"{k} x{v}" for k, v in sorted(tally.write_stops.items())))
    for name, example in sorted(tally.failure_examples.items()):
        print(f"  first {name}: {example[:300]}")
    for v in tally.violations[:50]:
        print(f"VIOLATION {v}")


def _tmpfs(state_dir: Path, size_mb: int) -> Tmpfs | None:
    if size_mb <= 0:
        return None
    refusal = Tmpfs.refusal()
    if refusal:
        print(f"tools.chaos: {refusal}", file=sys.stderr)
        return None
    return Tmpfs(state_dir, size_mb)


def _exit_on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.chaos", description="memoryd fault campaign")
    ap.add_argument("--rounds", type=int, default=200, help="fault rounds (default 200)")
    ap.add_argument("--seconds", type=float, default=1.0, help="longest pause before a round's fault")
    ap.add_argument("--seed", type=int, default=1, help="random seed (a run is reproducible up to timing)")
    ap.add_argument(
        "--job-timeout",
        type=float,
        default=JOB_TIMEOUT_S,
        help="daemon.job_timeout_s; a killed job runs again after it plus 10 s",
    )
    ap.add_argument("--forget-rate", type=float, default=0.35, help="chance a round enqueues a forget")
    ap.add_argument(
        "--erase-rate", type=float, default=0.15, help="chance a round enqueues a user-scope erase"
    )
    ap.add_argument(
        "--tmpfs-mb",
        type=int,
        default=0,
        help="put the state directory on a tmpfs of this size (root only) and fill it now and then",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, state) afterwards")
    ap.add_argument("--verbose", action="store_true", help="one line per round")
    a = ap.parse_args(argv)
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        print("tools.chaos: redis-server and redis-cli must be installed", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="memoryd-chaos-"))
    started = time.monotonic()
    tmpfs = _tmpfs(root / "state", a.tmpfs_mb)
    # SIGTERM and SIGHUP end the run through the finally below (unmount, stop the children).
    previous = {signum: signal.signal(signum, _exit_on_signal) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if tmpfs is not None:
            tmpfs.mount()
        tally = asyncio.run(
            campaign(
                a.rounds,
                a.seconds,
                a.seed,
                root,
                a.verbose,
                a.job_timeout,
                a.forget_rate,
                a.erase_rate,
                tmpfs,
            )
        )
    finally:
        if tmpfs is not None:
            if a.keep and tmpfs.mounted:
                shutil.copytree(root / "state", root / "state-kept", symlinks=True, dirs_exist_ok=True)
            tmpfs.unmount()
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print_report(tally, time.monotonic() - started)
    if a.keep:
        print(f"work directory: {root}")
    return 1 if tally.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
