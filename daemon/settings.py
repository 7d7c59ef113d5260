"""Settings: built-in defaults, then the TOML file, then MEMORYD_* environment variables.

The file comes from `memoryd --config PATH`, else `$MEMORYD_CONFIG`, else none (defaults only).
Nested keys take `__` in the environment: MEMORYD_DREAMING__TIMEZONE=Europe/Berlin.
Every section forbids unknown keys, so a typo is an error that names the key, not a silent default.

Sections are frozen dataclasses validated here, without pydantic: every command loads settings,
and pydantic's import and model building were most of a command's start-up. Bad values get
pydantic's wording (`Input should be greater than 0`), which the operator guide quotes.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import socket
import tomllib
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memoryd import derivations
from memoryd.did_you_mean import closest
from memoryd.errors import ConfigError
from memoryd.redis_sentinel_url import is_sentinel_url, parse_sentinel_url


def setting(
    default: Any = dataclasses.MISSING,
    *,
    factory: Callable[[], Any] | None = None,
    description: str = "",
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    check: Callable[[Any], Any] | None = None,
) -> Any:
    """A setting: its default (or a factory), its one-line description (the docs print it),
    bounds, and a `check` that may return the value cleaned or raise ValueError."""
    meta = {"description": description, "gt": gt, "ge": ge, "le": le, "check": check, "default": default}
    if isinstance(default, list):  # each instance gets its own copy of a list default
        return field(default_factory=lambda: list(default), metadata=meta)
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _clean_list(values: list[str]) -> list[str]:
    # The reference trims configured values and drops empty ones; metadata values are not trimmed.
    return [v.strip() for v in values if v.strip()]


@dataclass(frozen=True, slots=True)
class ExcludeSessions:
    """Admission policy lists. Case-sensitive matches against recorded session metadata."""

    hook_external_content_sources: list[str] = setting(
        factory=list, description="Hook sources to keep out (gmail, email, webhook)."
    )
    channels: list[str] = setting(factory=list, description="Channel/plugin ids to keep out (not room ids).")
    chat_types: list[str] = setting(
        factory=list, description="Chat types to keep out (direct, group, channel)."
    )
    session_keys: list[str] = setting(
        factory=list,
        description="Session-key patterns to keep out, matched against the whole key: "
        "* any run, ? one character, [..] a set (agent:*:discord:*). The other lists are exact.",
    )

    def __post_init__(self) -> None:
        for name in ("hook_external_content_sources", "channels", "chat_types", "session_keys"):
            object.__setattr__(self, name, _clean_list(getattr(self, name)))


@dataclass(frozen=True, slots=True)
class MemoryPolicy:
    exclude_sessions: ExcludeSessions = setting(factory=ExcludeSessions)


@dataclass(frozen=True, slots=True)
class AgentConfig:
    workspace: Path | None = setting(
        None, description="The agent's workspace; default state_dir/agents/<id>/workspace."
    )
    session_source: Literal["auto", "json", "openclaw"] = setting(
        "auto", description="auto: the OpenClaw agent database when present, else sessions.json."
    )


@dataclass(frozen=True, slots=True)
class IngestSettings:
    interval_s: float = setting(300.0, gt=0, description="Seconds between scheduled ingest sweeps.")
    max_messages_per_sweep: int = setting(240, ge=1, description="Messages staged per sweep at most.")
    max_messages_per_file: int = setting(
        80, ge=1, description="Messages staged per session per sweep at most."
    )
    watch: bool = setting(
        True,
        description="Watch the sessions (inotify) and sweep as soon as a change settles; the interval "
        "sweeps stay as the safety net. Off with daemon.schedule = false.",
    )
    watch_settle_ms: int = setting(
        50, ge=1, le=10_000, description="A change is swept once no write followed it for this long."
    )
    workers: int = setting(
        0,
        ge=0,
        le=64,
        description="Processes that scan a large first sweep in parallel; 0 = the number of cores (at "
        "most 8), 1 = scan in the sweep's own process. Sweeps that read under 1 MiB, or whose caps "
        "could cut a session short, are always scanned in process. The pool pays for long sweeps; on a "
        "host whose cores are busy, sweeps of a few tens of MB are faster with 1.",
    )


@dataclass(frozen=True, slots=True)
class ConsolidationSettings:
    base_url: str | None = setting(
        None, description="OpenAI-compatible endpoint; unset = append-only promotion."
    )
    model: str = setting("gpt-4o-mini", description="Model name sent to the endpoint.")
    api_key_env: str = setting("MEMORYD_CONSOLIDATION_API_KEY", description="Env var holding the API key.")
    timeout_s: float = setting(60.0, gt=0, description="Model call timeout.")


def _zone(v: str) -> str:
    import zoneinfo  # here: most configs name no zone, and every command loads settings

    try:
        zoneinfo.ZoneInfo(v)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {v!r}") from exc
    return v


@dataclass(frozen=True, slots=True)
class DreamingSettings:
    enabled: bool = setting(True, description="Run dreaming sweeps on the schedule.")
    timezone: str = setting("UTC", check=_zone, description="IANA zone used to bucket days.")
    interval_s: float = setting(3600.0, gt=0, description="Seconds between scheduled dreaming sweeps.")
    light_limit: int = setting(100, ge=0, description="Candidates in the Light Sleep block at most.")
    rem_limit: int = setting(10, ge=0, description="REM truths limit (capped at 3 per the reference).")
    lookback_days: int = setting(7, ge=1, description="Days of staged entries light/REM consider.")
    dedupe_similarity: float = setting(0.9, ge=0, le=1, description="Light dedupe similarity.")
    min_pattern_strength: float = setting(0.75, ge=0, le=1, description="REM theme strength gate.")
    min_score: float = setting(0.75, ge=0, description="Deep promotion minimum score.")
    min_recall_count: int = setting(3, ge=0, description="Deep promotion minimum recall count.")
    min_unique_queries: int = setting(3, ge=0, description="Deep promotion minimum distinct queries.")
    recency_half_life_days: float = setting(14.0, gt=0, description="Recency half-life for ranking.")
    max_age_days: float = setting(30.0, gt=0, description="Staged entries older than this are not promoted.")
    max_promoted_snippet_tokens: int = setting(160, ge=1, description="Promoted text budget (x4 chars).")
    max_prior_entry_loss_fraction: float = setting(0.25, ge=0, le=1, description="Consolidation loss guard.")
    memory_file_max_chars: int = setting(10_000, ge=1000, description="MEMORY.md size budget.")
    consolidation: ConsolidationSettings = setting(factory=ConsolidationSettings)


@dataclass(frozen=True, slots=True)
class EmbeddingSettings:
    provider: Literal["none", "hashing", "openai"] = setting("none", description="none = FTS only.")
    dims: int = setting(256, ge=8, le=4096, description="Vector size of the hashing embedder.")
    base_url: str | None = setting(None, description="OpenAI-compatible embeddings endpoint.")
    model: str = setting("text-embedding-3-small", description="Embedding model name.")
    api_key_env: str = setting("MEMORYD_EMBEDDING_API_KEY", description="Env var holding the API key.")
    batch_size: int = setting(64, ge=1, description="Texts per embedding request.")
    timeout_s: float = setting(30.0, gt=0, description="Timeout of one embedding request.")
    max_retries: int = setting(3, ge=0, description="Retries of a failed embedding request (429/5xx).")


@dataclass(frozen=True, slots=True)
class IndexSettings:
    interval_s: float = setting(300.0, gt=0, description="Seconds between scheduled index syncs.")
    sources: list[Literal["memory", "sessions"]] = setting(["memory"], description="What to index.")
    chunk_tokens: int = setting(400, ge=16, description="Chunk size in tokens (~4 chars each).")
    chunk_overlap: int = setting(80, ge=0, description="Chunk overlap in tokens.")
    embedding: EmbeddingSettings = setting(factory=EmbeddingSettings)


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    tenant: str = setting("default", description="Tenant that ingested sessions belong to.")
    interval_s: float = setting(3600.0, gt=0, description="Seconds between retention sweeps.")
    expired_purge_after_days: int | None = setting(
        None, ge=0, description="Purge expired data this many days after expiry; unset = never."
    )
    erase_result_ttl_s: int = setting(
        300,
        ge=1,
        description="Seconds an erase job's result stays in Redis (the job itself waits until it runs).",
    )
    agent_participant_kinds: list[str] = setting(
        ["agent", "bot", "assistant"],
        description="Participant senderKind/type values that mark an agent, not a user, when a session "
        "is mapped to its scope (user = the first other participant).",
    )


_DEPLOYMENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _deployment_id(v: str) -> str:
    if v and not _DEPLOYMENT_ID.fullmatch(v):
        raise ValueError(
            f"{v!r} is not a deployment id: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return v


@dataclass(frozen=True, slots=True)
class RecallSettings:
    scope: Literal["participant", "agent"] = setting(
        "participant",
        description="Whose memory an agent recalls (memoryd mcp): participant = only what derives "
        "from sessions the asking participant took part in, and owner-level memory; agent = all of "
        "the agent's memory (one user, or a trusted agent).",
    )


def parse_listen(value: str) -> tuple[str, int]:
    """'host:port' (IPv6 as '[::1]:9464') → (host, port); ValueError saying what is expected.
    The host is required: an empty one would bind every address, which must be asked for."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected host:port with a port from 0 to 65535 (127.0.0.1:9464), got {value!r}")
    if not host.strip("[]"):
        raise ValueError(
            f"{value!r} names no address; write 127.0.0.1:{port} (this host only) "
            f"or 0.0.0.0:{port} (every address)"
        )
    return host.strip("[]"), int(port)


