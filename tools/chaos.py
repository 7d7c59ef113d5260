"""The fault campaign: `python -m tools.chaos --rounds N --seconds S [--seed X]`.

Runs `memoryd run` as a subprocess against a Redis server this runner starts itself (a child
`redis-server` on a free loopback port, no persistence) and a generated session store, while a
driver keeps appending to transcripts and enqueues forget jobs (sessions, participants, hook
sources) and erase jobs (the user scope `tenant:<t>:user:<u>` of a participant) through
daemon.runtime.client. At random points it kills the daemon with SIGKILL and starts it
again, and restarts its Redis (`redis-cli -p P shutdown nosave`, then starts it again). It also
plants poisoned jobs (records arq's decoding trips over, members scored -inf or not UTF-8),
SIGSTOPs the daemon past its lease while this runner forgets sessions under the lock the
stopped daemon lost, and steps the fence ahead as a clock running an hour fast would, before a
Redis restart loses the counter. After every round it checks the invariants against a model of
the expected state:

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
* every poisoned job leaves the queue (failed alone) unless a Redis restart lost it first.

Bounded in count (rounds), time (seconds per round, a bounded final drain) and space (tmp dir).
Only the Redis server started here is ever restarted or shut down.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

REPO = Path(__file__).resolve().parent.parent
AGENT = "chaos"
HOST = "chaos-host"
LOCK_TTL_MS = 3000
JOB_TIMEOUT_S = 8  # arq re-runs a killed job once its in-progress key (timeout + 10 s) expires
DRAIN_S = 90.0  # bound of the final drain
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

    def start(self) -> None:
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("NOTIFY_SOCKET", None)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "daemon.cli", "--config", str(self.config), "run"],
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

    def refused_start(self) -> bool:
        """Did the last run exit 1 refusing to start because Redis was down (as designed; systemd's
        Restart=on-failure starts it again)? Anything else is a crash."""
        with self.log_path.open("rb") as fh:
            fh.seek(self.log_offset)
            tail = fh.read().decode(errors="replace")
        return self.exited() == 1 and "memoryd: error: redis_url" in tail and "Traceback" not in tail

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
        from daemon.ops import erase, forget

        return (erase.OP if self.erase else forget.OP).name


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


def _count(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> int:
    return int(conn.execute(sql, params).fetchone()[0])


def _rows_of_forgotten_sessions(conn: Any, done: list[str]) -> list[str]:
    if not done:
        return []
    leaks: list[str] = []
    marks = ",".join("?" * len(done))
    for table, col in (
        ("memory_entry_origins", "session_id"),
        ("memory_index_chunks", "session_id"),
        ("memory_index_sources", "session_id"),
        ("curated_writes", "session_id"),
    ):
        n = _count(conn, f"SELECT count(*) FROM {table} WHERE {col} IN ({marks})", tuple(done))
        if n:
            leaks.append(f"{table}: {n} rows of forgotten sessions")
    n = _count(
        conn,
        f"SELECT count(*) FROM ingest_seen_hashes WHERE scope IN ({marks})",
        tuple(f"{AGENT}:{s}" for s in done),
    )
    if n:
        leaks.append(f"ingest_seen_hashes: {n} rows of forgotten sessions")
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
    from daemon.store.tombstones import forgotten_ids

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
            "SELECT count(*) FROM memory_entry_origins WHERE session_id = ? AND entry_key LIKE 'memory:claim:%' "
            "AND entry_key NOT IN "
            f"(SELECT entry_key FROM memory_entry_origins WHERE session_id NOT IN ({','.join('?' * len(watch))}))",
            (sid, *watch),
        )
    marks_w = ",".join("?" * len(watch))
    facts["keeper_claims"] = {
        k
        for (k,) in conn.execute(
            "SELECT DISTINCT entry_key FROM memory_entry_origins WHERE entry_key LIKE 'memory:claim:%' AND entry_key "
            f"NOT IN (SELECT entry_key FROM memory_entry_origins WHERE session_id NOT IN ({marks_w}))",
            tuple(watch),
        )
    }
    facts["cache"] = {h for (h,) in conn.execute("SELECT hash FROM memory_embedding_cache")}
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
    from daemon.agents import agent_paths
    from daemon.store.db import Store

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


def judge_store(facts: dict[str, Any], done: set[str], obs: Observed, memory_md: str) -> list[str]:
    """The store's leaks, lost records and collateral losses; updates what was observed."""
    from daemon.forget.scrub import promotion_keys_on_lines

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


