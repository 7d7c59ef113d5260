"""`memoryd promote --explain KEY`: the deep phase's ranking of one staged entry, read-only,
with the parts of its score and each gate it meets or misses."""

from __future__ import annotations

import time

from memoryd.agent_runtime import AgentRuntime
from memoryd.dreaming.expiry import drop_expired
from memoryd.dreaming.rank import WEIGHTS, PromotionGates, Thresholds, explain
from memoryd.dreaming.report import GateResult, PromoteExplanation, ScorePart
from memoryd.dreaming.staged import read_staged


async def explain_promotion(
    rt: AgentRuntime, key: str, gates: PromotionGates | None = None, now_ms: int | None = None
) -> PromoteExplanation:
    now = int(time.time() * 1000) if now_ms is None else now_ms
    thresholds = Thresholds.resolve(rt.settings.dreaming, gates)
    staged = await rt.store.read(read_staged, rt.agent_id) if rt.store is not None else []
    visible, _hidden = await drop_expired(rt.settings, rt.sessions, staged)
    found = explain(visible, key, thresholds, now)
    if found is None:
        verdict = "expired" if any(e.entry_key == key for e in staged) else "not_staged"
        return PromoteExplanation(
            agent_id=rt.agent_id,
            entry_key=key,
            would_promote=False,
            verdict=verdict,
            claim_keys=[],
            score=None,
            parts=[],
            gates=[],
        )
    parts: list[ScorePart] = []
    if found.signals is not None:
        s = found.signals
        parts = [
            ScorePart(
                name=name, value=getattr(s, name), weight=weight, contribution=getattr(s, name) * weight
            )
            for name, weight in WEIGHTS
        ]
        parts.append(
            ScorePart(name="phaseBoost", value=s.phase_boost, weight=1.0, contribution=s.phase_boost)
        )
    return PromoteExplanation(
        agent_id=rt.agent_id,
        entry_key=key,
        would_promote=found.verdict == "promote",
        verdict=found.verdict,
        claim_keys=list(found.claim_keys),
        score=None if found.signals is None else found.signals.score,
        parts=parts,
        gates=[
            GateResult(name=g.name, required=g.required, actual=g.actual, passed=g.passed)
            for g in found.gates
        ],
    )
