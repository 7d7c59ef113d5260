-- Retention store, version 3: the agent store and state_dir/retention.sqlite get separate
-- schemas. Stores created before this version carry every agent table, empty (agent rows are
-- written to agent stores only; the index revision row is the one the old step 1 inserted).
-- The fence stays: the retention lease's writes check it. Indexes and triggers go with their
-- tables; a table before the ones its foreign keys and triggers name.
DROP TABLE IF EXISTS store_meta;
DROP TABLE IF EXISTS memory_session_tombstones;
DROP TABLE IF EXISTS memory_entry_origins;
DROP TABLE IF EXISTS ingest_checkpoints;
DROP TABLE IF EXISTS ingest_checkpoint_token;
DROP TABLE IF EXISTS ingest_seen_hashes;
DROP TABLE IF EXISTS short_term_entries;
DROP TABLE IF EXISTS corpus_session_files;
DROP TABLE IF EXISTS phase_signals;
DROP TABLE IF EXISTS memory_backups;
DROP TABLE IF EXISTS curated_writes;
DROP TABLE IF EXISTS backfill_journal;
DROP TABLE IF EXISTS backfill_runs;
DROP TABLE IF EXISTS memory_index_meta;
DROP TABLE IF EXISTS memory_index_chunk_provenance;
DROP TABLE IF EXISTS memory_index_chunk_recall_metadata;
DROP TABLE IF EXISTS memory_index_vectors;
DROP TABLE IF EXISTS memory_index_chunks_fts;
DROP TABLE IF EXISTS memory_index_chunks;
DROP TABLE IF EXISTS memory_index_sources;
DROP TABLE IF EXISTS memory_index_state;
DROP TABLE IF EXISTS memory_embedding_cache;
