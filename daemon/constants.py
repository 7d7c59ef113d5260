"""Every Redis key, cap and timeout in one place, each with the reason for its value."""

from __future__ import annotations

# --- Redis keys -------------------------------------------------------------------------
# All keys share one prefix so an operator can see (and ACL) memoryd's keyspace at a glance.
REDIS_PREFIX = "memoryd:"
LOCK_KEY = REDIS_PREFIX + "lock:{workspace}"  # the lease: value is the holder's random token
FENCE_KEY = REDIS_PREFIX + "fence:{workspace}"  # monotonically increasing fencing counter
AGENT_OWNER_KEY = REDIS_PREFIX + "agents"  # hash agent_id -> queue name of the owning host
QUEUE_PREFIX = REDIS_PREFIX + "queue:"  # arq queue per host: memoryd:queue:<host>

# --- Workspace lock (DESIGN §4, reference §8.1) -------------------------------------------
LOCK_TTL_MS = 30_000  # lease length; renewed at a third of it, so two renewals may fail first
LOCK_WAIT_S = 10.0  # the reference waits 10 s for the workspace lock before giving up
LOCK_RETRY_S = 0.04  # the reference polls every 40 ms

# --- Session ingestion (reference §5.2) -----------------------------------------------------
SESSION_INGESTION_SCORE = 0.58
MAX_MESSAGES_PER_SWEEP = 240
MAX_MESSAGES_PER_FILE = 80
MIN_MESSAGES_PER_FILE = 12
SNIPPET_MIN_CHARS = 12
SNIPPET_MAX_CHARS = 280
RENDERED_LINE_MAX_CHARS = 344
MAX_TRACKED_MESSAGES_PER_SESSION = 4096  # seen hashes kept per scope (older lines keep their origin)
MAX_TRACKED_SESSION_SCOPES = 2048
# glibc's mmap threshold as daemon/allocator.py sets it. 1 MiB: as low an RSS peak as glibc's
# 128 KiB default (211 vs 212 MB for 1.16M messages), without an mmap/munmap pair for every
# few-hundred-KiB block (the index sync ran ~8% slower at 128 KiB).
MMAP_THRESHOLD_BYTES = 1024 * 1024
# The size of each file read: below the threshold, because a read of the threshold itself
# allocates a buffer just over it, mapped and unmapped with its page faults for every small file
# (345 files of 7 KB: 15 ms instead of 3.5 ms).
READ_CHUNK_BYTES = MMAP_THRESHOLD_BYTES // 2
# A transcript line longer than this is skipped and counted instead of parsed: one line is
# one message, and a message this size is almost certainly a pasted blob, not memory.
MAX_TRANSCRIPT_LINE_BYTES = 4 * 1024 * 1024

# --- Forget (reference §7) --------------------------------------------------------------------
CORPUS_SNIPPET_MIN_CHARS = 12  # shorter corpus rows must never trigger broad substring deletion
TOMBSTONE_BATCH = 128

# --- Dreaming / memory files (reference §2.1, §5.6, §5.7) --------------------------------------
MEMORY_MARKDOWN_MAX_BYTES = 16 * 1024 * 1024
MAX_REWRITE_PREIMAGES = 8
PROMOTION_MARKER_PREFIX = "memoryd-promotion:"
LINEAGE_MARKER_PREFIX = "memoryd-lineage:"
# The scrubber also recognises the reference system's markers, so its workspaces read as is.
FOREIGN_PROMOTION_MARKER_PREFIX = "openclaw-memory-promotion:"
FOREIGN_LINEAGE_MARKER_PREFIX = "openclaw-memory-lineage:"

# --- Files ------------------------------------------------------------------------------------
FILE_MODE = 0o600
DIR_MODE = 0o700
# Random bytes in an atomic write's temp name (daemon/fileio.py), beside the writer's pid: two
# writes of one file in one process (threads) never share a temp, nor does a crashed earlier
# process that had the same pid.
TEMP_NONCE_BYTES = 4
# A temp file last written this long before a live process with its pid started is a leftover
# (the pid was reused): the boot time that process start times count from is read to a second.
PID_START_MARGIN_S = 2.0

