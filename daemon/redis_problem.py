"""Why a Redis is unusable, in the words an operator acts on: which host and port, and
whether it is down or refused the credentials. Never shows the password."""

from __future__ import annotations

from urllib.parse import urlsplit

from redis.exceptions import AuthenticationError


def redis_address(url: str) -> str:
    """HOST:PORT of a redis URL (the socket path of unix://), without its userinfo."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    try:
        port = parts.port or 6379
    except ValueError:  # a port that is not a number: show what was written
        return parts.netloc.rpartition("@")[2]
    return f"{parts.hostname or '127.0.0.1'}:{port}"


def redis_problem(url: str, exc: BaseException) -> str:
    """One line: "Redis refused the password at HOST:PORT" or "Redis unreachable at HOST:PORT (…)"."""
    where = redis_address(url)
    if isinstance(exc, AuthenticationError):
        return f"Redis refused the password at {where}"
    reason = str(exc).strip() or type(exc).__name__
    return f"Redis unreachable at {where} ({reason})"
