"""Memory-tool content: validation and the content hash a provenance edge carries (pure)."""

from __future__ import annotations

import hashlib

from daemon.constants import MEMORY_OBJECT_MAX_CHARS
from daemon.errors import UsageError


def normalize_content(content: str) -> str:
    # As the seed: SHA-256 over a normalized form (stripped, lower-cased).
    return content.strip().lower()


def content_hash(content: str) -> str:
    return hashlib.sha256(normalize_content(content).encode("utf-8")).hexdigest()


def validate_content(content: str, *, field: str = "content") -> str:
    if not isinstance(content, str) or not content.strip():
        raise UsageError(f"{field}: empty content")
    if len(content) > MEMORY_OBJECT_MAX_CHARS:
        raise UsageError(f"{field}: {len(content)} characters; at most {MEMORY_OBJECT_MAX_CHARS}")
    if "\x00" in content:
        raise UsageError(f"{field}: contains a NUL character")
    return content
