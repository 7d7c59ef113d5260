"""The Sentinel form of `redis_url`, parsed without I/O (settings validate it at load):

    redis+sentinel://[user[:password]@]host:port[,host:port…]/<master>[/<db>]

The hosts are Sentinels (port 26379 unless given); `<master>` is the name they monitor; the
user and password (or `redis.username` / `redis.password_file`) log in to the primary, never to
the Sentinels. redis-py's URL parsing has no such scheme, so memoryd parses it here."""

from __future__ import annotations

from dataclasses import dataclass

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_DEFAULT_PORT = 26379
FORM = "redis+sentinel://host:port[,host:port...]/<master>[/<db>]"


@dataclass(frozen=True, slots=True)
class SentinelAddress:
    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int
    username: str | None
    password: str | None


def is_sentinel_url(url: str) -> bool:
    return url.lower().startswith(SENTINEL_SCHEME + "://")


def _host_port(text: str) -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    if not colon:
        host, port = text, str(SENTINEL_DEFAULT_PORT)
    host = host.strip("[]")  # an IPv6 literal: [::1]:26379
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"sentinel address {text!r} is not host:port; expected {FORM}")
    return host, int(port)


def parse_sentinel_url(url: str) -> SentinelAddress:
    """The Sentinels, master name, database and credentials of a redis+sentinel:// URL;
    ValueError (one line, no password) when it does not have that form."""
    if not is_sentinel_url(url):
        raise ValueError(f"not a {SENTINEL_SCHEME}:// URL; expected {FORM}")
    rest = url[len(SENTINEL_SCHEME) + 3 :]
    if "?" in rest or "#" in rest:
        raise ValueError(f"takes no query or fragment; expected {FORM}")
    authority, slash, path = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = user or None
        password = secret if colon else None
    if not hosts:
        raise ValueError(f"names no sentinel; expected {FORM}")
    sentinels = tuple(_host_port(h) for h in hosts.split(","))
    parts = path.split("/") if slash else []
    if not parts or not parts[0]:
        raise ValueError(f"names no master; expected {FORM}")
    if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ValueError(f"the database after the master must be a number; expected {FORM}")
    db = int(parts[1]) if len(parts) == 2 else 0
    return SentinelAddress(sentinels, parts[0], db, username, password)
