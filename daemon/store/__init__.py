"""The only place with SQL: the SQLite engine, the frozen migrations and one repository module
per table group; domain packages call named functions, each running inside the caller's
transaction (`Store.read` / `Store.write`).

    engine.py            which sqlite3 module, the Connection protocol, connection setup
    db.py                Store: one connection per store, read and fenced write transactions
                         (the `fence` table is its own)
    migrate.py           applies migrations/<schema>/NNNN_*.sql by user_version
    batched.py           every `IN (...)` over a list, in batches
    inspect.py           whole-store compaction and scan, for the erasure verifier

    agent store (memory.sqlite)
      ingest state       checkpoints.py, seen_hashes.py, short_term.py, corpus_files.py
      lineage            origins.py, tombstones.py, participants.py, erased_senders.py
      dreaming state     phase_signals.py, preimages.py, curated_writes.py, backfill_journal.py
      index              index_sources.py, index_chunks.py, index_fts.py, index_vectors.py,
                         embedding_cache.py, index_state.py
    retention store (retention.sqlite)
      retention          retention.py
"""
