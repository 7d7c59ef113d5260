-- The step 1 every store ran before version 3, agent stores and retention.sqlite alike: the
-- union of every domain's tables (frozen copy, for the migration tests; never edit).
CREATE TABLE IF NOT EXISTS store_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

-- Highest fencing token seen per workspace (DESIGN §4). A write with an older token is refused.
CREATE TABLE IF NOT EXISTS fence (
  workspace_key TEXT PRIMARY KEY,
  token INTEGER NOT NULL
) STRICT;

-- Forgotten-session records ("tombstones"). session_id is the plain id for `forget`, or
-- 'hmac:<hex>' (keyed hash, key outside the database) for sessions removed by an erasure,
-- so an erased subject's session id is not kept in the clear.
CREATE TABLE IF NOT EXISTS memory_session_tombstones (
  session_id TEXT NOT NULL PRIMARY KEY,
  agent_id TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS memory_entry_origins (
  entry_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  session_id TEXT NOT NULL,
  session_key TEXT,
  -- OR instead of IN (...): SQLite builds a temporary table for an IN list on every checked row.
  origin_class TEXT NOT NULL CHECK (origin_class = 'owner' OR origin_class = 'agent'
                                    OR origin_class = 'untrusted' OR origin_class = 'system'),
  observed_at INTEGER NOT NULL,
  PRIMARY KEY (entry_key, agent_id, session_id)
) STRICT;
-- forget selects origins by session; the primary key answers lookups by entry key.
CREATE INDEX IF NOT EXISTS idx_memory_entry_origins_session ON memory_entry_origins(session_id, entry_key);

CREATE TABLE IF NOT EXISTS memory_index_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  revision INTEGER NOT NULL
) STRICT;
INSERT OR IGNORE INTO memory_index_state (id, revision) VALUES (1, 0);

