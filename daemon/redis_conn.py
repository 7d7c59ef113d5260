"""Redis connections from settings: `redis_url` says where (redis://, rediss:// for TLS, unix://,
or redis+sentinel:// for a primary that Redis Sentinel fails over), the `redis` section how to
log in (an ACL user, a password read from a file). Every connection memoryd opens is made here,
so a credential or a Sentinel deployment is honoured by the daemon, the CLI and the client alike.

Under Sentinel the pool asks the Sentinels for the primary at each new connection; after a
failover the old connections fail (or answer READONLY, which redis-py turns into a connection
error), the daemon's Redis-outage handling backs off and reconnects, and the new connections
reach the promoted replica.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import parse_url
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.exceptions import RedisError

from memoryd.errors import ConfigError, OperationFailed
from memoryd.redaction import redact_url as redact_url  # named here by its callers
from memoryd.redis_sentinel_url import SentinelAddress, is_sentinel_url, parse_sentinel_url

if TYPE_CHECKING:
    from arq.connections import RedisSettings

    from memoryd.settings import Settings

CONNECT_TIMEOUT_S = 5  # a Redis that does not answer a connect in 5 s is reported, not waited on
HEALTH_CHECK_S = 30  # idle pooled connections are PINGed before reuse after this long


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """Where and as whom: the URL as configured and the credentials that override its own."""

    url: str
    username: str | None
    password: str | None = field(repr=False)

    @property
    def shown(self) -> str:
        """The URL for messages: never a password, and the user the settings log in as."""
        shown = redact_url(self.url)
        return shown if self.username is None else f"{shown} (user {self.username})"


def read_password_file(path: Path) -> str:
    """The first line of `path`; ConfigError (one line, naming the setting and file) otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(f"redis.password_file {path}: cannot read it ({reason})") from None
    lines = text.splitlines()
    password = lines[0].strip() if lines else ""
    if not password:
        raise ConfigError(f"redis.password_file {path}: empty; write the password on its first line")
    return password


def redis_target(settings: Settings) -> RedisTarget:
    access = settings.redis
    password = None if access.password_file is None else read_password_file(access.password_file)
    return RedisTarget(settings.redis_url, access.username, password)


def _options(target: RedisTarget, extra: dict[str, Any]) -> dict[str, Any]:
    # redis-py's from_url lets the URL's user and password win over keyword arguments; the
    # settings' credentials must win over the URL's, so the URL is parsed here.
    try:
        options: dict[str, Any] = {**extra, **parse_url(target.url)}
    except ValueError as exc:
        raise ConfigError(f"redis_url {redact_url(target.url)}: {exc}") from None
    if target.username is not None:
        options["username"] = target.username
    if target.password is not None:
        options["password"] = target.password
    return options


def _sentinel_pool(target: RedisTarget, options: dict[str, Any]) -> ConnectionPool:
    try:
        address: SentinelAddress = parse_sentinel_url(target.url)
    except ValueError as exc:
        raise ConfigError(f"redis_url {redact_url(target.url)}: {exc}") from None
    # The Sentinels are asked without credentials; the primary is logged in to as the user.
    sentinel_options = {"socket_connect_timeout": CONNECT_TIMEOUT_S, "socket_timeout": CONNECT_TIMEOUT_S}
    sentinels = Sentinel(list(address.sentinels), sentinel_kwargs=sentinel_options)  # type: ignore[no-untyped-call]
    username = target.username if target.username is not None else address.username
    password = target.password if target.password is not None else address.password
    pool: ConnectionPool = SentinelConnectionPool(  # type: ignore[no-untyped-call]
        address.master, sentinels, db=address.db, username=username, password=password, **options
    )
    return pool


def connection_pool(settings: Settings, **options: Any) -> ConnectionPool:
    """A pool for `settings`' Redis as its user (no I/O until the first command)."""
    target = redis_target(settings)
    defaults = {"socket_connect_timeout": CONNECT_TIMEOUT_S, "health_check_interval": HEALTH_CHECK_S}
    if is_sentinel_url(target.url):
        return _sentinel_pool(target, {**defaults, **options})
    return ConnectionPool(**_options(target, {**defaults, **options}))


def redis_client(settings: Settings) -> Redis:
    """A client of its own pool (closed with `aclose()`); no I/O until the first command."""
    redis: Redis = Redis.from_pool(connection_pool(settings))
    return redis


def unreachable(settings: Settings, exc: BaseException) -> OperationFailed:
    """The one line that says Redis cannot be used, naming where and as whom, never the password."""
    return OperationFailed(f"redis_url {redis_target(settings).shown}: cannot reach Redis: {exc}")


async def connect_redis(settings: Settings) -> Redis:
    """Connect and PING; raise OperationFailed naming the (redacted) URL if Redis is unusable."""
    client = redis_client(settings)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        raise unreachable(settings, exc) from None
    return client


def arq_redis_settings(settings: Settings) -> RedisSettings:
    """arq's RedisSettings, for a worker started by arq's own command (workers/settings.py)."""
    from arq.connections import RedisSettings

    target = redis_target(settings)
    if is_sentinel_url(target.url):
        address = parse_sentinel_url(target.url)
        found = RedisSettings(
            host=list(address.sentinels),
            sentinel=True,
            sentinel_master=address.master,
            database=address.db,
            username=address.username,
            password=address.password,
        )
    else:
        found = RedisSettings.from_dsn(target.url)
    return dataclasses.replace(
        found,
        username=target.username if target.username is not None else found.username,
        password=target.password if target.password is not None else found.password,
    )
