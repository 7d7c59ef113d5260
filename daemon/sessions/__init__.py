"""Session sources (read-only to memoryd): metadata, transcripts, archives, admission policy."""
