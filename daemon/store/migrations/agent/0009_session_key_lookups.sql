-- Agent store, version 9: a forget finds a session by the key ingestion recorded for it (in
-- its checkpoint and its entry origins) once the session store no longer describes it: an
-- archived-only session, a session whose history a reset deleted. By index, so a forget's
-- cost does not grow with the number of sessions or entries. Keys only: no memory text.
CREATE INDEX IF NOT EXISTS idx_ingest_checkpoints_session_key
  ON ingest_checkpoints(session_key) WHERE session_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_memory_entry_origins_session_key
  ON memory_entry_origins(session_key, session_id) WHERE session_key IS NOT NULL;
