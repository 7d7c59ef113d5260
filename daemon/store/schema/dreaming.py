"""Phase signals, rewrite preimages, backfill journal and observed curated writes (reference §5.5–§5.8)."""

DDL = """
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
"""