def judge_corpus(scan: WorkspaceScan, obs: Observed, world: World, final: bool) -> list[str]:
    """No keeper loses corpus lines; at the end, every keeper message is staged."""
    found: list[str] = []
    for sid in KEEPERS:
        if scan.corpus_lines[sid] < obs.corpus.get(sid, 0):
            found.append(
                f"collateral loss: corpus lines of {sid} {obs.corpus[sid]} -> {scan.corpus_lines[sid]}"
            )
        obs.corpus[sid] = max(obs.corpus.get(sid, 0), scan.corpus_lines[sid])
    if final:
        for sid in KEEPERS:
            absent = [t for t in world.written[sid] if t not in scan.corpus_text]
            if absent:
                found.append(f"expected state: {len(absent)} messages of {sid} never staged")
    return found


async def check_invariants(
    settings: Any,
    done: set[str],
    watch: list[str],
    obs: Observed,
    tally: Tally,
    label: str,
    final: bool,
    world: World,
) -> None:
    from daemon.agents import agent_paths

    scan = scan_workspace(agent_paths(settings, AGENT).workspace, done)
    found = list(scan.found)
    tally.checks += 1
    facts = await read_store_facts(settings, done, watch)
    if facts is not None:
        found += judge_store(facts, done, obs, scan.memory_md)
    found += judge_corpus(scan, obs, world, final)
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
        if pid in (self.daemon.pid, os.getpid()):  # os.getpid(): this runner's forgets (SIGSTOP fault)
            return
        now = time.monotonic()
        grace = LOCK_TTL_MS / 1000 + 1.0  # the lease's TTL, plus a sampling margin
        if any(p == pid and now - when <= grace for p, when in self.daemon.killed):
            return
        self.tally.violations.append(
            f"lock held by {holder!r}, which is neither the daemon nor a fresh corpse"
        )


def _judge_erase(job: Pending, result: dict[str, Any], tally: Tally) -> None:
    """No hold exists, so the receipt must be complete and verified, and have erased (this time,
    or already by an earlier forget) nothing but its user's sessions."""
    if result.get("state") != "complete":
        tally.violations.append(f"erase {job.request} ended {result.get('state')!r} with no hold placed")
    if not result.get("verified"):
        failed = [
            (c.get("name"), c.get("locations"))
            for c in ((result.get("verification") or {}).get("checks") or [])
            if c.get("status") != "passed"
        ]
        tally.violations.append(f"erase {job.request} receipt not verified (failed checks: {failed})")
    sessions = int((result.get("artifacts") or {}).get("sessions", 0))
    if sessions > len(job.targets):
        tally.violations.append(
            f"erase {job.request} erased {sessions} sessions, its user has {len(job.targets)}"
        )
    tally.erased_sessions += sessions


