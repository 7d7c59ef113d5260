-- Retention store, version 4: an erasure receipt may say `not_found` (nothing named the subject:
-- nothing was erased, and the receipt says so instead of `complete`). SQLite cannot alter a
-- CHECK constraint, so the table is rebuilt with its rows, in key order, under the same name.
CREATE TABLE erasure_receipts_v4 (
  seq INTEGER PRIMARY KEY,
  receipt_id TEXT NOT NULL UNIQUE,
  day TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('complete', 'partial', 'refused', 'not_found')),
  body TEXT NOT NULL                         -- the receipt as JSON (its stored form: no paths)
) STRICT;
INSERT INTO erasure_receipts_v4(seq, receipt_id, day, state, body)
  SELECT seq, receipt_id, day, state, body FROM erasure_receipts ORDER BY seq;
DROP TABLE erasure_receipts;
ALTER TABLE erasure_receipts_v4 RENAME TO erasure_receipts;
