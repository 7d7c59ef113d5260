"""Pure sweep decisions: what a stat and a checkpoint say about the next scan, and the caps."""

from __future__ import annotations

from memoryd.ingest.plan import ScanAction, excluded_checkpoint_needs_write, file_cap, per_file_cap, plan_scan
from memoryd.sessions.model import Fingerprint
from memoryd.store.checkpoints import Checkpoint


def checkpoint(**kw: object) -> Checkpoint:
    base: dict[str, object] = dict(
        state_key="main:sessions/main/s",
        agent_id="main",
        session_id="s",
        session_key="k",
        session_path="sessions/main/s",
        mtime_ms=100,
        size=500,
        content_hash="abc",
        line_count=7,
        last_content_line=5,
        at_end=True,
        carry="owner",
        excluded_reason=None,
        updated_at=1,
    )
    base.update(kw)
    return Checkpoint(**base)  # type: ignore[arg-type]


def test_a_missing_transcript_is_absent() -> None:
    assert plan_scan(checkpoint(), None).action is ScanAction.ABSENT


def test_no_checkpoint_or_an_excluded_one_means_a_full_scan() -> None:
    fp = Fingerprint(100, 500)
    assert plan_scan(None, fp).action is ScanAction.RESCAN
    assert (
        plan_scan(checkpoint(content_hash="", excluded_reason="channel:discord"), fp).action
        is ScanAction.RESCAN
    )


def test_same_stat_and_a_finished_cursor_is_unchanged() -> None:
    assert plan_scan(checkpoint(), Fingerprint(100, 500)).action is ScanAction.UNCHANGED


def test_a_grown_file_resumes_from_the_cursor_with_the_prefix_hash() -> None:
    plan = plan_scan(checkpoint(), Fingerprint(150, 900))
    assert (plan.action, plan.start_line, plan.expected_hash, plan.produced, plan.carry) == (
        ScanAction.RESUME,
        7,
        "abc",
        5,
        "owner",
    )


def test_a_cursor_left_short_by_a_cap_resumes_even_with_the_same_stat() -> None:
    assert plan_scan(checkpoint(at_end=False), Fingerprint(100, 500)).action is ScanAction.RESUME


def test_a_shrunk_file_is_a_rewrite() -> None:
    plan = plan_scan(checkpoint(), Fingerprint(150, 400))
    assert plan.action is ScanAction.RESCAN and plan.rewrite


def test_per_file_cap_matches_the_reference_formula() -> None:
    assert [per_file_cap(n, 240, 80) for n in (0, 1, 3, 4, 10, 20, 100)] == [80, 80, 80, 60, 24, 12, 12]
    assert per_file_cap(5, 10**9, 10**9) == 200_000_000
    assert [file_cap(24, r) for r in (240, 10, 0)] == [24, 10, 1]


def test_an_excluded_checkpoint_is_written_once_per_reason() -> None:
    cp = checkpoint(content_hash="", excluded_reason="chatType:group", mtime_ms=9)
    assert not excluded_checkpoint_needs_write(cp, "chatType:group", 9)
    assert excluded_checkpoint_needs_write(cp, "forgotten", 9)
    assert excluded_checkpoint_needs_write(cp, "chatType:group", 10)
    assert excluded_checkpoint_needs_write(checkpoint(), "chatType:group", 100)
    assert excluded_checkpoint_needs_write(None, "chatType:group", 0)
