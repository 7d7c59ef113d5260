"""Settings: built-in defaults, then the TOML file, then MEMORYD_* environment variables.

The file comes from `memoryd --config PATH`, else `$MEMORYD_CONFIG`, else none (defaults only).
Nested keys take `__` in the environment: MEMORYD_DREAMING__TIMEZONE=Europe/Berlin.
Every section forbids unknown keys, so a typo is an error that names the key, not a silent default.
"""

from __future__ import annotations

import difflib
import json
import os
import socket
import tomllib
import typing
import zoneinfo
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from daemon.errors import ConfigError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _clean_list(values: list[str]) -> list[str]:
    # The reference trims configured values and drops empty ones; metadata values are not trimmed.
    return [v.strip() for v in values if v.strip()]


class ExcludeSessions(Section):
    """Admission policy lists. Exact, case-sensitive matches against recorded session metadata."""

    hook_external_content_sources: list[str] = Field(
        default_factory=list, description="Hook sources to keep out (gmail, email, webhook)."
    )
    channels: list[str] = Field(
        default_factory=list, description="Channel/plugin ids to keep out (not room ids)."
    )
    chat_types: list[str] = Field(
        default_factory=list, description="Chat types to keep out (direct, group, channel)."
    )

    _clean = field_validator("hook_external_content_sources", "channels", "chat_types")(
        lambda cls, v: _clean_list(v)
    )


class MemoryPolicy(Section):
    exclude_sessions: ExcludeSessions = Field(default_factory=ExcludeSessions)


class AgentConfig(Section):
    workspace: Path | None = Field(
        default=None, description="The agent's workspace; default state_dir/agents/<id>/workspace."
    )
    session_source: Literal["auto", "json", "openclaw"] = Field(
        default="auto", description="auto: the OpenClaw agent database when present, else sessions.json."
    )


class IngestSettings(Section):
    interval_s: float = Field(default=300.0, gt=0, description="Seconds between scheduled ingest sweeps.")
    max_messages_per_sweep: int = Field(default=240, ge=1, description="Messages staged per sweep at most.")
    max_messages_per_file: int = Field(
        default=80, ge=1, description="Messages staged per session per sweep at most."
    )
    watch: bool = Field(
        default=True,
        description="Watch the sessions (inotify) and sweep as soon as a change settles; the interval "
        "sweeps stay as the safety net. Off with daemon.schedule = false.",
    )
    watch_settle_ms: int = Field(
        default=50, ge=1, le=10_000, description="A change is swept once no write followed it for this long."
    )
    workers: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Processes that scan a large first sweep in parallel; 0 = the number of cores (at "
        "most 8), 1 = scan in the sweep's own process. Sweeps that read under 1 MiB, or whose caps "
        "could cut a session short, are always scanned in process. The pool pays for long sweeps; on a "
        "host whose cores are busy, sweeps of a few tens of MB are faster with 1.",
    )


class ConsolidationSettings(Section):
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint; unset = append-only promotion."
    )
    model: str = Field(default="gpt-4o-mini", description="Model name sent to the endpoint.")
    api_key_env: str = Field(
        default="MEMORYD_CONSOLIDATION_API_KEY", description="Env var holding the API key."
    )
    timeout_s: float = Field(default=60.0, gt=0, description="Model call timeout.")


class DreamingSettings(Section):
    enabled: bool = Field(default=True, description="Run dreaming sweeps on the schedule.")
    timezone: str = Field(default="UTC", description="IANA zone used to bucket days.")
    interval_s: float = Field(default=3600.0, gt=0, description="Seconds between scheduled dreaming sweeps.")
    light_limit: int = Field(default=100, ge=0, description="Candidates in the Light Sleep block at most.")
    rem_limit: int = Field(default=10, ge=0, description="REM truths limit (capped at 3 per the reference).")
    lookback_days: int = Field(default=7, ge=1, description="Days of staged entries light/REM consider.")
    dedupe_similarity: float = Field(default=0.9, ge=0, le=1, description="Light dedupe similarity.")
    min_pattern_strength: float = Field(default=0.75, ge=0, le=1, description="REM theme strength gate.")
    min_score: float = Field(default=0.75, ge=0, description="Deep promotion minimum score.")
    min_recall_count: int = Field(default=3, ge=0, description="Deep promotion minimum recall count.")
    min_unique_queries: int = Field(default=3, ge=0, description="Deep promotion minimum distinct queries.")
    recency_half_life_days: float = Field(default=14.0, gt=0, description="Recency half-life for ranking.")
    max_age_days: float = Field(
        default=30.0, gt=0, description="Staged entries older than this are not promoted."
    )
    max_promoted_snippet_tokens: int = Field(
        default=160, ge=1, description="Promoted text budget (x4 chars)."
    )
    max_prior_entry_loss_fraction: float = Field(
        default=0.25, ge=0, le=1, description="Consolidation loss guard."
    )
    memory_file_max_chars: int = Field(default=10_000, ge=1000, description="MEMORY.md size budget.")
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            zoneinfo.ZoneInfo(v)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {v!r}") from exc
        return v


class EmbeddingSettings(Section):
    provider: Literal["none", "hashing", "openai"] = Field(default="none", description="none = FTS only.")
    dims: int = Field(default=256, ge=8, le=4096, description="Vector size of the hashing embedder.")
    base_url: str | None = Field(default=None, description="OpenAI-compatible embeddings endpoint.")
    model: str = Field(default="text-embedding-3-small", description="Embedding model name.")
    api_key_env: str = Field(default="MEMORYD_EMBEDDING_API_KEY", description="Env var holding the API key.")
    batch_size: int = Field(default=64, ge=1, description="Texts per embedding request.")
    timeout_s: float = Field(default=30.0, gt=0, description="Timeout of one embedding request.")
    max_retries: int = Field(default=3, ge=0, description="Retries of a failed embedding request (429/5xx).")