def _listen(value: str | None) -> str | None:
    if value is not None:
        parse_listen(value)
    return value


@dataclass(frozen=True, slots=True)
class DaemonSettings:
    host_id: str = setting(factory=socket.gethostname, description="Names this host's queue.")
    deployment_id: str = setting(
        "",
        check=_deployment_id,
        description="Names the deployment this host belongs to: every host and client of one "
        "deployment sets the same, and a deployment never serves or sends jobs to another's "
        "agents on a shared Redis. Unset: derived from state_dir's path.",
    )
    metrics_listen: str | None = setting(
        "127.0.0.1:9464",
        check=_listen,
        description="host:port for Prometheus (0.0.0.0:PORT for every address); unset = off.",
    )
    shutdown_grace_s: float = setting(30.0, ge=0, description="How long SIGTERM waits for the running job.")
    poll_delay_s: float = setting(
        0.01,
        gt=0,
        description="arq worker poll interval: an idle worker picks up a new job within it "
        "(arq's own 0.5 s default makes every job round trip take half a second).",
    )
    max_jobs: int = setting(
        4,
        ge=1,
        description="Jobs run at once (mutations serialize on the lock; dream and backfill jobs take at most max_jobs - 1).",
    )
    max_idle_stores: int = setting(
        32,
        ge=1,
        description="Agent stores the worker keeps open between jobs, at most (each is a thread and a "
        "connection; the least recently used closes first), so hundreds of agents fit the unit's TasksMax.",
    )
    job_timeout_s: float = setting(3600.0, gt=0, description="A job running longer is cancelled.")
    keep_result_s: int = setting(86_400, ge=1, description="How long job results stay in Redis.")
    redis_retry_max_s: float = setting(30.0, gt=0, description="Longest backoff between Redis reconnects.")
    agent_wait_s: float = setting(
        30.0,
        ge=0,
        description="How long a job waits for its agent when this host's route names the agent but "
        "it is not served yet (its directory away at a start, being found again); then it fails.",
    )
    schedule: bool = setting(
        True, description="Enqueue the scheduled sweeps; off = run only jobs sent by clients."
    )


