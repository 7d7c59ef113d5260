"""Memory-tool content: validation and the content hash a provenance edge carries (pure)."""

from __future__ import annotations

from memoryd.constants import MEMORY_OBJECT_MAX_CHARS

# As the seed: SHA-256 over a normalized form (stripped, lower-cased), declared with every
# other derivation.
from memoryd.derivations import content_hash as content_hash
from memoryd.derivations import normalize_content as normalize_content
from memoryd.errors import UsageError


def validate_content(content: str, *, field: str = "content") -> str:
    if not isinstance(content, str) or not content.strip():
        raise UsageError(f"{field}: empty content")
    if len(content) > MEMORY_OBJECT_MAX_CHARS:
        raise UsageError(f"{field}: {len(content)} characters; at most {MEMORY_OBJECT_MAX_CHARS}")
    if "\x00" in content:
        raise UsageError(f"{field}: contains a NUL character")
    return content
