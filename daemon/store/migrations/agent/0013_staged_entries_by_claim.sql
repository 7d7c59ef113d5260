-- Agent store, version 13: the staged entries' key tree keyed by the claim. A staged claim's entry
-- key is 'memory:claim:' and 12 hex digits; its primary-key index held those 25 bytes of text, the
-- last text-keyed tree an ingest sweep inserted into at random places (about 100 keys a page).
-- Now the table is a plain rowid table (rows appended in staging order) and its one key index
-- holds a claim's 48 bits as 6 bytes (any other key as its text), about 250 keys a page:
-- memoryd.store.short_term spells the same expression (`key_index`), and every lookup by key
-- goes through it. Keys stay unique. The rows are copied under their rowids, in rowid order.
CREATE TABLE short_term_entries_v13 (
  entry_key TEXT NOT NULL,
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

INSERT INTO short_term_entries_v13 (rowid, entry_key, path, start_line, end_line, source, snippet,
    recall_count, daily_count, grounded_count, total_score, max_score, first_recalled_at,
    last_recalled_at, query_hashes, recall_days, concept_tags, origin_class, session_kind,
    observed_at, claim_hash, project_key, promoted_at)
  SELECT rowid, entry_key, path, start_line, end_line, source, snippet, recall_count, daily_count,
    grounded_count, total_score, max_score, first_recalled_at, last_recalled_at, query_hashes,
    recall_days, concept_tags, origin_class, session_kind, observed_at, claim_hash, project_key,
    promoted_at
  FROM short_term_entries ORDER BY rowid;

DROP TABLE short_term_entries;
ALTER TABLE short_term_entries_v13 RENAME TO short_term_entries;
CREATE UNIQUE INDEX idx_short_term_entries_key ON short_term_entries(
  (CASE WHEN entry_key GLOB 'memory:claim:[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(substr(entry_key, 14)) ELSE entry_key END));
CREATE INDEX idx_short_term_entries_path ON short_term_entries(path);