# --- Retention and erasure (seed 001, DESIGN §5) -----------------------------------------------
DAY_MS = 86_400_000  # provenance times of rewritten edges are coarsened to this (seed: no sub-day time)
RETENTION_DB_NAME = "retention.sqlite"  # host-level retention state under state_dir
RETENTION_LOCK_NAME = "retention"  # WorkspaceLock path state_dir/retention serializes its writes
RETENTION_KEY_NAME = "retention.key"  # host key: keyed hashes of erased scopes (journal lookups)
ERASURE_JOURNAL_DIR = "erasure-journal"  # one key file per pending erasure, deleted at its receipt
TOMBSTONE_REF_PREFIX = "TOMBSTONE:"  # opaque provenance parent after erasure; random per edge
TOMBSTONE_REF_RANDOM_BYTES = 8  # as the seed's token_hex(8): unlinkable across edges
MEMORY_OBJECT_MAX_CHARS = 64 * 1024  # a memory-tool object is a note, not a document
SQL_IN_BATCH = 500  # ids per `IN (...)` statement (SQLite's default variable limit is 32766)
LINEAGE_MAX_DEPTH = 32  # provenance chains are followed this far (and never round a cycle)
VERIFY_ID_MIN_CHARS = 6  # shorter ids are matched only as whole column values (avoids noise hits)
VERIFY_SNIPPET_MIN_CHARS = 12  # as CORPUS_SNIPPET_MIN_CHARS: shorter text is not evidence
VERIFY_SNIPPET_MAX_CHARS = 64  # embedding probes: the head and tail of each line, at most this long
# The coverage rule (retention/pieces.py): no piece of K = VERIFY_PIECE_CHARS characters of an
# erased message, in any form memoryd writes it, survives. 16 characters are about three words:
# long enough that two unrelated texts do not share one by chance (12 characters, "the meeting ",
# often do), short enough that any quotable copy (a phrase, a name with a place) holds one. A
# message shorter than 16 characters but at least VERIFY_SNIPPET_MIN_CHARS is looked for whole.
VERIFY_PIECE_CHARS = 16
VERIFY_HASH_PREFIX_CHARS = 12  # truncated hashes count too (seed; staging keeps 12-hex sha1 claim hashes)
VERIFY_TERM_MIN_CHARS = 5  # full-text terms of erased snippets looked for in FTS5 segments
VERIFY_EMBEDDING_MIN_COSINE = 0.9999  # a stored vector this close to an erased snippet's is its embedding

# --- OpenClaw agent database as a session source (reference: openclaw-session-store.md) -------
# Transcript events are fetched this many rows at a time: one event may be 4 MiB, so a chunk is
# bounded by rows, and a snapshot without shared memory is re-validated between chunks.
OPENCLAW_EVENT_CHUNK_ROWS = 64
# A database at rest is read without shared memory (no -wal/-shm may be created) and checked
# unchanged afterwards; a read that raced a checkpoint is retried this many times in all.
OPENCLAW_READ_ATTEMPTS = 3
# Fingerprints of fewer sessions than this are read by one indexed query each (a forget of a few
# sessions must not pay for the whole store); of more, by one pass over all events.
OPENCLAW_FINGERPRINT_SCAN_MIN = 64

