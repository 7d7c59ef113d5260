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
"""
