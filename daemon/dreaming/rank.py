"""Deep-phase ranking: pure, from staged-entry snapshots to gated, ordered candidates.

Weights and gates as the reference (§5.6): relevance 0.30, frequency 0.24, query diversity
0.15, recency 0.15 (half-life), multi-day consolidation 0.10, conceptual richness 0.06, plus a
small recency-decayed light/REM phase boost. Every gate must pass. Entries whose origin is
`untrusted` or `system` are refused structurally, before grouping, so they can neither be
promoted nor lend evidence or lineage to a trusted claim.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from memoryd.dreaming.staged import StagedEntry
from memoryd.dreaming.text import claim_identity, derive_tags, log_ratio
from memoryd.settings import DreamingSettings
from memoryd.store.origins import EntryOrigin

DAY_MS = 86_400_000
W_RELEVANCE, W_FREQUENCY, W_DIVERSITY, W_RECENCY, W_CONSOLIDATION, W_CONCEPTUAL = (
    0.30,
    0.24,
    0.15,
    0.15,
    0.10,
    0.06,
)
FREQUENCY_SATURATION = 10  # signals at which frequency reaches 1
DIVERSITY_SATURATION = 5  # distinct queries at which diversity reaches 1
CONSOLIDATION_DAYS = 3  # distinct days at which recurrence reaches 1
CONCEPT_TAGS_FULL = 6  # tags at which richness reaches 1
PHASE_BOOST_MAX = 0.05  # the phase boost stays "small": it can tip, never carry, a candidate
PHASE_BOOST_PER_HIT = 0.02
PHASE_BOOST_HALF_LIFE_DAYS = 7.0


class PromotionGates(BaseModel):
    """One-run overrides of the deep-phase gates (None = the configured value)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_score: float | None = Field(default=None, ge=0)
    min_recall_count: int | None = Field(default=None, ge=0)
    min_unique_queries: int | None = Field(default=None, ge=0)


@dataclass(frozen=True, slots=True)
class Thresholds:
    min_score: float
    min_recall_count: int
    min_unique_queries: int
    max_age_days: float
    recency_half_life_days: float

    @classmethod
    def resolve(cls, settings: DreamingSettings, gates: PromotionGates | None) -> Thresholds:
        g = gates or PromotionGates()
        return cls(
            min_score=settings.min_score if g.min_score is None else g.min_score,
            min_recall_count=settings.min_recall_count if g.min_recall_count is None else g.min_recall_count,
            min_unique_queries=(
                settings.min_unique_queries if g.min_unique_queries is None else g.min_unique_queries
            ),
            max_age_days=settings.max_age_days,
            recency_half_life_days=settings.recency_half_life_days,
        )


@dataclass(frozen=True, slots=True)
class Signals:
    relevance: float
    frequency: float
    diversity: float
    recency: float
    consolidation: float
    conceptual: float
    phase_boost: float

    @property
    def score(self) -> float:
        return (
            W_RELEVANCE * self.relevance
            + W_FREQUENCY * self.frequency
            + W_DIVERSITY * self.diversity
            + W_RECENCY * self.recency
            + W_CONSOLIDATION * self.consolidation
            + W_CONCEPTUAL * self.conceptual
            + self.phase_boost
        )


@dataclass(frozen=True, slots=True)
class Candidate:
    """One claim: the primary staged entry and every trusted entry coalesced into it."""

    primary: StagedEntry
    members: tuple[StagedEntry, ...]  # primary first
    signals: Signals
    signal_count: int
    unique_queries: int
    avg_score: float

    @property
    def key(self) -> str:
        return self.primary.entry_key

    @property
    def score(self) -> float:
        return self.signals.score

    @property
    def member_keys(self) -> tuple[str, ...]:
        return tuple(m.entry_key for m in self.members)

    @property
    def origins(self) -> tuple[EntryOrigin, ...]:
        return tuple(o for m in self.members for o in m.origins)

    @property
    def session_ids(self) -> tuple[str, ...]:
        return tuple(sorted({o.session_id for o in self.origins}))


@dataclass(frozen=True, slots=True)
class Rejection:
    entry_key: str
    reason: str  # untrusted | promoted | too_old | min_recall_count | min_unique_queries | min_score


@dataclass(frozen=True, slots=True)
class Ranking:
    candidates: tuple[Candidate, ...]  # passing every gate, best first
    rejections: tuple[Rejection, ...]


def _decay(age_ms: float, half_life_days: float) -> float:
    return float(0.5 ** (max(0.0, age_ms) / DAY_MS / half_life_days))


def _signals(
    members: tuple[StagedEntry, ...], now_ms: int, half_life_days: float
) -> tuple[Signals, int, int, float]:
    count = sum(m.signal_count for m in members)
    total = sum(m.total_score for m in members)
    avg = total / max(1, count)
    queries = {q for m in members for q in m.query_hashes}
    days = {d for m in members for d in m.recall_days}
    tags = {t for m in members for t in (m.concept_tags or derive_tags(m.snippet))}
    last = max(m.last_recalled_at for m in members)
    hits = sum(m.light_hits + m.rem_hits for m in members)
    phase_at = max(
        (t for m in members for t in (m.last_light_at, m.last_rem_at) if t is not None), default=None
    )
    boost = 0.0
    if hits and phase_at is not None:
        boost = min(PHASE_BOOST_MAX, PHASE_BOOST_PER_HIT * hits) * _decay(
            now_ms - phase_at, PHASE_BOOST_HALF_LIFE_DAYS
        )
    signals = Signals(
        relevance=min(1.0, max(0.0, avg)),
        frequency=log_ratio(count, FREQUENCY_SATURATION),
        diversity=log_ratio(len(queries), DIVERSITY_SATURATION),
        recency=_decay(now_ms - last, half_life_days),
        consolidation=min(1.0, len(days) / CONSOLIDATION_DAYS),
        conceptual=min(1.0, len(tags) / CONCEPT_TAGS_FULL),
        phase_boost=boost,
    )
    return signals, count, len(queries), avg