@dataclass(frozen=True, slots=True)
class RedisAccess:
    """How memoryd logs in to Redis; `redis_url` says where. Submitters (tools that enqueue jobs
    and read their results) and daemons log in as different ACL users (deploy/redis.conf)."""

    username: str | None = setting(
        None, description="ACL user; overrides the user in redis_url (daemons and submitters differ)."
    )
    password_file: Path | None = setting(
        None,
        description="File whose first line is the Redis password; overrides the password in "
        "redis_url (keep it 0600, out of the config).",
    )
    purge_replicas: int | None = setting(
        None,
        ge=0,
        description="Replicas that must hold a purge job (forget, erase, expire) before its enqueue "
        "returns (Redis WAIT); unset = 1 with a redis+sentinel:// URL, 0 otherwise.",
    )
    purge_replica_timeout_ms: int = setting(
        2000,
        ge=1,
        description="How long an enqueue waits for those replicas; then it fails (exit 1), "
        "saying the job is queued but not yet replicated.",
    )

    def replicas_for_purges(self, redis_url: str) -> int:
        if self.purge_replicas is not None:
            return self.purge_replicas
        return 1 if is_sentinel_url(redis_url) else 0


@dataclass(frozen=True, slots=True)
class LockSettings:
    ttl_ms: int = setting(30_000, ge=1000, description="Lease length; renewed at a third of it.")
    wait_s: float = setting(10.0, ge=0, description="How long a writer waits for the workspace lock.")


