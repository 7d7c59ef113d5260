"""The nearest valid name to a mistyped one, for "did you mean …?" in one-line errors (a
config key, a job payload's field)."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name nearest to `word`, or None when none is close (difflib's 0.6 ratio)."""
    import difflib  # only for a mistyped name: every command loads the modules that call this

    found = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return found[0] if found else None
