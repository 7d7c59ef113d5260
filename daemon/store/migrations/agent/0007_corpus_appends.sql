-- Agent store, version 7: corpus appends whose batch has not committed yet. An ingest writes
-- the row (the day file's inode and size before its append) in the transaction that reserves
-- the corpus files, and deletes it in the batch's commit. A writer killed between its append
-- and that commit leaves the row behind, and the next writer under the lock cuts the file back
-- to that size, so the retry appends those lines once. Paths and sizes only: no memory text.
CREATE TABLE IF NOT EXISTS corpus_appends (
  relative_path TEXT PRIMARY KEY,            -- the day file, relative to the workspace
  inode INTEGER NOT NULL,                    -- the file the append went to (0: none existed)
  size_before INTEGER NOT NULL               -- its size in bytes before the append
) STRICT, WITHOUT ROWID;
