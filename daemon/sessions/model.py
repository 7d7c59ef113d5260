"""What a session source tells memoryd, as frozen values. Sources differ (sessions.json +
JSONL files, an OpenClaw agent database); everything downstream sees only these types."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

SessionKind = Literal["interactive", "cron", "heartbeat", "subagent", "unknown"]
SESSION_KINDS: tuple[str, ...] = ("interactive", "cron", "heartbeat", "subagent", "unknown")


@dataclass(frozen=True, slots=True)
class Participant:
    actor_id: str
    namespace: tuple[tuple[str, Any], ...] = ()  # identity minus `id`, as sorted items

    def identity(self) -> dict[str, Any]:
        """`{...namespace, id}` — the shape the forget report lists."""
        return {**dict(self.namespace), "id": self.actor_id}


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One live session window (a session id under a session key)."""

    agent_id: str
    session_id: str
    session_key: str | None
    session_kind: SessionKind
    chat_type: str | None = None
    channel: str | None = None
    account_id: str | None = None
    hook_source: str | None = None  # hookExternalContentSource
    participants: tuple[Participant, ...] = ()
    created_at: int | None = None  # Unix ms
    updated_at: int | None = None  # Unix ms
    generated_by_narrative: bool = False  # internal dreaming-narrative sessions: never ingested
    locator: str = ""  # source-specific: a file path, or a database session id

    @property
    def session_path(self) -> str:
        """Stable path used in corpus lines and checkpoint state keys: sessions/<agent>/<id>."""
        return f"sessions/{self.agent_id}/{self.session_id}"


@dataclass(frozen=True, slots=True)
class ArchiveInfo:
    """A retained reset/deleted transcript generation. Never dreamed; selectable by id or key."""

    agent_id: str
    session_id: str
    session_key: str | None
    reason: Literal["reset", "deleted"]
    created_at: int | None  # Unix ms (archive time)
    locator: str = ""
    name: str = ""


class Fingerprint(NamedTuple):
    """What a stat tells: enough to decide 'unchanged' without reading the transcript.
    (A NamedTuple: a sweep makes one per session, and a tuple is built several times faster.)"""

    mtime_ms: int
    size: int


@dataclass(frozen=True, slots=True, weakref_slot=True)
class SessionListing:
    sessions: tuple[SessionInfo, ...]
    errors: tuple[str, ...] = field(default=())  # one line per unreadable/invalid record, skipped


class SessionSource(Protocol):
    """Read-only access to one agent's sessions."""

    agent_id: str
    kind: str  # "json" | "openclaw"

    def list_sessions(self) -> SessionListing:
        """Live session windows from metadata alone; no transcript is opened."""
        ...

    def list_selectable(
        self, refs: Collection[str], actors: Collection[str], hook_sources: Collection[str]
    ) -> SessionListing:
        """What a forget selection reads instead of `list_sessions`: every live window whose id
        or key is in `refs`, whose key an actor of `actors` took part in, or whose hook source
        may be one of `hook_sources`, and every internal window (cron, heartbeat, dreaming
        narrative: a forget purges their stale chunks). Others may come along, each as
        `list_sessions` lists it; none of those is left out."""
        ...

    def list_archives(self) -> list[ArchiveInfo]: ...

    def fingerprint(self, session: SessionInfo) -> Fingerprint | None:
        """A stat of the transcript (None if it does not exist). Never reads its content."""
        ...

    def revision(self) -> str | None:
        """A value that changes whenever anything the source lists could have changed, read
        without listing (None: the source cannot tell; ask every fingerprint)."""
        ...

    def unchanged_since(self, revision: str) -> bool:
        """Whether nothing the source lists changed since it was at `revision`."""
        ...

    def fingerprints(self, sessions: Sequence[SessionInfo]) -> dict[str, Fingerprint]:
        """session id -> `fingerprint` of each session whose transcript exists, read at once
        (one read transaction where the source is a database)."""
        ...

    def open_transcript(self, session: SessionInfo | ArchiveInfo) -> AbstractContextManager[Iterator[bytes]]:
        """Yield the transcript's raw lines (one JSON event each, without the newline)."""
        ...

    def reading(self) -> AbstractContextManager[None]:
        """A block in which this thread opens many transcripts (an index run): a database source
        reads them all from one snapshot instead of opening a connection for each."""
        ...

    def transcript_location(self, session: SessionInfo) -> Path | None:
        """The transcript file, where the source has one (for messages and tests)."""
        ...


class OversizedLine(bytes):
    """Stands in for a transcript line longer than the cap; holds no content, only its size."""

    size: int

    def __new__(cls, size: int) -> OversizedLine:
        obj = super().__new__(cls, b"")
        obj.size = size
        return obj
