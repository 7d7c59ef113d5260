"""Developer tools: the docs generator and the fault campaign (not part of the daemon)."""
