-- Agent store, version 11: a random id of this store, made once (store_meta `store_id`). An
-- agent's route names it, so a host takes an agent's route over only when it serves the same
-- store (a copy keeps the id); a store created anew is another store. Random: no memory text.
INSERT OR IGNORE INTO store_meta(key, value) VALUES ('store_id', lower(hex(randomblob(16))));
