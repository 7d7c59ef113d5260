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
MAX_TRACKED_MESSAGES_PER_SESSION = 4096  # seen hashes kept per scope
MAX_TRACKED_SESSION_SCOPES = 2048
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
