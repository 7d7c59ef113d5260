-- Agent store, version 2. A token that every write to ingest_checkpoints replaces with a fresh
-- random value, so a process that kept the checkpoint stamps of its last sweep can tell, with one
-- row read, whether they still hold (a quiet re-sweep then reads no stamp rows). Random rather
-- than a counter: a database recreated or restored from a copy can never present an old value.
CREATE TABLE IF NOT EXISTS ingest_checkpoint_token (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  token INTEGER NOT NULL
) STRICT;
INSERT OR IGNORE INTO ingest_checkpoint_token(id, token) VALUES (1, random());
CREATE TRIGGER IF NOT EXISTS ingest_checkpoints_token_ins AFTER INSERT ON ingest_checkpoints
BEGIN UPDATE ingest_checkpoint_token SET token = random() WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS ingest_checkpoints_token_upd AFTER UPDATE ON ingest_checkpoints
BEGIN UPDATE ingest_checkpoint_token SET token = random() WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS ingest_checkpoints_token_del AFTER DELETE ON ingest_checkpoints
BEGIN UPDATE ingest_checkpoint_token SET token = random() WHERE id = 1; END;
