-- Retention store (state_dir/retention.sqlite), version 1: scopes, memory-tool objects with
-- provenance edges, legal holds, erasure receipts, and the fence of the retention lease.
-- Frozen: released as is, never edited; a change is a new numbered step. Stores created before
-- version 3 ran the agent tables in this step too (the schemas were one); step 3 drops them.

-- Highest fencing token seen per lease (DESIGN §4). A write with an older token is refused.
CREATE TABLE IF NOT EXISTS fence (
  workspace_key TEXT PRIMARY KEY,
  token INTEGER NOT NULL
) STRICT;

-- Scope strings sort so that a scope's structural subtree is the key range
-- (`scope > 'S:' AND scope < 'S;'`, ';' being ':' + 1): cascades and hold checks are range scans.
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