def _check_redis_url(url: str) -> str:
    if is_sentinel_url(url):
        parse_sentinel_url(url)  # ValueError: the form it lacks, without the password
    return url


def _default_state_dir() -> Path:
    # systemd's StateDirectory= sets $STATE_DIRECTORY; otherwise the XDG location.
    if os.environ.get("STATE_DIRECTORY"):
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    return Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "memoryd"


@dataclass(frozen=True, slots=True)
class Settings:
    state_dir: Path = setting(factory=_default_state_dir, description="memoryd's own state (0700).")
    sessions_root: Path = setting(
        factory=lambda: Path.home() / ".openclaw",
        description="Where agents' session stores live (read-only).",
    )
    redis_url: str = setting(
        "redis://127.0.0.1:6379/0",
        description="redis://, rediss:// (TLS), with user:password for ACL/AUTH; "
        "redis+sentinel://host:port[,host:port...]/<master>[/<db>] for Redis Sentinel.",
        check=_check_redis_url,
    )
    redis: RedisAccess = setting(factory=RedisAccess)
    agents: dict[str, AgentConfig] = setting(factory=dict, description="Per-agent overrides.")
    memory_policy: MemoryPolicy = setting(factory=MemoryPolicy)
    ingest: IngestSettings = setting(factory=IngestSettings)
    dreaming: DreamingSettings = setting(factory=DreamingSettings)
    index: IndexSettings = setting(factory=IndexSettings)
    retention: RetentionSettings = setting(factory=RetentionSettings)
    recall: RecallSettings = setting(factory=RecallSettings)
    daemon: DaemonSettings = setting(factory=DaemonSettings)
    lock: LockSettings = setting(factory=LockSettings)

    @property
    def deployment(self) -> str:
        """`daemon.deployment_id`, or one derived from state_dir's path: the hosts of a failover
        pair mount their shared state at the same path, and two deployments on one machine
        have state directories of their own."""
        if self.daemon.deployment_id:
            return self.daemon.deployment_id
        return "state-" + derivations.path_digest(str(self.state_dir.absolute()))

    def workspace_for(self, agent_id: str) -> Path:
        agent = self.agents.get(agent_id)
        if agent is not None and agent.workspace is not None:
            return agent.workspace
        return self.state_dir / "agents" / agent_id / "workspace"

    def session_source_for(self, agent_id: str) -> str:
        agent = self.agents.get(agent_id)
        return agent.session_source if agent is not None else "auto"


# --- the fields of a section ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SettingField:
    """One key of a section, as validation and the docs generator read it."""

    name: str
    annotation: Any  # the resolved type
    default: Any  # the declared default; dataclasses.MISSING when a factory computes it
    factory: Callable[[], Any] | None
    description: str
    gt: float | None
    ge: float | None
    le: float | None
    check: Callable[[Any], Any] | None


_FIELDS: dict[type, dict[str, SettingField]] = {}