# --- Ingest sweep batching (DESIGN §5 "Ingest sweep") -------------------------------------------
# Parsed messages are committed in batches: each batch is one lock hold and one store
# transaction, and bounds the memory a sweep holds however high the caps are (two batches at
# most: one committing, one being read). A batch holds at least INGEST_FLUSH_MESSAGES and grows
# with the store (daemon/ingest/batch.py `batch_limit`) up to INGEST_FLUSH_MESSAGES_MAX: a
# commit dirties about one page of each random-keyed index per message until the batch outnumbers
# the index's pages, so with a fixed batch the merge's cost per message grew with the store.
# 10,000 rather than 20,000: the merge grows about as little (bench merge_growth), and a serial
# sweep holds half the candidates in memory.
INGEST_FLUSH_MESSAGES = 5_000
INGEST_FLUSH_MESSAGES_MAX = 10_000
# Within those bounds, a batch holds one message for every this many entries the store has staged.
INGEST_FLUSH_STORE_DIVISOR = 10
# A batch is committed in the background while the next is read; reading yields to the event
# loop every this many messages so the commit's own steps (lock, corpus, store) keep moving.
INGEST_TAKE_CHUNK = 2_048
# Seen-hash sets are fetched for this many upcoming sessions per store read (one hop, not one each).
INGEST_SEEN_PREFETCH_SESSIONS = 256
# A sweep or backfill during which a purge commits reads again under the new exclusion set (one
# retry is the usual case; a run of purges can take a few). Past this, the run reports it.
EXCLUSION_STALE_RETRIES = 3
# Parallel scan (ingest.workers): worker processes read, export and hash whole sessions and
# build their rows in scratch SQLite files under the agent's state directory, merged by the
# main process. A pool only pays for a large read: below this many transcript bytes to read a
# sweep stays serial (a live sweep reads a few KB; a pool's round trip and scratch file cost
# more than that scan).
INGEST_PARALLEL_MIN_BYTES = 1 << 20
# Sessions are handed to workers in tasks of about this many transcript bytes: enough to amortise
# a task's scratch file, small enough that the workers finish close together.
INGEST_TASK_BYTES = 256 << 10
INGEST_WORKERS_MAX = 8  # the default worker count is the number of cores, at most this
# A sweep reading more than this deletes each batch's scratch rows once merged, so the files stay
# near the size of the rows in flight; a smaller one leaves them until its end (it removes them).
INGEST_SCRATCH_RECLAIM_BYTES = 64 << 20
INGEST_SCRATCH_DIR = "ingest-scratch"  # under state_dir/agents/<agent>: the workers' scratch files
INGEST_SESSIONS_ROOT_PATH = "sessions"  # sessionPath = sessions/<agent>/<sessionId> (reference §4.4)
CORPUS_RELATIVE_DIR = "memory/.dreams/session-corpus"  # corpus day files, workspace-relative
SESSION_CORPUS_QUERY_PREFIX = "__dreaming_sessions__:"  # the staged signal's query (reference §5.1)
STAGED_SNIPPET_MAX_CHARS = 800  # ShortTermRecallEntry.snippet (reference §5.4)
MAX_QUERY_HASHES = 32  # per staged entry (reference §5.4)
MAX_RECALL_DAYS = 16  # per staged entry (reference §5.4)