def group_claims(entries: Iterable[StagedEntry]) -> list[tuple[StagedEntry, ...]]:
    """Coalesce entries stating the same claim; the earliest-staged entry is the primary."""
    groups: dict[str, list[StagedEntry]] = {}
    for e in entries:
        groups.setdefault(claim_identity(e.snippet), []).append(e)
    out = []
    for members in groups.values():
        members.sort(key=lambda m: (m.first_recalled_at, m.entry_key))
        out.append(tuple(members))
    return out


def rank_candidates(entries: Iterable[StagedEntry], thresholds: Thresholds, now_ms: int) -> Ranking:
    rejections: list[Rejection] = []
    trusted: list[StagedEntry] = []
    for e in entries:
        if not e.trusted:
            rejections.append(Rejection(e.entry_key, "untrusted"))
        elif e.promoted_at is not None:
            rejections.append(Rejection(e.entry_key, "promoted"))
        elif not e.snippet.strip():
            rejections.append(Rejection(e.entry_key, "empty"))
        else:
            trusted.append(e)
    passing: list[Candidate] = []
    for members in group_claims(trusted):
        signals, count, queries, avg = _signals(members, now_ms, thresholds.recency_half_life_days)
        last = max(m.last_recalled_at for m in members)
        reason = None
        if now_ms - last > thresholds.max_age_days * DAY_MS:
            reason = "too_old"
        elif count < thresholds.min_recall_count:
            reason = "min_recall_count"
        elif queries < thresholds.min_unique_queries:
            reason = "min_unique_queries"
        elif signals.score < thresholds.min_score:
            reason = "min_score"
        if reason is not None:
            rejections.extend(Rejection(m.entry_key, reason) for m in members)
            continue
        passing.append(Candidate(members[0], members, signals, count, queries, avg))
    passing.sort(key=lambda c: (-c.score, c.key))
    rejections.sort(key=lambda r: r.entry_key)
    return Ranking(tuple(passing), tuple(rejections))


WEIGHTS = (
    ("relevance", W_RELEVANCE),
    ("frequency", W_FREQUENCY),
    ("diversity", W_DIVERSITY),
    ("recency", W_RECENCY),
    ("consolidation", W_CONSOLIDATION),
    ("conceptual", W_CONCEPTUAL),
)


@dataclass(frozen=True, slots=True)
class GateCheck:
    name: str  # max_age_days | min_recall_count | min_unique_queries | min_score
    required: float
    actual: float
    passed: bool


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why one staged entry would or would not be promoted: the same checks as
    `rank_candidates`, in its order, with the score's parts."""

    entry_key: str
    verdict: str  # "promote", or the rejection reason rank_candidates would record
    claim_keys: tuple[str, ...]  # the staged entries coalesced into its claim
    signals: Signals | None  # None when it never reached the gates
    gates: tuple[GateCheck, ...]


def _gate_checks(
    members: tuple[StagedEntry, ...],
    signals: Signals,
    count: int,
    queries: int,
    thresholds: Thresholds,
    now_ms: int,
) -> tuple[GateCheck, ...]:
    age_days = (now_ms - max(m.last_recalled_at for m in members)) / DAY_MS
    return (
        GateCheck("max_age_days", thresholds.max_age_days, age_days, age_days <= thresholds.max_age_days),
        GateCheck(
            "min_recall_count", thresholds.min_recall_count, count, count >= thresholds.min_recall_count
        ),
        GateCheck(
            "min_unique_queries",
            thresholds.min_unique_queries,
            queries,
            queries >= thresholds.min_unique_queries,
        ),
        GateCheck("min_score", thresholds.min_score, signals.score, signals.score >= thresholds.min_score),
    )


def explain(
    entries: Iterable[StagedEntry], key: str, thresholds: Thresholds, now_ms: int
) -> Explanation | None:
    """The explanation of `key` among the visible staged `entries`; None if it is not one."""
    staged = list(entries)
    entry = next((e for e in staged if e.entry_key == key), None)
    if entry is None:
        return None
    early = (
        "untrusted"
        if not entry.trusted
        else "promoted"
        if entry.promoted_at is not None
        else "empty"
        if not entry.snippet.strip()
        else None
    )
    if early is not None:
        return Explanation(key, early, (key,), None, ())
    rankable = [e for e in staged if e.trusted and e.promoted_at is None and e.snippet.strip()]
    members = next(group for group in group_claims(rankable) if key in {m.entry_key for m in group})
    signals, count, queries, _avg = _signals(members, now_ms, thresholds.recency_half_life_days)
    gates = _gate_checks(members, signals, count, queries, thresholds, now_ms)
    failed = next((g.name for g in gates if not g.passed), None)
    verdict = {"max_age_days": "too_old"}.get(failed or "", failed) or "promote"
    return Explanation(key, verdict, tuple(m.entry_key for m in members), signals, gates)
