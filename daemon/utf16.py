"""JavaScript string lengths and order: UTF-16 code units, the unit the reference states its
snippet limits in and sorts by. A lone surrogate (what Node's JSON.stringify writes for a string
cut mid-pair) is one code unit here, as it is in JavaScript, never an encoding error."""

from __future__ import annotations


def utf16_len(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def truncate_utf16(text: str, limit: int) -> str:
    """Cut to at most `limit` UTF-16 code units."""
    if len(text) <= limit // 2 or (text.isascii() and len(text) <= limit):
        return text
    if text.isascii():
        return text[:limit]
    units = 0
    for i, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return text[:i]
    return text


def utf16_key(text: str) -> bytes:
    """Sort key giving JavaScript's default string order (UTF-16 code units).

    The reference sorts with `toSorted()` and, for a few fields, `localeCompare`; memoryd uses
    code-unit order for both, so the order is the same on every host whatever its locale.
    """
    return text.encode("utf-16-be", "surrogatepass")


# Punctuation in the order the root collation of CLDR (what `localeCompare` uses without a
# locale) gives it; every other ASCII punctuation sorts after these, in code-unit order.
_PUNCTUATION = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"


def locale_key(text: str) -> tuple[tuple[int, ...], tuple[int, ...], bytes]:
    """Sort key close to JavaScript's `localeCompare` in the root locale, for the report fields
    the reference sorts that way (curatedWrites by path, sessionResolutions by id), and the same
    on every host: punctuation, then digits, then letters ignoring case; then lower case before
    upper case; then code units. Exact for ASCII; other characters follow the letters in
    code-unit order."""
    primary: list[int] = []
    tertiary: list[int] = []
    for ch in text:
        rank = _PUNCTUATION.find(ch)
        if rank >= 0:
            primary.append(rank)
        elif ch.isascii() and ch.isdigit():
            primary.append(100 + ord(ch))
        elif ch.isascii() and ch.isalpha():
            primary.append(200 + ord(ch.lower()))
        elif ch.isascii():
            primary.append(50 + ord(ch))  # the rest of ASCII punctuation and controls
        else:
            primary.append(1000 + ord(ch))
        tertiary.append(1 if ch.isupper() else 0)
    return tuple(primary), tuple(tertiary), utf16_key(text)
