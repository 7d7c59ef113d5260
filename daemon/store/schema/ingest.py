"""Ingestion checkpoints, seen-message hashes and short-term (staged) entries (reference §4.5, §5.4)."""

DDL = """
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
"""

# Migration 2. A token that every write to ingest_checkpoints replaces with a fresh random value,
# so a process that kept the checkpoint stamps of its last sweep can tell, with one row read,
# whether they still hold (a quiet re-sweep then reads no stamp rows). Random rather than a
# counter: a database recreated or restored from a copy can never present an old value again.
CHECKPOINT_TOKEN_DDL = """
CREATE TABLE IF NOT EXISTS ingest_checkpoint_token (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  token INTEGER NOT NULL
) STRICT;
INSERT OR IGNORE INTO ingest_checkpoint_token(id, token) VALUES (1, random());
CREATE TRIGGER IF NOT EXISTS ingest_checkpoints_token_ins AFTER INSERT ON ingest_checkpoints
BEGIN UPDATE ingest_checkpoint_token SET token = random() WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS ingest_checkpoints_token_upd AFTER UPDATE ON ingest_checkpoints
BEGIN UPDATE ingest_checkpoint_token SET token = random() WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS ingest_checkpoints_token_del AFTER DELETE ON ingest_checkpoints
BEGIN UPDATE ingest_checkpoint_token SET token = random() WHERE id = 1; END;
"""
