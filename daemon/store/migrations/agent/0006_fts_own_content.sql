-- Agent store, version 6: the full-text table keeps its own content, so that deleting a chunk
-- removes its terms from the index segments (secure-delete). Step 1 made it contentless with
-- contentless_delete, whose deletes are tombstones: secure-delete needs the deleted row's
-- tokens, so a purged chunk's terms stayed in memory_index_chunks_fts_data until an optimize.
-- The old table holds no text to rebuild its rows from (the searched text is the chunk's
-- without its marker lines), so the index is emptied: the next index run rebuilds it from the
-- files, its embeddings from the embedding cache, and search reports it stale until then.
-- Emptying memory_index_sources bumps the index revision (its triggers), so no process keeps
-- vectors of the old chunks.
DROP TABLE IF EXISTS memory_index_chunks_fts;
DELETE FROM memory_index_vectors;
DELETE FROM memory_index_chunk_recall_metadata;
DELETE FROM memory_index_chunk_provenance;
DELETE FROM memory_index_chunks;
DELETE FROM memory_index_sources;
CREATE VIRTUAL TABLE memory_index_chunks_fts USING fts5(
  text, tokenize='unicode61 remove_diacritics 2'
);
INSERT INTO memory_index_chunks_fts(memory_index_chunks_fts, rank) VALUES ('secure-delete', 1);
