"""Tables every domain shares: store metadata, the fence, forgotten-session records, entry
origins and the index revision (the reference's names where they exist, §2.2)."""

DDL = """
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
"""
