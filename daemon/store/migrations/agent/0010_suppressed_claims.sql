-- Agent store, version 10: claims forgotten one by one (`forget --entry` / `--match`). A row
-- says that a claim (its claim hash, the one its staged entry key carries) from one session is
-- never staged or promoted again; the same claim from another session is new evidence and is.
-- The session keeps every other fact, so it gets no forgotten record. Rows go with their
-- session when it is forgotten or erased. Only the day is kept (no finer time).
CREATE TABLE IF NOT EXISTS suppressed_claims (
  claim_hash TEXT NOT NULL,                  -- claim_hash of the normalised snippet
  session_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,               -- the day, in Unix ms
  PRIMARY KEY (claim_hash, session_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_suppressed_claims_session ON suppressed_claims(session_id);
