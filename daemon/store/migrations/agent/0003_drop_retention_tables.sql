-- Agent store, version 3: the agent store and state_dir/retention.sqlite get separate schemas.
-- Stores created before this version carry the retention tables, empty (retention rows are
-- written to retention.sqlite only); their indexes go with them.
DROP TABLE IF EXISTS erasure_receipts;
DROP TABLE IF EXISTS retention_holds;
DROP TABLE IF EXISTS retention_objects;
DROP TABLE IF EXISTS retention_scopes;