def is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def section_fields(section: type) -> dict[str, SettingField]:
    """A section's keys in declaration order (cached: the types are resolved once)."""
    found = _FIELDS.get(section)
    if found is None:
        hints = typing.get_type_hints(section)
        found = {
            f.name: SettingField(
                name=f.name,
                annotation=hints[f.name],
                default=f.metadata.get("default", f.default),
                factory=None if f.default_factory is dataclasses.MISSING else f.default_factory,
                description=f.metadata.get("description", ""),
                gt=f.metadata.get("gt"),
                ge=f.metadata.get("ge"),
                le=f.metadata.get("le"),
                check=f.metadata.get("check"),
            )
            for f in dataclasses.fields(section)
        }
        _FIELDS[section] = found
    return found


# --- validation (pydantic's lax rules and wording, for the types settings use) -----------------


class _Invalid(Exception):
    def __init__(self, kind: str, msg: str):
        super().__init__(msg)
        self.kind = kind
        self.msg = msg


Errors = list[dict[str, Any]]  # {"loc": (...), "type": ..., "msg": ...}, as pydantic reports them
_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise _Invalid("bool_parsing", "Input should be a valid boolean, unable to interpret input")
    if isinstance(value, int):
        raise _Invalid("bool_parsing", "Input should be a valid boolean, unable to interpret input")
    raise _Invalid("bool_type", "Input should be a valid boolean")


_INT_TEXT = re.compile(r"\s*([+-]?[0-9]+(?:_[0-9]+)*)(?:\.0+)?\s*")
_I64 = 2**63


def _to_int(value: Any) -> int:
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Invalid("finite_number", "Input should be a finite number")
        if not value.is_integer():
            raise _Invalid(
                "int_from_float", "Input should be a valid integer, got a number with a fractional part"
            )
        if not -_I64 < value < _I64:
            raise _Invalid(
                "int_parsing_size", "Unable to parse input string as an integer, exceeded maximum size"
            )
        return int(value)
    if isinstance(value, str):
        match = _INT_TEXT.fullmatch(value)
        if match is None:
            raise _Invalid(
                "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
            )
        return int(match.group(1))
    raise _Invalid("int_type", "Input should be a valid integer")