class IndexSettings(Section):
    interval_s: float = Field(default=300.0, gt=0, description="Seconds between scheduled index syncs.")
    sources: list[Literal["memory", "sessions"]] = Field(default=["memory"], description="What to index.")
    chunk_tokens: int = Field(default=400, ge=16, description="Chunk size in tokens (~4 chars each).")
    chunk_overlap: int = Field(default=80, ge=0, description="Chunk overlap in tokens.")
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)


class RetentionSettings(Section):
    tenant: str = Field(default="default", description="Tenant that ingested sessions belong to.")
    interval_s: float = Field(default=3600.0, gt=0, description="Seconds between retention sweeps.")
    expired_purge_after_days: int | None = Field(
        default=None, ge=0, description="Purge expired data this many days after expiry; unset = never."
    )
    erase_result_ttl_s: int = Field(
        default=300, ge=1, description="Erase job arguments/results kept in Redis."
    )
    agent_participant_kinds: list[str] = Field(
        default=["agent", "bot", "assistant"],
        description="Participant senderKind/type values that mark an agent, not a user, when a session "
        "is mapped to its scope (user = the first other participant).",
    )


class DaemonSettings(Section):
    host_id: str = Field(default_factory=socket.gethostname, description="Names this host's queue.")
    metrics_listen: str | None = Field(
        default="127.0.0.1:9464", description="host:port for Prometheus; unset = off."
    )
    shutdown_grace_s: float = Field(
        default=30.0, ge=0, description="How long SIGTERM waits for the running job."
    )
    poll_delay_s: float = Field(
        default=0.01,
        gt=0,
        description="arq worker poll interval: an idle worker picks up a new job within it "
        "(arq's own 0.5 s default makes every job round trip take half a second).",
    )
    max_jobs: int = Field(
        default=4,
        ge=1,
        description="Jobs run at once (mutations serialize on the lock; dream and backfill jobs take at most max_jobs - 1).",
    )
    job_timeout_s: float = Field(default=3600.0, gt=0, description="A job running longer is cancelled.")
    keep_result_s: int = Field(default=86_400, ge=1, description="How long job results stay in Redis.")
    redis_retry_max_s: float = Field(
        default=30.0, gt=0, description="Longest backoff between Redis reconnects."
    )
    schedule: bool = Field(
        default=True, description="Enqueue the scheduled sweeps; off = run only jobs sent by clients."
    )


class LockSettings(Section):
    ttl_ms: int = Field(default=30_000, ge=1000, description="Lease length; renewed at a third of it.")
    wait_s: float = Field(default=10.0, ge=0, description="How long a writer waits for the workspace lock.")


def _default_state_dir() -> Path:
    # systemd's StateDirectory= sets $STATE_DIRECTORY; otherwise the XDG location.
    if os.environ.get("STATE_DIRECTORY"):
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    return Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "memoryd"


class Settings(Section):
    state_dir: Path = Field(default_factory=_default_state_dir, description="memoryd's own state (0700).")
    sessions_root: Path = Field(
        default_factory=lambda: Path.home() / ".openclaw",
        description="Where agents' session stores live (read-only).",
    )
    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="redis://, rediss:// (TLS), with user:password for ACL/AUTH.",
    )
    agents: dict[str, AgentConfig] = Field(default_factory=dict, description="Per-agent overrides.")
    memory_policy: MemoryPolicy = Field(default_factory=MemoryPolicy)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    dreaming: DreamingSettings = Field(default_factory=DreamingSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    daemon: DaemonSettings = Field(default_factory=DaemonSettings)
    lock: LockSettings = Field(default_factory=LockSettings)

    def workspace_for(self, agent_id: str) -> Path:
        agent = self.agents.get(agent_id)
        if agent is not None and agent.workspace is not None:
            return agent.workspace
        return self.state_dir / "agents" / agent_id / "workspace"

    def session_source_for(self, agent_id: str) -> str:
        agent = self.agents.get(agent_id)
        return agent.session_source if agent is not None else "auto"


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
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _suggest(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The nearest valid key path: each unknown part replaced by its closest known key."""
    out: list[str] = []
    for part in path:
        known = _keys_at(tuple(out))
        if not known or part in known:
            out.append(part)
            continue
        close = difflib.get_close_matches(part, known, n=1, cutoff=0.6)
        if not close:
            return None
        out.append(close[0])
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
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(part)
            if field is None:
                return None
            annotation = field.annotation
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]
        else:
            return None
    return annotation


def _env_value(path: tuple[str, ...], raw: str) -> Any:
    """A list, table or section comes as JSON; a scalar as the text pydantic then converts."""
    annotation = _annotation_at(path)
    complex_value = typing.get_origin(annotation) in (list, dict) or (
        isinstance(annotation, type) and issubclass(annotation, BaseModel)
    )
    if complex_value:
        try:
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
        if path[0] not in Settings.model_fields:
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
    env_unknown = [path for path in env if path[0] not in Settings.model_fields]
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
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc.errors(), origin)) from None
    problem = _describe([], origin)  # a variable for a section that does not exist
    if problem:
        raise ConfigError(problem)
    return settings


def settings_as_dict(settings: Settings) -> dict[str, Any]:
    return settings.model_dump(mode="json")
