"""Ingestion: the session sweep (checkpoints, scan, corpus, staging) and, in `dreaming/`, the phases."""