# --- Daemon, queue and client (DESIGN §2, §6) -------------------------------------------------
HOST_KEY = REDIS_PREFIX + "host:{host}"  # hash: pid, queue, agents, heartbeat, redis state, policy
HEARTBEAT_S = 5.0  # the host record and agent routing are refreshed this often
HOST_KEY_TTL_S = 3 * HEARTBEAT_S  # a host record outlives its daemon by three missed heartbeats
# hash host_id -> its last heartbeat (Unix s), or "stopped <Unix s>" after a clean stop. Kept
# after the daemon is gone, so a client can say how long an agent's owner has been silent.
HEARTBEATS_KEY = REDIS_PREFIX + "heartbeats"
# A job for an agent this host's route names but that is not served yet (its directory away at a
# start, found again at a heartbeat) looks again after these delays, doubling: the first look is
# soon, and no look is more than a fifth of a heartbeat after the agent is served.
AGENT_WAIT_FIRST_S = 0.05
AGENT_WAIT_STEP_MAX_S = HEARTBEAT_S / 5
MAX_AGENTS_NAMED = 20  # a refusal lists at most this many agents by name (a Redis may route thousands)
# hash per queue: worker instance → {"node", "pid"} of the process running it, so a starting
# worker can tell which in-progress jobs died with their worker (memoryd.runtime.interrupted)
WORKERS_KEY = REDIS_PREFIX + "workers:{queue}"
WORKER_ALIVE_KEY = REDIS_PREFIX + "worker:{instance}"  # refreshed while the worker polls
WORKER_ALIVE_TTL_S = 3 * HEARTBEAT_S  # a worker that missed three beats is dead to other hosts
RECEIPT_SETTLE_S = 5.0  # receipts waiting for queued purge jobs are looked at this often
STATUS_REFRESH_S = 30.0  # per-agent gauges (lag, exclusions) are recomputed this often; they stat files
SCHEDULER_TICK_S = 1.0  # sweeps are due at most this late after their slot starts
REDIS_RETRY_MIN_S = 0.5  # first reconnect delay after Redis is lost; doubles up to daemon.redis_retry_max_s
LOOP_RESTART_MAX_S = 30.0  # a background loop that failed unexpectedly starts again after at most this
DRAIN_CANCEL_WAIT_S = 10.0  # after the grace, how long cancelled jobs get to return to the queue
# The client polls for a result this often. arq's default (0.5 s) makes every round trip take
# half a second; 10 ms keeps it within ~2× the worker's poll (reference/perf-limits.md, arq rows).
CLIENT_POLL_S = 0.01

# --- Live ingestion (daemon/runtime/live.py, watch.py) ----------------------------------------
# A stream of writes that never settles is still swept at least this often (watchfiles' debounce).
WATCH_MAX_GROUP_MS = 500
# The watcher's thread returns this often without a change, so a new watch is known to be in
# place within it (then one catch-up sweep covers what was written before it started).
WATCH_WAKE_MS = 1_000
WATCH_RETRY_S = 30.0  # after a watcher error the interval sweeps cover the agent; then it is tried again
# A live job not done after job_timeout_s and this much more is given up on (it was lost with Redis).
LIVE_WAIT_SLACK_S = 60.0
# The daemon's own waits for its live jobs hear the job's doorbell at once; the result is also
# polled this often in case a ring is missed (the client's 10 ms would take CPU from the sweep).
LIVE_POLL_S = 1.0

# --- Index and search (reference §6, perf-limits §7–8) -----------------------------------------
# Ranking every match of a stop-word pair costs ~1.4 s at 1M chunks (bm25 ORDER BY rank); the
# unranked MATCH is ~0.1 ms. Search ranks at most this many of the newest matching chunks, so
# p95 stays bounded for any query; rarer queries (almost all) are ranked in full.
FTS_CANDIDATE_CAP = 2000
SEARCH_MAX_LIMIT = 100  # results per query at most
SEARCH_SNIPPET_MAX_CHARS = 700  # the reference's snippet budget
# A search hit's key when it quotes no single promoted entry: this and the chunk's id.
CHUNK_KEY_PREFIX = "chunk:"
# Where promotion writes entries (the root memory file, either case): memory_get looks there.
PROMOTED_MEMORY_FILES = ("MEMORY.md", "memory.md")
# A memory key is an entry key or chunk:<sha256>; longer input is a mistake, not a key.
MEMORY_KEY_MAX_CHARS = 256
# How long `memory_forget` waits for its forget job (the lock wait and the purge included).
MCP_FORGET_WAIT_S = 300.0
# `memoryd mcp --http`: where it listens unless told otherwise (loopback: no token needed).
MCP_HTTP_DEFAULT_LISTEN = "127.0.0.1:8765"
# Hybrid weights as the reference's defaults: meaning counts more than exact words.
HYBRID_VECTOR_WEIGHT = 0.7
HYBRID_TEXT_WEIGHT = 0.3
# A chunk found only by its vector must be at least this similar: below it, feature-hashing
# similarity is noise from shared character trigrams.
MIN_VECTOR_SIMILARITY = 0.2

