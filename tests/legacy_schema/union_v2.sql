-- The step 2 every store ran before version 3 (frozen copy, for the migration tests; never edit).
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