def _to_float(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            if not value.isascii():
                raise ValueError(value)
            return float(value.strip())
        except ValueError:
            raise _Invalid(
                "float_parsing", "Input should be a valid number, unable to parse string as a number"
            ) from None
    raise _Invalid("float_type", "Input should be a valid number")


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _Invalid("string_type", "Input should be a valid string")


def _to_path(value: Any) -> Path:
    if isinstance(value, str | Path):
        return Path(value)
    raise _Invalid("path_type", "Input is not a valid path for <class 'pathlib.Path'>")


_SCALARS: dict[Any, Callable[[Any], Any]] = {
    bool: _to_bool,
    int: _to_int,
    float: _to_float,
    str: _to_str,
    Path: _to_path,
}


def _literal_message(choices: tuple[Any, ...]) -> str:
    shown = [repr(c) for c in choices]
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
    return f"Input should be {listed}"


class _Failed(Exception):
    """A value had errors (already recorded)."""


def _items(convert: Callable[[Any, tuple[Any, ...]], Any], pairs: Any, loc: tuple[Any, ...]) -> list[Any]:
    """Each (key, item) converted; every failing item recorded before _Failed is raised."""
    out, failed = [], False
    for key, item in pairs:
        try:
            out.append((key, convert(item, (*loc, key))))
        except _Failed:
            failed = True
    if failed:
        raise _Failed
    return out


def _shaped(annotation: Any, value: Any, loc: tuple[Any, ...], errors: Errors) -> Any:
    """A section, list, table or optional value; a scalar otherwise."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if is_section(annotation):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, dict):
            raise _Invalid(
                "model_type", f"Input should be a valid dictionary or instance of {annotation.__name__}"
            )
        return _section(annotation, value, loc, errors)
    if origin is list:
        if not isinstance(value, list | tuple):
            raise _Invalid("list_type", "Input should be a valid list")
        pairs = _items(lambda v, at: _value(args[0], v, at, errors), enumerate(value), loc)
        return [item for _, item in pairs]
    if origin is dict:
        if not isinstance(value, dict):
            raise _Invalid("dict_type", "Input should be a valid dictionary")
        return dict(_items(lambda v, at: _value(args[1], v, at, errors), value.items(), loc))
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _value(inner, value, loc, errors)
    if origin is Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return value
        raise _Invalid("literal_error", _literal_message(args))
    return _SCALARS[annotation](value)


def _value(annotation: Any, value: Any, loc: tuple[Any, ...], errors: Errors) -> Any:
    """`value` as `annotation`; each problem recorded in `errors` (then _Failed)."""
    try:
        return _shaped(annotation, value, loc, errors)
    except _Invalid as exc:
        errors.append({"loc": loc, "type": exc.kind, "msg": exc.msg})
        raise _Failed from None


def _bounded(f: SettingField, value: Any) -> Any:
    if value is None or not isinstance(value, int | float):
        return value
    if f.gt is not None and not value > f.gt:
        raise _Invalid("greater_than", f"Input should be greater than {f.gt!r}")
    if f.ge is not None and not value >= f.ge:
        raise _Invalid("greater_than_equal", f"Input should be greater than or equal to {f.ge!r}")
    if f.le is not None and not value <= f.le:
        raise _Invalid("less_than_equal", f"Input should be less than or equal to {f.le!r}")
    return value


def _section(section: type, data: dict[str, Any], loc: tuple[Any, ...], errors: Errors) -> Any:
    """A section from its table: the declared keys in order, then the unknown ones (pydantic's
    order of errors, which the one-line message keeps)."""
    fields = section_fields(section)
    values: dict[str, Any] = {}
    failed = False
    for name, f in fields.items():
        if name not in data:
            continue
        try:
            value = _value(f.annotation, data[name], (*loc, name), errors)
            value = _bounded(f, value)
            if f.check is not None:
                try:
                    value = f.check(value)
                except ValueError as exc:
                    raise _Invalid("value_error", f"Value error, {exc}") from None
            values[name] = value
        except _Invalid as exc:
            errors.append({"loc": (*loc, name), "type": exc.kind, "msg": exc.msg})
            failed = True
        except _Failed:
            failed = True
    for key in data:
        if key not in fields:
            errors.append(
                {"loc": (*loc, key), "type": "extra_forbidden", "msg": "Extra inputs are not permitted"}
            )
            failed = True
    if failed:
        raise _Failed
    return section(**values)


def validate_settings(data: dict[str, Any]) -> tuple[Settings | None, Errors]:
    """Settings from merged tables, or None and every problem found."""
    errors: Errors = []
    try:
        return _section(Settings, data, (), errors), errors
    except _Failed:
        return None, errors


def resolve_config_path(cli_path: str | os.PathLike[str] | None) -> Path | None:
    if cli_path:
        return Path(cli_path)
    env = os.environ.get("MEMORYD_CONFIG")
    return Path(env) if env else None


ENV_PREFIX = "MEMORYD_"
ENV_DELIMITER = "__"


def _keys_at(path: tuple[str, ...]) -> list[str]:
    """The keys a config table at `path` may hold (empty where any key goes, or none)."""
    annotation = _annotation_at(path)
    return list(section_fields(annotation)) if is_section(annotation) else []


def _suggest(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The nearest valid key path: each unknown part replaced by its closest known key."""
    out: list[str] = []
    for part in path:
        known = _keys_at(tuple(out))
        if not known or part in known:
            out.append(part)
            continue
        close = closest(part, known)
        if close is None:
            return None
        out.append(close)
    return tuple(out) if tuple(out) != path else None


def _env_name(path: tuple[str, ...]) -> str:
    return ENV_PREFIX + ENV_DELIMITER.join(p.upper() for p in path)


def _env_vars() -> dict[tuple[str, ...], str]:
    """Each MEMORYD_* variable that names a nested key (MEMORYD_<SECTION>__<KEY>), by key path."""
    found: dict[tuple[str, ...], str] = {}
    for name in os.environ:
        if name.upper().startswith(ENV_PREFIX) and ENV_DELIMITER in name:
            found[tuple(name[len(ENV_PREFIX) :].lower().split(ENV_DELIMITER))] = name
    return found


def _annotation_at(path: tuple[str, ...]) -> Any:
    annotation: Any = Settings
    for part in path:
        if is_section(annotation):
            found = section_fields(annotation).get(part)
            if found is None:
                return None
            annotation = found.annotation
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]
        else:
            return None
    return annotation


