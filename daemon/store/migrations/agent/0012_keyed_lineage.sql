-- Agent store, version 12: ingestion's lineage keyed by numbers. Each origin row and each seen
-- hash was keyed by 65-85 bytes of text (entry key, session id, scope), so every staged message
-- inserted into three trees at random places, and past a few tens of MB each insert read and
-- dirtied an evicted page: the merge's cost grew with the store. Now each session id (with the
-- session key it was staged under) is stored once and numbered, and each staged line is one row
-- keyed (session_no, line_no): the origin of its claim (the claim hash's 48 bits as an integer,
-- daemon/derivations.py claim_number) and the session's seen hash, both. The origin of a claim
-- in a session is its first line with that claim. Origins of entries that are not claims (dream
-- diary keys) stay in memory_entry_origins. Seen hashes past the newest 4,096 of a session lose
-- their hash, not their line: the cap no longer trims lineage.
-- The conversion: each seen hash becomes a line numbered by its seq; each claim origin a line of
-- its own, numbered below 1 in (entry key) order, with no seen hash (which message of the session
-- gave it is not recorded). No memory text moves: ids, hashes, numbers.
CREATE TABLE ingest_sessions (
  session_no INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL,
  session_key TEXT                           -- as the origins recorded it (NULL: none known)
) STRICT;
-- One number per (session id, session key); forget finds a session by either.
CREATE INDEX idx_ingest_sessions_id ON ingest_sessions(session_id, session_key);
CREATE INDEX idx_ingest_sessions_key ON ingest_sessions(session_key) WHERE session_key IS NOT NULL;

CREATE TABLE ingest_lines (
  session_no INTEGER NOT NULL,               -- ingest_sessions
  line_no INTEGER NOT NULL,                  -- the line's rank among the session's staged lines
  claim INTEGER,                             -- the claim it is an origin of (NULL: none, or forgotten)
  origin_class TEXT CHECK (origin_class IS NULL OR origin_class = 'owner' OR origin_class = 'agent'
                           OR origin_class = 'untrusted' OR origin_class = 'system'),
  observed_at INTEGER,
  seen TEXT,                                 -- its seen hash (NULL: past the session's newest 4,096)
  PRIMARY KEY (session_no, line_no)
) STRICT, WITHOUT ROWID;
-- Origins by claim (a staged entry's sessions); integers, so 300 keys a page instead of 40.
CREATE INDEX idx_ingest_lines_claim ON ingest_lines(claim) WHERE claim IS NOT NULL;

INSERT INTO ingest_sessions (session_id, session_key)
  SELECT session_id, session_key FROM (
    SELECT DISTINCT session_id, session_key FROM memory_entry_origins
      WHERE entry_key GLOB 'memory:claim:[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
    UNION
    SELECT DISTINCT substr(scope, instr(scope, ':') + 1), NULL FROM ingest_seen_hashes
      WHERE substr(scope, instr(scope, ':') + 1) NOT IN (SELECT session_id FROM memory_entry_origins
        WHERE entry_key GLOB 'memory:claim:[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]')
  ) ORDER BY session_id, session_key;

-- A session's seen hashes go to its first number (the one of its lowest session key).
INSERT INTO ingest_lines (session_no, line_no, seen)
  SELECT (SELECT min(s.session_no) FROM ingest_sessions s
            WHERE s.session_id = substr(h.scope, instr(h.scope, ':') + 1)), h.seq, h.hash
  FROM ingest_seen_hashes h;

INSERT INTO ingest_lines (session_no, line_no, claim, origin_class, observed_at)
  SELECT s.session_no,
         -row_number() OVER (PARTITION BY s.session_no ORDER BY o.entry_key),
         unhex_claim, o.origin_class, o.observed_at
  FROM (SELECT *, (
          SELECT sum((instr('0123456789abcdef', substr(entry_key, 13 + d.n, 1)) - 1) << (4 * (12 - d.n)))
          FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5
                UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9
                UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12) d
        ) AS unhex_claim
        FROM memory_entry_origins
        WHERE entry_key GLOB 'memory:claim:[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]') o
  JOIN ingest_sessions s ON s.session_id = o.session_id AND s.session_key IS o.session_key;

DELETE FROM memory_entry_origins
  WHERE entry_key GLOB 'memory:claim:[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]';
DROP TABLE ingest_seen_hashes;
