"""Runs scenarios, each in its own process (so its peak RSS is its own), and prints one table.

A scenario module in bench/scenarios/ defines:

    NAME = "first_sweep"
    def missing() -> str | None      # why the product side cannot run yet (None = it can)
    def run(ctx: Context) -> list[Row]

Every figure is a ratio against a baseline measured in the same process, on the same data,
with repetitions of the two interleaved, so a noisy neighbour hits both alike. The verdict
compares medians. A product entry point that does not exist yet yields a row marked
"not available", which is not a pass.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from bench.corpus import Corpus, ensure_corpus
from memoryd.allocator import tune_allocator

# Repetitions per scale: (warm-up runs, measured runs).
# At small scale the modules a scenario needs are imported before timing (its `missing()` check)
# and the corpus is in the page cache from the baseline, so no warm-up run is spent there.
REPS: dict[str, tuple[int, int]] = {"tiny": (0, 2), "small": (0, 3), "medium": (1, 5), "large": (1, 3)}
BENCH_REDIS_URL = os.environ.get("MEMORYD_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
NOT_AVAILABLE = "not available"
WORKERS_ENV = "MEMORYD_BENCH_WORKERS"  # first_sweep's worker-count curve (`--workers 1,2,4`)
TEXT_ENV = "MEMORYD_BENCH_TEXT"  # dream_sweep's staged texts (`--text varied,low_vocabulary`)


@dataclass
class Row:
    scenario: str
    figure: str
    median: float | None
    baseline: float | None
    ratio: float | None
    target: str
    passed: bool | None  # None: informational, or not available
    unit: str = ""
    min: float | None = None
    max: float | None = None
    note: str = ""
    peak_rss_mb: float | None = None

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        out = {
            "scenario": d.pop("scenario"),
            "figure": d.pop("figure"),
            "median": d.pop("median"),
            "baseline": d.pop("baseline"),
            "ratio": d.pop("ratio"),
            "target": d.pop("target"),
            "pass": d.pop("passed"),
        }
        out.update(d)
        return out


def _stats(samples: list[float]) -> tuple[float, float, float]:
    return statistics.median(samples), min(samples), max(samples)


def at_least(
    scenario: str,
    figure: str,
    unit: str,
    product: list[float],
    baseline: list[float],
    factor: float,
    note: str = "",
) -> Row:
    """Higher is better (a rate): pass when median(product) >= factor × median(baseline)."""
    return _ratio_row(scenario, figure, unit, product, baseline, factor, note, higher_is_better=True)


def at_most(
    scenario: str,
    figure: str,
    unit: str,
    product: list[float],
    baseline: list[float],
    factor: float,
    note: str = "",
) -> Row:
    """Lower is better (a time): pass when median(product) <= factor × median(baseline)."""
    return _ratio_row(scenario, figure, unit, product, baseline, factor, note, higher_is_better=False)


def _ratio_row(
    scenario: str,
    figure: str,
    unit: str,
    product: list[float],
    baseline: list[float],
    factor: float,
    note: str,
    *,
    higher_is_better: bool,
) -> Row:
    med, lo, hi = _stats(product)
    base = statistics.median(baseline)
    ratio = med / base if base else None
    if higher_is_better:
        target, passed = f">= {factor:g}x baseline", ratio is not None and ratio >= factor
    else:
        target, passed = f"<= {factor:g}x baseline", ratio is not None and ratio <= factor
    return Row(scenario, figure, med, base, ratio, target, passed, unit, lo, hi, note)


def limit(scenario: str, figure: str, unit: str, samples: list[float], ceiling: float, note: str = "") -> Row:
    """An absolute ceiling the issue states (p95 latency, peak RSS)."""
    med, lo, hi = _stats(samples)
    return Row(
        scenario, figure, med, None, None, f"<= {ceiling:g} {unit}", med <= ceiling, unit, lo, hi, note
    )


def info(
    scenario: str,
    figure: str,
    unit: str,
    samples: list[float],
    baseline: list[float] | None = None,
    note: str = "",
) -> Row:
    """A figure reported beside its baseline without a verdict."""
    med, lo, hi = _stats(samples)
    base = statistics.median(baseline) if baseline else None
    return Row(
        scenario, figure, med, base, med / base if base else None, "(reported)", None, unit, lo, hi, note
    )


def not_available(scenario: str, figure: str, reason: str) -> Row:
    return Row(scenario, figure, None, None, None, NOT_AVAILABLE, None, note=reason)


@dataclass
class Context:
    scale: str
    corpus: Corpus
    workdir: Path  # scratch space for this scenario's stores; removed afterwards
    warmup: int
    reps: int
    redis_url: str = BENCH_REDIS_URL
    unique: str = field(default_factory=lambda: f"{os.getpid()}-{int(time.time())}")

    def interleaved(self, *fns: Callable[[], float]) -> list[list[float]]:
        """Run each fn `warmup` times unrecorded, then `reps` rounds of all fns in turn.

        Each fn does its own setup and returns the figure of one repetition.
        """
        for _ in range(self.warmup):
            for fn in fns:
                fn()
        samples: list[list[float]] = [[] for _ in fns]
        for _ in range(self.reps):
            for i, fn in enumerate(fns):
                samples[i].append(fn())
        return samples

    def scratch(self, name: str) -> Path:
        path = self.workdir / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def settings_data(self, state_dir: Path, **overrides: Any) -> dict[str, Any]:
        """The overrides `settings` loads, as plain JSON values (a worker process rebuilds them)."""
        data: dict[str, Any] = {
            "state_dir": str(state_dir),
            "sessions_root": str(self.corpus.root),
            "redis_url": self.redis_url,
            "daemon": {"host_id": f"bench-{self.unique}", "poll_delay_s": 0.01},
            "ingest": {"max_messages_per_sweep": 10**9, "max_messages_per_file": 10**9},
        }
        data.update({k: str(v) if isinstance(v, Path) else v for k, v in overrides.items()})
        return data

    def settings(self, state_dir: Path, **overrides: Any) -> Any:
        """memoryd settings for a bench store over the corpus: no per-sweep caps, FTS only."""
        from memoryd.settings import load_settings

        return load_settings(None, **self.settings_data(state_dir, **overrides))


def run_async(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return anyio.run(fn, *args)


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def entry_point_missing(*names: str) -> str | None:
    """None if every `module:attr` imports, else a one-line reason naming the first missing one."""
    for name in names:
        module, _, attr = name.partition(":")
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            return f"{module} is not importable ({exc.__class__.__name__}: {exc})"
        if attr and not hasattr(mod, attr):
            return f"{module}.{attr} does not exist"
    return None


def scenario_names() -> list[str]:
    import bench.scenarios as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def run_scenario_here(name: str, scale: str, corpus: Corpus) -> list[Row]:
    """Run one scenario in this process (the child side, and the smoke test)."""
    module = importlib.import_module(f"bench.scenarios.{name}")
    warmup, reps = REPS[scale]
    workdir = Path(tempfile.mkdtemp(prefix=f"memoryd-bench-{name}-"))
    try:
        ctx = Context(scale, corpus, workdir, warmup, reps)
        return list(module.run(ctx))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _child(name: str, scale: str, out: Path) -> int:
    corpus = ensure_corpus(scale)
    try:
        rows = run_scenario_here(name, scale, corpus)
        error = None
    except Exception as exc:  # reported as a failed row: one broken scenario must not hide the others
        rows = []
        error = f"{exc.__class__.__name__}: {exc}"
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    out.write_bytes(orjson.dumps({"rows": [asdict(r) for r in rows], "error": error, "rss_mb": rss_mb}))
    return 0


def run_in_subprocess(name: str, scale: str, timeout_s: float = 3600) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-out-") as tmp:
        out = Path(tmp) / "rows.json"
        proc = subprocess.run(
            [sys.executable, "-m", "bench.runner", "--child", name, "--scale", scale, "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return [Row(name, "(scenario crashed)", None, None, None, "", False, note=tail[0])]
        data = orjson.loads(out.read_bytes())
    rows = [Row(**r) for r in data["rows"]]
    if data["error"]:
        rows.append(Row(name, "(scenario failed)", None, None, None, "", False, note=data["error"]))
    for r in rows:
        r.peak_rss_mb = r.peak_rss_mb if r.peak_rss_mb is not None else round(data["rss_mb"], 1)
    return rows


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit in ("s",) and value < 1:
        return f"{value * 1000:.2f} ms"
    if abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def verdict(row: Row) -> str:
    if row.target == NOT_AVAILABLE:
        return NOT_AVAILABLE
    if row.passed is None:
        return "info"
    return "PASS" if row.passed else "FAIL"


def format_table(rows: list[Row]) -> str:
    headers = ["scenario", "figure", "median", "min-max", "baseline", "ratio", "target", "result", "peak RSS"]
    body = []
    for r in rows:
        spread = "-" if r.min is None else f"{_fmt(r.min, r.unit)} - {_fmt(r.max, r.unit)}"
        body.append(
            [
                r.scenario,
                r.figure,
                _fmt(r.median, r.unit),
                spread,
                _fmt(r.baseline, r.unit),
                "-" if r.ratio is None else f"{r.ratio:.2f}x",
                r.target,
                verdict(r),
                "-" if r.peak_rss_mb is None else f"{r.peak_rss_mb:.0f} MB",
            ]
        )
    cells = [headers] + body
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(headers))]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    notes = [f"  {r.scenario}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + (["", "notes:"] + notes if notes else []))


def format_markdown(rows: list[Row]) -> str:
    out = [
        "| scenario | figure | median | min–max | baseline | ratio | target | result | peak RSS |",
        "|---|---|---:|---:|---:|---:|---|---|---:|",
    ]
    for r in rows:
        spread = "-" if r.min is None else f"{_fmt(r.min, r.unit)} – {_fmt(r.max, r.unit)}"
        out.append(
            f"| {r.scenario} | {r.figure} | {_fmt(r.median, r.unit)} | {spread} | {_fmt(r.baseline, r.unit)} | "
            f"{'-' if r.ratio is None else f'{r.ratio:.2f}x'} | {r.target} | {verdict(r)} | "
            f"{'-' if r.peak_rss_mb is None else f'{r.peak_rss_mb:.0f} MB'} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.runner")
    ap.add_argument("--child", required=True)
    ap.add_argument("--scale", required=True)
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args(argv)
    return _child(a.child, a.scale, a.out)


if __name__ == "__main__":
    tune_allocator()  # the same memory profile as the memoryd entry point
    sys.exit(main())
