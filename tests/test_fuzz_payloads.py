"""Hostile job payloads: random bytes on the wire, pickles, deep JSON, huge numbers, wrong types,
unknown fields, lone surrogates and path tricks in every field of every job's request model.
Each ends as a validated request whose ids are safe, or one JobPayloadError line naming the job;
an accepted request always serializes to JSON (its deterministic job id can be computed).
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memoryd.errors import JobPayloadError, UsageError
from memoryd.ids import session_id_problem, validate_agent_id
from memoryd.job_ids import canonical_json
from memoryd.ops import forget
from memoryd.ops.registry import OPS, op_named
from memoryd.runtime.wire import deserialize, serialize

EXAMPLES = 300
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

JOBS = sorted(op.contract.name for op in OPS)
FIELDS = [
    "agent",
    "sessions",
    "participants",
    "hook_sources",
    "since",
    "dry_run",
    "scope",
    "allow_partial",
    "request_id",
    "force",
    "phases",
    "from_day",
    "to_day",
    "limit_days",
    "mode",
    "__class__",
    "extra",
]
TRICKS = [
    "main",
    "../main",
    "..",
    "main/../x",
    "/etc",
    "a\\b",
    "x\x00",
    "a\ud800",
    "\udcff",
    " main",
    "main\n",
    "tenant:t",
    "user:u",
    "session:s",
    "object:o",
    "user:../u",
    "session:a/b",
    "2026-08-25",
    "9999-99-99",
    "1e999",
    "-1",
    "",
    "light",
    "apply",
    "preview",
    "x" * 700,
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=16)
    | st.sampled_from(TRICKS)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
payloads = st.one_of(
    values,
    st.dictionaries(st.sampled_from(FIELDS), values, max_size=6),
    st.dictionaries(st.sampled_from(FIELDS), st.sampled_from(TRICKS), max_size=4).map(
        lambda d: {"agent": "main", **d}
    ),
)


def _check_accepted(job: str, request) -> None:
    data = request.model_dump(mode="json")
    canonical_json([job, data])  # JSON-serializable: no surrogates, no huge ints orjson refuses
    serialize({"a": [data]})
    agent = data.get("agent")
    if agent is not None:
        validate_agent_id(agent)
    for sid in data.get("sessions", []):
        assert session_id_problem(sid) is None


@FUZZ
@given(job=st.sampled_from(JOBS), payload=payloads)
@example(job="expire", payload={"\n": None})  # an unknown field whose name is a line break
def test_every_job_payload_validates_or_fails_with_one_line_naming_the_job(job, payload):
    try:
        request = op_named(job).contract.parse(payload)
    except JobPayloadError as exc:
        message = str(exc)
        assert message.startswith(f"{job}:") and "\n" not in message
        return
    _check_accepted(job, request)


@FUZZ
@given(
    payload=st.dictionaries(
        st.sampled_from(["agent", "sessions", "participants", "hook_sources", "since"]),
        st.one_of(
            st.sampled_from(TRICKS),
            st.lists(st.one_of(st.sampled_from(TRICKS), st.text(max_size=10)), max_size=3),
        ),
        max_size=5,
    )
)
def test_forget_requests_from_the_cli_or_client_are_safe_or_a_usage_error(payload):
    try:
        request = forget.OP.contract.parse(payload)
    except UsageError as exc:
        assert str(exc).startswith("forget: ") and "\n" not in str(exc)
        return
    _check_accepted("forget", request)


@FUZZ
@given(
    raw=st.one_of(
        st.binary(max_size=120),
        st.sampled_from(
            [b"[" * 3000, b'{"a": 1e999}', b'{"a": "\\ud800"}', b"\x80\x04K\x01.", b'{"f": "forget"}\x00']
        ),
    )
)
def test_job_bytes_decode_as_a_json_object_or_raise_value_error(raw):
    try:
        value = deserialize(raw)
    except ValueError:
        return
    assert isinstance(value, dict)


@pytest.mark.parametrize("obj", [{"f": "forget", "a": [{"agent": "main"}]}, ("forget",), object()])
def test_a_pickled_job_is_never_unpickled(obj):
    """Regardless of what a pickle would build, the wire format only ever parses JSON."""
    try:
        raw = pickle.dumps(obj)
    except (TypeError, pickle.PicklingError):
        raw = b"\x80\x05\x95"
    with pytest.raises(ValueError):
        deserialize(raw)


def test_a_lone_surrogate_in_a_selector_is_a_usage_error_not_a_crash_at_enqueue():
    """Regression: `memoryd forget --session` with invalid UTF-8 in argv (a lone surrogate after
    Python's decoding) passed validation, then failed serializing the job id with a TypeError."""
    for payload in (
        {"agent": "main", "sessions": ["s\udcff"]},
        {"agent": "main", "participants": ["\ud800"]},
        {"agent": "main", "hook_sources": ["gmail\udc80"]},
    ):
        with pytest.raises(UsageError, match="surrogate"):
            forget.OP.contract.parse(payload)
