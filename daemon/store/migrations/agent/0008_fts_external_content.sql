-- Agent store, version 8: the full-text table reads its content from the chunks instead of
-- keeping a copy. Since step 6 every chunk's text was written twice, in memory_index_chunks
-- and in memory_index_chunks_fts_content: twice the pages to write, checkpoint, rewrite
-- around a purge and scan for an erased subject. The searched text is the chunk's without its
-- marker lines, so a chunk whose searched text differs keeps it in `search_text` (NULL: the
-- same as `text`); the view gives FTS5 the text it indexed for every chunk. FTS5 reads a row
-- from the view when it deletes it, so a delete still removes the row's terms from the index
-- segments (secure-delete), as long as the chunk row is deleted after its FTS row
-- (store/index_chunks.py delete_chunks).
ALTER TABLE memory_index_chunks ADD COLUMN search_text TEXT;
UPDATE memory_index_chunks SET search_text = f.c0
  FROM memory_index_chunks_fts_content f
  WHERE f.id = memory_index_chunks.rowid AND f.c0 IS NOT memory_index_chunks.text;
DROP TABLE memory_index_chunks_fts;
CREATE VIEW memory_index_chunks_search(chunk_rowid, text) AS
  SELECT rowid, coalesce(search_text, text) FROM memory_index_chunks;
CREATE VIRTUAL TABLE memory_index_chunks_fts USING fts5(
  text, content='memory_index_chunks_search', content_rowid='chunk_rowid',
  tokenize='unicode61 remove_diacritics 2'
);
INSERT INTO memory_index_chunks_fts(memory_index_chunks_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO memory_index_chunks_fts(memory_index_chunks_fts) VALUES ('rebuild');
