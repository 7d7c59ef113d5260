"""`memoryd forget`: purge what memoryd derived from chosen sessions and keep it purged
(reference §7). request → select → lineage → snapshot → plan (pure) → apply → report."""
