"""Secrets out of everything memoryd prints or logs: the password (and any bare token) in a
URL's userinfo, and query parameters that name a secret. `redis://memoryd:pw@host/0` shows as
`redis://memoryd:***@host/0`, `https://bob:pw@host/v1?api_key=k` as
`https://bob:***@host/v1?api_key=***`."""

from __future__ import annotations

import re
from typing import Any

# Query parameters whose value is a credential (password=, api_key=, access_token=, sig=, …).
# The value runs to the next '&' or '#': parse_qs (and so redis-py) no longer splits on ';'.
_SECRET_PARAM_RE = re.compile(
    r"(?i)([?&;](?:[^=&#;]*(?:pass|secret|token|key|auth|sig|credential)[^=&#;]*)=)[^&#]*"
)
MASK = "***"


def redact_url(url: str) -> str:
    """The URL with every password, bare userinfo token and secret query value masked."""
    url = _SECRET_PARAM_RE.sub(rf"\1{MASK}", url)
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    # The last '@' before the query ends the userinfo: a password may itself hold '@' or '/'.
    at = rest.rfind("@", 0, _first(rest, "?#"))
    if at < 0:
        return url
    userinfo, host = rest[:at], rest[at + 1 :]
    user, colon, _password = userinfo.partition(":")
    shown = f"{user}:{MASK}" if colon and user else MASK  # a bare "token@" may be a password
    return f"{scheme}{sep}{shown}@{host}"


def _first(text: str, chars: str) -> int:
    found = [i for i in (text.find(c) for c in chars) if i >= 0]
    return min(found) if found else len(text)


def redact_urls_in(value: Any) -> Any:
    """A copy of a JSON-like value with every string that looks like a URL redacted."""
    if isinstance(value, dict):
        return {k: redact_urls_in(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_urls_in(v) for v in value]
    if isinstance(value, str) and ("://" in value or "@" in value):
        return redact_url(value)
    return value


_URL_IN_TEXT = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+")


def redact_text(text: str) -> str:
    """`text` (an error message, a log line) with every URL in it redacted."""
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
