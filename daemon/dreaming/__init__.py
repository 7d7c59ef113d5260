"""Dreaming: light, REM and deep phases over staged entries, promotion into MEMORY.md with
lineage, optional model consolidation, and session backfill (reference §5.5–§5.8).

Entry points: `sweep.run_dreaming`, `promote.run_promote`, `backfill.run_backfill`.
"""
