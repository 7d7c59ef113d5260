"""A sweep's batches grow with the store (ingest/batch.py `batch_limit`), within their bounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoryd.constants import INGEST_FLUSH_MESSAGES, INGEST_FLUSH_MESSAGES_MAX, INGEST_FLUSH_STORE_DIVISOR
from memoryd.ingest.batch import batch_limit


@given(st.integers(min_value=0, max_value=10**10), st.integers(min_value=0, max_value=10**10))
def test_a_batch_never_shrinks_as_the_store_grows_and_stays_within_its_bounds(a: int, b: int) -> None:
    small, large = sorted((a, b))
    assert INGEST_FLUSH_MESSAGES <= batch_limit(small) <= batch_limit(large) <= INGEST_FLUSH_MESSAGES_MAX


def test_a_small_store_keeps_the_least_batch_and_a_large_one_the_most() -> None:
    assert batch_limit(0) == INGEST_FLUSH_MESSAGES
    assert batch_limit(INGEST_FLUSH_MESSAGES * INGEST_FLUSH_STORE_DIVISOR) == INGEST_FLUSH_MESSAGES
    assert batch_limit(80_000) == 80_000 // INGEST_FLUSH_STORE_DIVISOR
    assert batch_limit(10**9) == INGEST_FLUSH_MESSAGES_MAX
