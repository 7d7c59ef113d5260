"""memoryd: long-term memory for AI agents, with provenance and verified forgetting."""

from daemon.allocator import tune_allocator

__version__ = "0.1.0"

# Before any store thread starts: every entry point (daemon, CLI, library use) gets the same
# bounded memory profile (see daemon/allocator.py).
tune_allocator()