def _env_value(path: tuple[str, ...], raw: str) -> Any:
    """A list, table or section comes as JSON; a scalar as the text pydantic then converts."""
    annotation = _annotation_at(path)
    complex_value = typing.get_origin(annotation) in (list, dict) or is_section(annotation)
    if complex_value:
        try:
            import json  # only for a table or list set in the environment

            return json.loads(raw)
        except ValueError:
            return raw  # pydantic names the variable and what it expected
    return raw


def _env_data() -> dict[str, Any]:
    """The settings MEMORYD_* variables give, as nested tables (MEMORYD_INGEST__INTERVAL_S=5 is
    {"ingest": {"interval_s": "5"}}). A single-word variable that names no setting (MEMORYD_CONFIG,
    MEMORYD_FAILPOINTS) is not a setting."""
    data: dict[str, Any] = {}
    for name, raw in os.environ.items():
        if not name.upper().startswith(ENV_PREFIX):
            continue
        path = tuple(name[len(ENV_PREFIX) :].lower().split(ENV_DELIMITER))
        if path[0] not in section_fields(Settings):
            continue  # reported by _describe when it is nested (a mistyped section)
        table = data
        for part in path[:-1]:
            nested = table.setdefault(part, {})
            if not isinstance(nested, dict):
                break
            table = nested
        else:
            table[path[-1]] = _env_value(path, raw)
    return data


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _unknown(path: tuple[str, ...], quote: bool) -> str:
    def show(p: tuple[str, ...]) -> str:
        return repr(".".join(p)) if quote else _env_name(p)

    suggestion = _suggest(path)
    return show(path) + (f" (did you mean {show(suggestion)}?)" if suggestion else "")


def _describe(errors: list[Any], origin: str) -> str:
    """Every problem in one line: unknown keys by where they came from (the file or the
    environment, each variable by name, with the nearest valid key), then bad values."""
    env = _env_vars()
    file_unknown: list[tuple[str, ...]] = []
    env_unknown = [path for path in env if path[0] not in section_fields(Settings)]
    problems: list[str] = []
    for error in errors:
        path = tuple(str(p) for p in error["loc"])
        from_env = path in env  # the environment overrides the file
        if error["type"] == "extra_forbidden":
            (env_unknown if from_env else file_unknown).append(path)
        elif from_env:
            problems.append(f"environment: {env[path]}: {error['msg']}")
        else:
            problems.append(f"{origin}: {'.'.join(path) or '(root)'}: {error['msg']}")
    parts = []
    if file_unknown:
        noun = "unknown key" if len(file_unknown) == 1 else "unknown keys"
        parts.append(f"{origin}: {noun} " + ", ".join(_unknown(p, quote=True) for p in file_unknown))
    if env_unknown:
        noun = "unknown variable" if len(env_unknown) == 1 else "unknown variables"
        parts.append(f"environment: {noun} " + ", ".join(_unknown(p, quote=False) for p in env_unknown))
    return "; ".join(parts + problems)


def load_settings(config_path: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Load and validate settings; raise ConfigError with one line naming the file and key."""
    path = resolve_config_path(config_path)
    data: dict[str, Any] = {}
    origin = "defaults"
    if path is not None:
        origin = str(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read config: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    # Precedence: the file, then the environment, then the caller's overrides (key by key).
    merged = _deep_merge(_deep_merge(data, _env_data()), overrides)
    settings, errors = validate_settings(merged)
    if settings is None:
        raise ConfigError(_describe(errors, origin))
    problem = _describe([], origin)  # a variable for a section that does not exist
    if problem:
        raise ConfigError(problem)
    return settings


def _jsonable(value: Any) -> Any:
    if is_section(type(value)):
        return {name: _jsonable(getattr(value, name)) for name in section_fields(type(value))}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def settings_as_dict(settings: Settings) -> dict[str, Any]:
    """The settings as JSON values, keys in declaration order (`memoryd config check`)."""
    return _jsonable(settings)  # type: ignore[no-any-return]
