"""Secrets never enter memory: the redaction rule (daemon/sessions/redact.py) on a corpus of
credentials and near misses, and on generated text with secrets at any position, through the
exporter every transcript reader uses."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.constants import SNIPPET_MAX_CHARS
from memoryd.sessions.redact import MASK, redact_secrets
from memoryd.sessions.transcript import Carry, collapse_ws, export_line
from tests.secret_corpus import NEAR_MISSES, SECRETS


@pytest.mark.parametrize("secret", SECRETS, ids=[s.form for s in SECRETS])
def test_each_secret_form_is_masked(secret) -> None:
    assert redact_secrets(secret.text) == secret.masked
    said = f"Note for later: {secret.text} and keep it safe."
    out = redact_secrets(said)
    assert secret.value not in out and MASK in out
    assert out.startswith("Note for later: ") and out.endswith(" and keep it safe.")


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_kept_as_written(text) -> None:
    assert redact_secrets(text) == text
    assert redact_secrets(f"We talked about {text} today.") == f"We talked about {text} today."


def test_redacting_twice_changes_nothing() -> None:
    for secret in SECRETS:
        once = redact_secrets(secret.text)
        assert redact_secrets(once) == once


def _line(text: str) -> bytes:
    return orjson.dumps(
        {
            "type": "message",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": text}],
                "timestamp": 1_760_000_000_000,
                "__openclaw": {"senderIsOwner": True},
            },
        }
    )


def test_the_exporter_masks_what_it_exports() -> None:
    out = export_line(_line("my key: OPENAI_API_KEY=sk-Zq8vN3rT5wY7uK1mP9sL2dF4gH6jA0cX ok"), 1, Carry())
    assert out is not None and not isinstance(out, str)
    assert out.text == "User: my key: OPENAI_API_KEY=*** ok"


# Words and punctuation of ordinary messages (no credential shape of their own).
_WORDS = st.lists(
    st.sampled_from(
        [
            "the",
            "a",
            "plan",
            "meeting",
            "Friday",
            "deploy:",
            "harbour",
            "rota",
            "nora@example.com",
            "10:30",
            "x=1",
            "see",
            "https://example.com/a",
            "task-force",
            "sketch",
            "skip=3",
            "(",
            ")",
            ",",
            ".",
            ";",
            "!",
            "?",
            "\n",
            "\t",
            "emoji-🙂",
            "naïve",
        ]
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(before=_WORDS, after=_WORDS, secret=st.sampled_from(SECRETS), sep=st.sampled_from([" ", "\n", "  "]))
def test_a_secret_anywhere_in_any_text_is_masked(before, after, secret, sep) -> None:
    text = " ".join(before) + sep + secret.text + sep + " ".join(after)
    assert secret.value not in redact_secrets(text)
    # Through the exporter, cut to the snippet length as ingestion cuts it: no piece of the
    # secret (8 characters or more) survives, wherever the cut falls.
    out = export_line(_line(text), 1, Carry(), SNIPPET_MAX_CHARS)
    assert out is not None and not isinstance(out, str)
    snippet = out.text[:SNIPPET_MAX_CHARS]
    value = collapse_ws(secret.value)
    assert not any(value[i : i + 8] in snippet for i in range(max(1, len(value) - 7)))


@settings(max_examples=200, deadline=None)
@given(words=_WORDS)
def test_ordinary_text_is_never_changed(words) -> None:
    text = " ".join(words)
    assert redact_secrets(text) == text


def test_the_verifier_looks_for_a_message_as_it_was_stored_masked() -> None:
    # A forgotten message that held a credential was stored masked; its stored form is what a
    # purge must remove, so the verifier's needles include it.
    from memoryd.retention.needles import VerifySubject, compile_needles

    said = "OPENAI_API_KEY=sk-Zq8vN3rT5wY7uK1mP9sL2dF4gH6jA0cX is the harbour deploy key"
    needles = compile_needles(VerifySubject(contents=(said,)))
    stored = "[main/sessions/main/s1#L1] User: " + redact_secrets(said)
    assert needles.hits(stored) >= 1
