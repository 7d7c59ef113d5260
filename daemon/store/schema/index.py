"""The memory index (reference §2.2, §6): sources, chunks, chunk provenance, FTS5, vectors,
embedding cache and the revision triggers.

Chunk text lives once, in memory_index_chunks. The FTS5 table is contentless with
contentless_delete (SQLite >= 3.43) and secure-delete on, so a deleted chunk's tokens leave
the index segments instead of lingering in them (erasure's physical check). Its rowid is the
chunk's rowid. Vectors are little-endian float32 BLOBs keyed by chunk rowid; a sqlite-vec
vec0 mirror is optional and built by index/vectors.py when the extension is loaded.
"""

DDL = """
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
"""