async def poll_pending(
    client: Any, pending: list[Pending], done: set[str], tally: Tally, queue: str
) -> list[Pending]:
    from daemon.ops import forget

    still: list[Pending] = []
    for job in pending:
        try:
            report = await client.job(job.job_id)
        except (RedisError, OSError):
            still.append(job)
            continue
        if report.state == "complete" and job.erase:
            _judge_erase(job, report.result or {}, tally)
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
                if name not in TRANSIENT_ERRORS:
                    tally.violations.append(f"{job.kind} {job.request} failed unexpectedly: {report.error}")
                job.attempt += 1
            retry_id = f"retry-{job.attempt}" if job.attempt else None
            try:
                if job.erase:
                    enq = await client.enqueue_erase(job.request, queue=queue, request_id=retry_id)
                else:
                    enq = await client.enqueue(forget.OP.name, job.request, queue=queue, request_id=retry_id)
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

    async def round(self, client: Any, r: int, verbose: bool) -> None:
        self.tally.rounds += 1
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
        self.pending = await poll_pending(client, self.pending, self.done, self.tally, self.queue)
        await self.check_poisoned(client, final=False)
        await check_invariants(
            self.settings, self.done, KEEPERS, self.obs, self.tally, f"round {r}", False, self.world
        )
        if verbose:
            t = self.tally
            for v in t.violations[self.reported :]:
                print(f"round {r}: VIOLATION {v}", flush=True)
            self.reported = len(t.violations)
            print(
                f"round {r}: kills={t.kills} redis={t.redis_restarts} pending={len(self.pending)} "
                f"done={sorted(self.done)} violations={len(t.violations)}",
                flush=True,
            )

    async def enqueue_requests(self, client: Any) -> None:
        from daemon.errors import MemorydError
        from daemon.ops import forget

        if self.rng.random() < self.forget_rate:
            request, targets = self.world.random_request()
            try:
                enq = await client.enqueue(forget.OP.name, request, queue=self.queue)
                self.pending.append(Pending(request, targets, enq.job_id))
                self.tally.forget_enqueued += 1
            except (RedisError, OSError, MemorydError):
                pass  # Redis is restarting: the request was never accepted
        if self.rng.random() < self.erase_rate:
            request, targets = self.world.random_erase()
            try:
                enq = await client.enqueue_erase(request, queue=self.queue)
                self.pending.append(Pending(request, targets, enq.job_id, erase=True))
                self.tally.erase_enqueued += 1
            except (RedisError, OSError, MemorydError):
                pass

    async def inject_fault(self, client: Any) -> None:
        """SIGKILL the daemon (45%), restart Redis (20%), both (5%), plant a poisoned job (10%),
        SIGSTOP the daemon past its lease (5%), step the fence ahead (3%), or nothing."""
        fault = self.rng.random()
        if self.flush_next:
            self.flush_next = False
            fault = 0.5  # the Redis restart that loses the stepped fence counter
        if fault < 0.70 and await _forget_running(client, self.pending):
            self.tally.faults_mid_forget += 1
        if 0.70 <= fault < 0.80:
            await self.plant_poisoned(client)
        elif 0.80 <= fault < 0.85:
            await self.stop_past_lease(client)
        elif 0.85 <= fault < 0.88:
            await self.step_fence_ahead(client)
        if fault < 0.45:
            self.daemon.kill()
            self.tally.kills += 1
            self.daemon.start()
        elif fault < 0.65:
            self.redis.restart()
            self.tally.redis_restarts += 1
        elif fault < 0.70:
            self.daemon.kill()
            self.redis.restart()
            self.tally.kills += 1
            self.tally.redis_restarts += 1
            self.daemon.start()

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
        from daemon.errors import MemorydError
        from daemon.ops import forget
        from daemon.ops.execute import LocalResources, execute

        self.daemon.pause()
        self.tally.stops += 1
        request, targets = self.world.random_request()
        resources = LocalResources(self.settings)
        try:
            await asyncio.sleep(LOCK_TTL_MS / 1000 * 0.5)
            report = await execute(forget.OP, resources, forget.OP.parse(request))
            selected = set(getattr(report, "sessionIds", None) or [])
            if selected and selected != set(targets):
                self.tally.violations.append(f"forget {request} selected {sorted(selected)}")
            self.done.update(targets)
            self.tally.stop_forgets += 1
        except (MemorydError, RedisError, OSError) as exc:
            name = type(exc).__name__
            self.tally.failures_seen[name] = self.tally.failures_seen.get(name, 0) + 1
            if name not in TRANSIENT_ERRORS:
                self.tally.violations.append(f"forget {request} under SIGSTOP failed: {exc}")
        finally:
            await resources.close()
            self.daemon.resume()

    async def step_fence_ahead(self, client: Any) -> None:
        """The token a clock an hour fast hands out; the next round's Redis restart loses it."""
        from daemon.constants import FENCE_KEY
        from daemon.lock import workspace_key

        key = FENCE_KEY.format(workspace=workspace_key(self.settings.workspace_for(AGENT)))
        try:
            await client.redis.set(key, int((time.time() + 3600) * 1_000_000))
        except (RedisError, OSError):
            return
        self.tally.fence_steps += 1
        self.flush_next = True

    def restart_if_exited(self, where: str) -> None:
        code = self.daemon.exited()
        if code is None:
            return
        if self.daemon.refused_start():
            self.tally.refused_starts += 1  # started while its Redis restarted
        else:
            self.tally.violations.append(f"{where}: the daemon exited by itself with {code}")
        self.daemon.start()

    async def drain(self, client: Any) -> None:
        """Every forget completes, and every keeper message is staged; then two more scheduled
        sweeps, after which nothing may have come back."""
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline:
            self.pending = await poll_pending(client, self.pending, self.done, self.tally, self.queue)
            self.restart_if_exited("drain")
            staged_all = await _keepers_staged(self.settings, self.world)
            if not self.pending and staged_all:
                break
            await asyncio.sleep(0.5)
        for job in self.pending:
            self.tally.violations.append(f"{job.kind} {job.request} did not complete within the drain")
        await self.check_poisoned(client, final=True)
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
) -> Tally:
    from daemon.constants import LOCK_KEY
    from daemon.lock import workspace_key
    from daemon.runtime.client import MemorydClient
    from daemon.runtime.wire import queue_name
    from daemon.settings import load_settings

    rng = random.Random(seed)
    tally = Tally()
    redis = PrivateRedis(root / "redis").start()
    world = World(root, rng)
    config = root / "memoryd.toml"
    write_config(config, root / "state", world.sessions_root, redis.url, job_timeout_s)
    settings = load_settings(config)
    daemon = Daemon(config, root / "daemon.log")
    daemon.start()
    run = Run(rng, tally, redis, world, daemon, settings, queue_name(HOST), seconds, forget_rate, erase_rate)
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
        stop.set()
        await watcher
        tally.lock_samples = watch.samples
        daemon.stop()
        redis.stop()
    return tally


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