CREATE TABLE IF NOT EXISTS ingest_checkpoints (
  state_key TEXT PRIMARY KEY,           -- '<agent>:<sessionPath>'
  agent_id TEXT NOT NULL,
  session_id TEXT NOT NULL,
  session_key TEXT,
  session_path TEXT NOT NULL,
  mtime_ms INTEGER NOT NULL,
  size INTEGER NOT NULL,
  content_hash TEXT NOT NULL,           -- sha256 of the consumed lines; '' = excluded / rescan next time
  line_count INTEGER NOT NULL,          -- transcript lines consumed (content_hash covers exactly these)
  last_content_line INTEGER NOT NULL,   -- exported message lines produced from them (the cursor)
  at_end INTEGER NOT NULL DEFAULT 0,    -- 1: nothing but an unfinished last line was left unread
  carry TEXT NOT NULL DEFAULT '',       -- line-provenance state at the cursor, for resume
  excluded_reason TEXT,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS idx_ingest_checkpoints_session ON ingest_checkpoints(session_id);

-- Dedupe namespace per scope ('<agent>:<sessionId>'); at most MAX_TRACKED_MESSAGES_PER_SESSION kept.
CREATE TABLE IF NOT EXISTS ingest_seen_hashes (
  scope TEXT NOT NULL,
  hash TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (scope, hash)
) STRICT, WITHOUT ROWID;

-- Short-term (staged) entries, keyed by entry key (ShortTermRecallEntry).
CREATE TABLE IF NOT EXISTS short_term_entries (
  entry_key TEXT PRIMARY KEY,
  path TEXT NOT NULL,                   -- workspace-relative source (corpus file or daily note)
  start_line INTEGER NOT NULL,
  end_line INTEGER NOT NULL,
  source TEXT NOT NULL DEFAULT 'memory',
  snippet TEXT NOT NULL,
  recall_count INTEGER NOT NULL DEFAULT 0,
  daily_count INTEGER NOT NULL DEFAULT 0,
  grounded_count INTEGER NOT NULL DEFAULT 0,
  total_score REAL NOT NULL DEFAULT 0,
  max_score REAL NOT NULL DEFAULT 0,
  first_recalled_at INTEGER NOT NULL,
  last_recalled_at INTEGER NOT NULL,
  query_hashes TEXT NOT NULL DEFAULT '[]',   -- JSON list, at most 32
  recall_days TEXT NOT NULL DEFAULT '[]',    -- JSON list, at most 16
  concept_tags TEXT NOT NULL DEFAULT '[]',   -- JSON list
  origin_class TEXT NOT NULL CHECK (origin_class IN ('owner','agent','untrusted','system')),
  session_kind TEXT NOT NULL DEFAULT 'unknown',
  observed_at INTEGER NOT NULL,
  claim_hash TEXT,
  project_key TEXT,
  promoted_at INTEGER
) STRICT;
CREATE INDEX IF NOT EXISTS idx_short_term_entries_path ON short_term_entries(path);

-- Which corpus files each session's lines were appended to, so forget reads only those files
-- (the corpus grows with the store). Reserved before the lines are appended: a crash between
-- the two leaves a row too many (a file scanned for nothing), never a line forget cannot find.
CREATE TABLE IF NOT EXISTS corpus_session_files (
  session_id TEXT NOT NULL,
  relative_path TEXT NOT NULL,          -- workspace-relative corpus file
  PRIMARY KEY (session_id, relative_path)
) STRICT, WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS phase_signals (
  entry_key TEXT PRIMARY KEY,
  light_hits INTEGER NOT NULL DEFAULT 0,
  rem_hits INTEGER NOT NULL DEFAULT 0,
  last_light_at INTEGER,
  last_rem_at INTEGER
) STRICT;

-- MEMORY.md rewrite preimages ("backups"); at most MAX_REWRITE_PREIMAGES kept.
CREATE TABLE IF NOT EXISTS memory_backups (
  id INTEGER PRIMARY KEY,
  created_at INTEGER NOT NULL,
  relative_path TEXT NOT NULL DEFAULT 'MEMORY.md',
  content TEXT NOT NULL,
  content_hash TEXT NOT NULL
) STRICT;

-- Observed writes of memory files by sessions (reported by forget, never edited).
CREATE TABLE IF NOT EXISTS curated_writes (
  relative_path TEXT PRIMARY KEY,
  file_hash TEXT,
  origin_class TEXT NOT NULL,
  observed_at INTEGER NOT NULL,
  session_id TEXT,
  session_key TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS idx_curated_writes_session ON curated_writes(session_id);

-- Session backfill runs (reference §5.8). A run is undone by `backfill --rollback` from its
-- journal; rolled_back_at marks it done so a rerun of the rollback converges.
CREATE TABLE IF NOT EXISTS backfill_runs (
  id INTEGER PRIMARY KEY,
  created_at INTEGER NOT NULL,
  mode TEXT NOT NULL CHECK (mode IN ('rem','apply')),
  from_day TEXT,
  to_day TEXT,
  rolled_back_at INTEGER
) STRICT;

-- What a backfill run added, so rollback removes exactly that:
--   origin        key=entry_key, payload=session_id (an origin row the run inserted)
--   staged_new    key=entry_key (a staged entry the run created)
--   staged_prior  key=entry_key, payload=the row as JSON before the run changed it
--   corpus_line   key=relative corpus path, payload=the rendered line appended
--   diary_key     key=diary entry key written into the DREAMS.md backfill block
--   diary_created key='DREAMS.md' (the run created the diary file)
--   day           key=YYYY-MM-DD processed by the run (the backfill cursor)
CREATE TABLE IF NOT EXISTS backfill_journal (
  run_id INTEGER NOT NULL REFERENCES backfill_runs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  key TEXT NOT NULL,
  payload TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX IF NOT EXISTS idx_backfill_journal_run ON backfill_journal(run_id, kind);
CREATE INDEX IF NOT EXISTS idx_backfill_journal_kind_key ON backfill_journal(kind, key);

CREATE TABLE IF NOT EXISTS memory_index_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS memory_index_sources (
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT 'memory',     -- 'memory' | 'sessions'
  hash TEXT NOT NULL,
  mtime REAL NOT NULL,
  size INTEGER NOT NULL,
  session_id TEXT,                           -- for source='sessions'
  model TEXT NOT NULL DEFAULT 'fts-only',    -- a provider change re-embeds every file
  UNIQUE (path, source)
) STRICT;
CREATE INDEX IF NOT EXISTS idx_memory_index_sources_source ON memory_index_sources(source);
CREATE INDEX IF NOT EXISTS idx_memory_index_sources_session ON memory_index_sources(session_id);

CREATE TABLE IF NOT EXISTS memory_index_chunks (
  rowid INTEGER PRIMARY KEY,                 -- FTS and vector identity
  id TEXT NOT NULL UNIQUE,                   -- sha256 of source:path:start:end:hash:model
  path TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT 'memory',
  start_line INTEGER NOT NULL,
  end_line INTEGER NOT NULL,
  hash TEXT NOT NULL,                        -- chunk content hash (embedding-cache key)
  model TEXT NOT NULL,                       -- embedding model or 'fts-only'
  text TEXT NOT NULL,
  session_id TEXT,                           -- for source='sessions'
  updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS idx_memory_index_chunks_path_source ON memory_index_chunks(path, source);
CREATE INDEX IF NOT EXISTS idx_memory_index_chunks_source ON memory_index_chunks(source);
CREATE INDEX IF NOT EXISTS idx_memory_index_chunks_session ON memory_index_chunks(session_id);

CREATE TABLE IF NOT EXISTS memory_index_chunk_provenance (
  chunk_id TEXT PRIMARY KEY,
  -- Equalities, not `IN (...)`: SQLite builds an ephemeral table for an IN list on every
  -- execution of the INSERT, which doubled the cost of each provenance row.
  origin_class TEXT NOT NULL CHECK (origin_class = 'owner' OR origin_class = 'agent'
                                    OR origin_class = 'untrusted' OR origin_class = 'system'),
  session_kind TEXT NOT NULL CHECK (session_kind = 'interactive' OR session_kind = 'cron'
                                    OR session_kind = 'heartbeat' OR session_kind = 'subagent'
                                    OR session_kind = 'unknown'),
  observed_at INTEGER NOT NULL,
  supersedes_key TEXT,
  FOREIGN KEY (chunk_id) REFERENCES memory_index_chunks(id) ON DELETE CASCADE
) WITHOUT ROWID, STRICT;  -- rows live in the chunk_id key: one B-tree insert per chunk, not two
-- Chunks of internal sessions (never indexable): forget purges stale ones without scanning every
-- session chunk. Partial, so ordinary chunks cost no insert; the WHERE matches forget's query exactly.
CREATE INDEX IF NOT EXISTS idx_memory_index_chunk_provenance_internal ON memory_index_chunk_provenance(chunk_id)
  WHERE origin_class = 'system' OR session_kind = 'cron' OR session_kind = 'heartbeat';

CREATE TABLE IF NOT EXISTS memory_index_chunk_recall_metadata (
  chunk_id TEXT PRIMARY KEY,
  importance INTEGER CHECK (importance IS NULL OR importance BETWEEN 1 AND 10),
  triggers TEXT,
  project_key TEXT,
  FOREIGN KEY (chunk_id) REFERENCES memory_index_chunks(id) ON DELETE CASCADE
) WITHOUT ROWID, STRICT;

CREATE VIRTUAL TABLE IF NOT EXISTS memory_index_chunks_fts USING fts5(
  text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
);
INSERT INTO memory_index_chunks_fts(memory_index_chunks_fts, rank) VALUES ('secure-delete', 1);

CREATE TABLE IF NOT EXISTS memory_index_vectors (
  chunk_rowid INTEGER PRIMARY KEY,
  model TEXT NOT NULL,
  dims INTEGER NOT NULL,
  embedding BLOB NOT NULL,                   -- little-endian float32
  FOREIGN KEY (chunk_rowid) REFERENCES memory_index_chunks(rowid) ON DELETE CASCADE
) STRICT;

CREATE TABLE IF NOT EXISTS memory_embedding_cache (
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  provider_key TEXT NOT NULL,
  hash TEXT NOT NULL,
  embedding BLOB NOT NULL,
  dims INTEGER,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (provider, model, provider_key, hash)
) STRICT;
CREATE INDEX IF NOT EXISTS idx_memory_embedding_cache_updated_at ON memory_embedding_cache(updated_at);

-- The revision fences index rebuilds prepared before a purge (reference §2.2, §6.3). Chunk
-- writes bump it once per transaction from index/publish.py and index/purge.py instead of
-- per row: a row trigger would cost one UPDATE per chunk on a rebuild.
CREATE TRIGGER IF NOT EXISTS memory_index_sources_rev_ins AFTER INSERT ON memory_index_sources
BEGIN UPDATE memory_index_state SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS memory_index_sources_rev_upd AFTER UPDATE ON memory_index_sources
BEGIN UPDATE memory_index_state SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS memory_index_sources_rev_del AFTER DELETE ON memory_index_sources
BEGIN UPDATE memory_index_state SET revision = revision + 1 WHERE id = 1; END;

CREATE TABLE IF NOT EXISTS retention_scopes (
  scope TEXT PRIMARY KEY,                    -- tenant:<t>[:user:<u>[:session:<s>[:object:<o>]]]
  parent TEXT,                               -- structural parent; NULL for a tenant
  created_at INTEGER NOT NULL,               -- Unix ms
  retention_days INTEGER,                    -- as requested (NULL = inherit the parent's bound)
  expires_at INTEGER,                        -- effective, clamped to the parent's; NULL = never
  expired_at INTEGER                         -- set by an expiry sweep: unreadable from then on
) STRICT;
CREATE INDEX IF NOT EXISTS idx_retention_scopes_expires ON retention_scopes(expires_at)
  WHERE expires_at IS NOT NULL;

-- Memory-tool objects. A provenance edge is (provenance_parent, provenance_hash, provenance_at):
-- the cited scope, the sha256 of its content then, and its time. Erasure rewrites the parent to
-- 'TOMBSTONE:<random>', drops the hash and coarsens the time to the day (seed 001).
CREATE TABLE IF NOT EXISTS retention_objects (
  object_id TEXT PRIMARY KEY,
  scope TEXT NOT NULL REFERENCES retention_scopes(scope),
  content TEXT NOT NULL,
  content_hash TEXT NOT NULL,                -- sha256 of the normalized content
  created_at INTEGER NOT NULL,
  provenance_parent TEXT,
  provenance_hash TEXT,
  provenance_at INTEGER
) STRICT;
CREATE INDEX IF NOT EXISTS idx_retention_objects_scope ON retention_objects(scope, created_at);
-- Erasure enumerates provenance children of the erased scopes by this index, before deleting.
CREATE INDEX IF NOT EXISTS idx_retention_objects_parent ON retention_objects(provenance_parent);

-- Legal holds: no expiry; a hold covers its scope and everything structurally under it.
CREATE TABLE IF NOT EXISTS retention_holds (
  hold_id TEXT PRIMARY KEY,                  -- opaque; receipts name blocking holds by it
  scope TEXT NOT NULL UNIQUE,
  reason TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;

-- Erasure receipts: counts, state, the caller's request id and the day. Never content, hashes
-- or the subject's ids.
CREATE TABLE IF NOT EXISTS erasure_receipts (
  seq INTEGER PRIMARY KEY,
  receipt_id TEXT NOT NULL UNIQUE,
  day TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('complete', 'partial', 'refused')),
  body TEXT NOT NULL                         -- the receipt as JSON
) STRICT;
