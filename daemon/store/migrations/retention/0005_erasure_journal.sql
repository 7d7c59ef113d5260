-- Retention store, version 5: the pending-erasure journal. Before an erasure deletes anything it
-- journals what its verifier needs (the subject's ids, content, times, and the sessions it
-- reaches), sealed with a key of its own kept in a file beside the store; a rerun after a crash
-- verifies against the same needles. The row goes in the transaction that writes the receipt,
-- and then the key file: the sealed bytes are unreadable from then on, wherever a copy survives.
CREATE TABLE IF NOT EXISTS erasure_journal (
  journal_id TEXT PRIMARY KEY,               -- random; names the key file
  target_ref TEXT NOT NULL UNIQUE,           -- keyed hash of the erased scope (never the scope)
  sealed BLOB NOT NULL                       -- the needles, sealed (retention/seal.py)
) STRICT;
