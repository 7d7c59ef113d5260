-- Agent store, version 4: who took part in each ingested session, recorded at ingestion from
-- the session's metadata (`participants`) and from each message's sender
-- (`__openclaw.senderId`), so an erasure finds every session a user took part in: archives,
-- and sessions whose metadata was removed, included. Actor ids are subject ids: forget removes
-- the rows of the sessions it forgets (last, with the origins), erase those and the subject's.
CREATE TABLE IF NOT EXISTS session_participants (
  session_id TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  namespace TEXT NOT NULL DEFAULT '{}',      -- the identity minus `id` (type, senderKind, …), JSON
  PRIMARY KEY (session_id, actor_id)
) STRICT, WITHOUT ROWID;
-- Erasure looks a user up by actor id.
CREATE INDEX IF NOT EXISTS idx_session_participants_actor ON session_participants(actor_id);
