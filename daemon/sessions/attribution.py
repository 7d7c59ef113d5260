"""Who sent a transcript turn: the one attribution rule (DESIGN §5, "Fail closed").

A user turn is attributed when its `__openclaw.senderId` is a string with at least one
non-whitespace character; missing, empty, whitespace-only or non-string senders make it
*unattributed*. Ingestion, the transcript index, backfill, erasure and the verifier all ask
this module, so a turn is never attributed for one of them and unattributed for another.

A sender id is opaque data otherwise: it is never trimmed or normalised (`"nadia "` and
`"nadia"` are two senders), so an odd id is compared as stored.
"""

from __future__ import annotations

from typing import Any


def sender_of(meta: Any) -> str | None:
    """The sender named by a message's `__openclaw` metadata, or None when the turn is
    unattributed (see the module doc)."""
    if type(meta) is not dict:
        return None
    sender = meta.get("senderId")
    if type(sender) is not str or not sender or sender.isspace():
        return None
    return sender
