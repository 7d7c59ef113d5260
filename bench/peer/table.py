"""The peer table (pure): per operation and agent size, the medians of both sides' wall time
and peak RSS, the speed ratio (OpenClaw / memoryd) and the RSS ratio (memoryd / OpenClaw),
against the target of issue 21: at least 10x faster with at most 1/5 of OpenClaw's RSS."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

SPEED_TARGET = 10.0
RSS_TARGET = 0.2
TARGET = f">= {SPEED_TARGET:g}x, <= 1/{1 / RSS_TARGET:g} RSS"


@dataclass(frozen=True, slots=True)
class Samples:
    """One side's repetitions of one operation: (wall s, peak RSS MiB) each."""

    wall_s: tuple[float, ...]
    rss_mib: tuple[float, ...]

    @property
    def wall(self) -> float:
        return statistics.median(self.wall_s)

    @property
    def rss(self) -> float:
        return statistics.median(self.rss_mib)


@dataclass(frozen=True, slots=True)
class PeerRow:
    operation: str
    sessions: int
    openclaw: Samples
    memoryd: Samples
    note: str = ""

    @property
    def speed(self) -> float:
        return self.openclaw.wall / self.memoryd.wall

    @property
    def rss_ratio(self) -> float:
        return self.memoryd.rss / self.openclaw.rss

    @property
    def passed(self) -> bool:
        return self.speed >= SPEED_TARGET and self.rss_ratio <= RSS_TARGET

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": "peer",
            "operation": self.operation,
            "sessions": self.sessions,
            "openclaw_s": round(self.openclaw.wall, 3),
            "memoryd_s": round(self.memoryd.wall, 3),
            "speed": round(self.speed, 2),
            "openclaw_rss_mib": round(self.openclaw.rss, 1),
            "memoryd_rss_mib": round(self.memoryd.rss, 1),
            "rss_ratio": round(self.rss_ratio, 3),
            "target": TARGET,
            "pass": self.passed,
            "repetitions": len(self.memoryd.wall_s),
            "openclaw_wall_s": [round(v, 3) for v in self.openclaw.wall_s],
            "memoryd_wall_s": [round(v, 3) for v in self.memoryd.wall_s],
            "note": self.note,
        }


def _side(s: Samples) -> str:
    return f"{s.wall:.2f} s, {s.rss:.0f} MiB"


def cells(rows: list[PeerRow]) -> list[list[str]]:
    head = ["operation", "sessions", "OpenClaw", "memoryd", "speed", "RSS", "target", "pass"]
    body = [
        [
            r.operation,
            f"{r.sessions:,}",
            _side(r.openclaw),
            _side(r.memoryd),
            f"{r.speed:.1f}x",
            f"1/{1 / r.rss_ratio:.1f}",
            TARGET,
            "PASS" if r.passed else "FAIL",
        ]
        for r in rows
    ]
    return [head, *body]


def format_text(rows: list[PeerRow]) -> str:
    table = cells(rows)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in table]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def format_markdown(rows: list[PeerRow]) -> str:
    table = cells(rows)
    out = ["| " + " | ".join(table[0]) + " |", "|---|---:|---:|---:|---:|---:|---|---|"]
    out += ["| " + " | ".join(row) + " |" for row in table[1:]]
    return "\n".join(out)
