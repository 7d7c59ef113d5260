"""The text that survives an erasure (I/O: reads transcripts), so its pieces are not residue.

A window of 16 characters ("Remember that th") is often said by two people. The verifier looks
for every window of the erased messages (retention/pieces.py), so a window the surviving
sessions also hold may stay through them: every other session of every agent (transcripts are
never deleted by memoryd), and the other participants' turns of a shared session whose subject's
turns were taken out. The same holds for ids: a member "nadia.b" of a surviving group holds the
erased "nadia" inside hers. The erasure hands both to the verifier as the subject's `shared` text
and `shared_ids`; they are read when the verifier runs and never journaled (the journal keeps the
subject only).
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.agents import agents_with_state
from memoryd.retention.contributions import Voices, session_voices
from memoryd.retention.plan import SessionTarget
from memoryd.sessions.model import ArchiveInfo, SessionInfo
from memoryd.sessions.source import session_source_for
from memoryd.settings import Settings


def surviving_voices(
    settings: Settings, erased: Sequence[SessionTarget], subject_texts: Sequence[str]
) -> Voices:
    """Every message of every session the erasure leaves, and of each separated session every
    message that is not one of `subject_texts`; the ids all of them name (an id of the subject's
    that is part of a longer one of theirs is theirs)."""
    whole = {(t.agent_id, t.session_id) for t in erased if not t.separable}
    separated = {(t.agent_id, t.session_id) for t in erased if t.separable}
    own = set(subject_texts)
    voices = Voices([], set())
    for agent in agents_with_state(settings):
        try:
            source = session_source_for(settings, agent)
            every: list[SessionInfo | ArchiveInfo] = [
                *source.list_sessions().sessions,
                *source.list_archives(),
            ]
        except OSError:
            continue  # no sessions directory: no transcript survives there
        kept = [s for s in every if (agent, s.session_id) not in whole]
        apart = [s for s in kept if (agent, s.session_id) in separated]
        whole_kept = session_voices(settings, [s for s in kept if (agent, s.session_id) not in separated])
        parted = session_voices(settings, apart)
        voices.texts.extend(whole_kept.texts)
        voices.texts.extend(t for t in parted.texts if t not in own)
        voices.ids.update(whole_kept.ids | parted.ids)
    return voices
