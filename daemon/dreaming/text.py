"""Snippet text helpers shared by the phases: normalisation, claim hashes, similarity, tags."""

from __future__ import annotations

import math
import re
from collections import Counter

# The claim key and its normalisation are the staging's own (daemon/derivations.py).
from memoryd.derivations import claim_hash as claim_hash
from memoryd.derivations import normalize_snippet as normalize_snippet

_WS = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)
_ROLE_PREFIX = re.compile(r"^(?:user|assistant)\s*:\s*", re.IGNORECASE)

# Words too common to name a theme.
_STOPWORDS = frozenset(
    str.split("""
a about after again all also am an and any are as at be because been before being but by can
could did do does doing done for from had has have having he her here hers him his how i if in
into is it its just let me more most my no not now of on once only or other our out over own
please remember same she should so some such than that the their them then there these they
this those through to too under understood until up very was we were what when where which while
who why will with would you your yours noted sure okay ok will day days team
""")
)


def claim_identity(snippet: str) -> str:
    """What makes two claims the same: no role prefix, collapsed whitespace, lower case (§5.8)."""
    return normalize_snippet(_ROLE_PREFIX.sub("", normalize_snippet(snippet))).lower()


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def word_set(text: str) -> frozenset[str]:
    """The words `similarity` compares: of the claim identity, lower case."""
    return frozenset(claim_words(text))


def claim_words(text: str) -> list[str]:
    """words(claim_identity(text)), without collapsing whitespace first: no word holds any,
    and the role prefix's pattern takes a run of it as it takes one space."""
    return words(_ROLE_PREFIX.sub("", text.strip(), count=1).lower())


def jaccard(wa: frozenset[str], wb: frozenset[str]) -> float:
    """Jaccard similarity of two word sets (1.0 for two empty sets, 0.0 for one)."""
    common = len(wa & wb)
    union = len(wa) + len(wb) - common
    return common / union if union else 1.0


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the two texts' word sets (1.0 for identical claims)."""
    return jaccard(word_set(a), word_set(b))


def derive_tags(text: str, limit: int = 6) -> tuple[str, ...]:
    """Concept tags for an entry whose staging recorded none: its most frequent content words."""
    counts = Counter(w for w in claim_words(text) if len(w) >= 4 and w not in _STOPWORDS and not w.isdigit())
    return tuple(w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit])


def truncate(text: str, limit: int) -> str:
    """Cut at `limit` characters, ending with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + "…"


def log_ratio(count: float, saturation: float) -> float:
    """min(1, ln(1+count)/ln(1+saturation)): diminishing returns for repeated evidence."""
    if count <= 0:
        return 0.0
    return min(1.0, math.log1p(count) / math.log1p(saturation))