async def _keepers_staged(settings: Any, world: World) -> bool:
    from daemon.agents import agent_paths

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
        ("transcript appends", t.appends),
        ("forget jobs enqueued", t.forget_enqueued),
        ("faults during a running forget or erase", t.faults_mid_forget),
        ("forget jobs re-enqueued", t.forget_reenqueued),
        ("forget jobs completed", t.forget_completed),
        ("erase jobs enqueued", t.erase_enqueued),
        ("erase jobs re-enqueued", t.erase_reenqueued),
        ("erase jobs completed (receipt complete)", t.erase_completed),
        ("sessions erased by receipts", t.erased_sessions),
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
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, state) afterwards")
    ap.add_argument("--verbose", action="store_true", help="one line per round")
    a = ap.parse_args(argv)
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        print("tools.chaos: redis-server and redis-cli must be installed", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="memoryd-chaos-"))
    started = time.monotonic()
    try:
        tally = asyncio.run(
            campaign(a.rounds, a.seconds, a.seed, root, a.verbose, a.job_timeout, a.forget_rate, a.erase_rate)
        )
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(format_table(tally, time.monotonic() - started))
    if tally.failures_seen:
        print(
            "forget/erase runs that failed and were re-enqueued: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(tally.failures_seen.items()))
        )
    for name, example in sorted(tally.failure_examples.items()):
        print(f"  first {name}: {example[:300]}")
    for v in tally.violations[:50]:
        print(f"VIOLATION {v}")
    if a.keep:
        print(f"work directory: {root}")
    return 1 if tally.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
