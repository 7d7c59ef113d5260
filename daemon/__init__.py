"""memoryd: long-term memory for AI agents, with provenance and verified forgetting."""

__version__ = "0.1.0"