# --- Dreaming: grouping similar staged entries (daemon/dreaming/selection.py) ----------------------
# An entry is compared with at most this many group heads. The exact prefix-filtered join finds
# few candidates when words are varied and nearly every head when they are not (everyday chat
# from a few dozen words): past this many, candidates come from MinHash bands instead
# (dreaming/sketch.py), still checked with the exact Jaccard, the earliest groups first. Bounds
# a phase's grouping at about 20,000 x this many comparisons whatever the texts look like.
GROUP_COMPARISONS_MAX = 200
# MinHash values per entry, split into bands for the threshold (dreaming/sketch.py): a pair
# exactly at the threshold shares a band with probability at least 1 - SKETCH_MISS_AT_THRESHOLD.
SKETCH_PERMUTATIONS = 64
SKETCH_MISS_AT_THRESHOLD = 1e-3
SKETCH_SEED = 35  # fixed: one grouping of the same entries every run, on every host

# --- Dreaming: promotion, consolidation, backfill (reference §5.5–§5.8) -------------------------
# MEMORY.md/DREAMS.md edited by someone else between read and commit: rebuild from the new
# content this many times in a row, then leave the candidates eligible for the next sweep.
DREAM_COMMIT_ATTEMPTS = 3
PROMOTED_TEXT_MAX_CHARS = 640  # a consolidated resultEntry's visible text (160 tokens x 4 chars)
BACKFILL_DEFAULT_LIMIT_DAYS = 92  # the reference's --limit-days default

# --- Job completion wake-ups (client ↔ worker) ---------------------------------------------------
# After arq has stored a job's result, the worker RPUSHes to this per-job list and the waiting
# client BLPOPs it, so a finished job is seen at once instead of at the client's next poll.
# The client still reads the result from arq's key (and polls it if no wake-up comes: a daemon
# without the hook, or two clients waiting for one job), so the list is only a doorbell.
JOB_DONE_KEY = REDIS_PREFIX + "done:{job_id}"
# An erasure sent to every host (daemon/runtime/erasure_fanout.py): hash queue -> job id. No
# expiry while a host has not run it; then the hosts' results' TTL.
ERASURE_KEY = REDIS_PREFIX + "erasure:{erasure_id}"
# A wake-up nobody pops (no client waiting) must not linger; a waiter that starts later reads
# the stored result directly, so minutes are plenty.
JOB_DONE_TTL_S = 300
# The client RPUSHes this per-queue list after enqueuing; the worker BLPOPs it and starts the
# job at once instead of at its next poll (daemon.poll_delay_s). Polls go on regardless, so a
# job enqueued by anything else (the scheduler, a plain arq client) still starts within a poll.
QUEUE_BELL_KEY = REDIS_PREFIX + "enqueued:{queue}"
QUEUE_BELL_TTL_S = 300  # rings nobody pops (no worker running) do not linger
# The worker's BLPOP on the queue bell blocks at most this long before it blocks again; Redis
# times blocking commands out in whole server ticks (~0.1 s), so it only wakes, never paces.
QUEUE_BELL_BLOCK_S = 5

# --- Request limits (issue: a 100,001-id forget held the lock for seconds) -------------------
MAX_PAYLOAD_BYTES = 1 << 20  # a job's payload as canonical JSON; larger ones are refused unread
MAX_SELECTORS = 10_000  # session, participant and hook-source selectors of one forget, together

# --- Request ids (client) ------------------------------------------------------------------------
# A request id's job keeps the HMAC of its payload here (daemon/runtime/wire.py), so the same
# request id with another payload is refused. It lives while the job waits and runs, then as long
# as the job's result (the worker sets its TTL when the job ends).
REQUEST_KEY = REDIS_PREFIX + "request:{job_id}"
REQUEST_ID_MAX_CHARS = 128  # a caller's reference (a UUID is 36), not a document
# A purge's job record must not expire before it runs (arq's default is a day): it is enqueued
# with this expiry, then made persistent. A century is "never" in the one atomic step arq allows.
PURGE_JOB_EXPIRES_S = 100 * 365 * 86_400
