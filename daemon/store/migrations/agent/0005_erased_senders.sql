-- Agent store, version 5: the senders an erasure removed from a shared session whose messages
-- all name their sender. Their turns (and the assistant's replies to them) are skipped by every
-- path that reads the transcript, so the session's other participants are read again without
-- them. Keyed hashes only (the key is the agent's, outside the database): neither the session
-- id nor the sender's id is kept in the clear.
CREATE TABLE IF NOT EXISTS erased_senders (
  session_ref TEXT NOT NULL,                 -- hmac:<hex> of the session id
  sender_ref TEXT NOT NULL,                  -- hmac:<hex> of (session id, sender id)
  created_at INTEGER NOT NULL,               -- the day, in Unix ms (no finer time)
  PRIMARY KEY (session_ref, sender_ref)
) STRICT, WITHOUT ROWID;
