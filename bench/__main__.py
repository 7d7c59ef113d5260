"""python -m bench --scale small|medium|large [--only NAME] [--json OUT] [--markdown]
python -m bench --scale small --only first_sweep --workers 1,2,4   # a worker-count curve
python -m bench --scale small --only dream_sweep --text low_vocabulary   # one kind of staged text
python -m bench --peer [--peer-sessions 300,1500] [--peer-reps 3] [--json OUT]

Generates (or reuses) the corpus of the scale, runs each scenario in its own process and
prints a table: figure, median, min–max, baseline, ratio, target, result, peak RSS.
`--json OUT` writes the rows as a list of objects (scenario, figure, median, baseline,
ratio, target, pass, then unit, min, max, note, peak_rss_mb).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import orjson

from bench.corpus import SCALES, TEXTS, ensure_corpus
from bench.runner import (
    TEXT_ENV,
    WORKERS_ENV,
    format_markdown,
    format_table,
    run_in_subprocess,
    scenario_names,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description="memoryd benchmarks (ratios in one run)")
    ap.add_argument(
        "--scale",
        choices=list(SCALES),
        default="small",
        help="corpus size: tiny (smoke), small 1k, medium 10k, large 100k sessions",
    )
    ap.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="run only this scenario (repeatable)"
    )
    ap.add_argument("--json", dest="json_out", type=Path, metavar="OUT", help="write the rows as JSON to OUT")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    ap.add_argument(
        "--workers",
        metavar="N,N",
        help="first_sweep: also sweep with these ingest.workers counts (a curve; default 1,2)",
    )
    ap.add_argument(
        "--text",
        metavar="KIND,KIND",
        help=f"dream_sweep: the staged entries' text, of {', '.join(TEXTS)} (default both)",
    )
    ap.add_argument(
        "--peer",
        action="store_true",
        help="compare with OpenClaw 2026.9.6 on the same agent (installs it with npm into a cache dir; needs root)",
    )
    ap.add_argument(
        "--peer-sessions", default="300,1500", metavar="N,N", help="agent sizes of the peer bench (sessions)"
    )
    ap.add_argument(
        "--peer-reps", type=int, default=3, metavar="N", help="repetitions of each peer operation (>= 3)"
    )
    a = ap.parse_args(argv)
    if a.peer:
        return _peer(a)

    names = scenario_names()
    unknown = [n for n in a.only if n not in names]
    if unknown:
        print(f"unknown scenario {unknown[0]!r}; known: {', '.join(names)}", file=sys.stderr)
        return 2
    selected = a.only or names
    if a.workers:
        try:
            counts = [int(n) for n in a.workers.split(",")]
        except ValueError:
            counts = []
        if not counts or min(counts) < 1:
            print(f"--workers {a.workers!r}: give worker counts of 1 or more, like 1,2,4", file=sys.stderr)
            return 2
        os.environ[WORKERS_ENV] = ",".join(map(str, counts))  # the scenario processes read it

    if a.text:
        kinds = [k.strip() for k in a.text.split(",") if k.strip()]
        if not kinds or any(k not in TEXTS for k in kinds):
            print(
                f"--text {a.text!r}: give kinds of {', '.join(TEXTS)}, like varied,low_vocabulary",
                file=sys.stderr,
            )
            return 2
        os.environ[TEXT_ENV] = ",".join(kinds)  # the scenario processes read it

    started = time.perf_counter()
    corpus = ensure_corpus(a.scale)
    m = corpus.manifest
    print(
        f"corpus {a.scale}: {m.sessions:,} sessions, {m.messages:,} messages, "
        f"{m.transcript_bytes / 1e6:.1f} MB, {m.archives} archives ({corpus.root})",
        flush=True,
    )
    rows = []
    for name in selected:
        t0 = time.perf_counter()
        print(f"  {name} ...", end="", flush=True)
        got = run_in_subprocess(name, a.scale)
        rows += got
        print(f" {time.perf_counter() - t0:.1f} s", flush=True)
    print()
    print(format_table(rows))
    if a.markdown:
        print()
        print(format_markdown(rows))
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    if a.json_out:
        a.json_out.write_bytes(orjson.dumps([r.as_json() for r in rows], option=orjson.OPT_INDENT_2))
    return 0


def _peer(a: argparse.Namespace) -> int:
    from bench.peer.run import run_peer
    from bench.runner import BENCH_REDIS_URL

    try:
        sizes = [int(v.replace("_", "")) for v in a.peer_sessions.split(",") if v.strip()]
    except ValueError:
        print(f"--peer-sessions: not a list of numbers: {a.peer_sessions!r}", file=sys.stderr)
        return 2
    if not sizes or min(sizes) < 1 or a.peer_reps < 3:
        print("--peer-sessions needs sizes >= 1 and --peer-reps at least 3", file=sys.stderr)
        return 2
    return run_peer(sizes, a.peer_reps, a.json_out, BENCH_REDIS_URL)


if __name__ == "__main__":
    sys.exit(main())
