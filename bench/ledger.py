"""How fast is a soak-sized ledger summarised from its file, and in how much memory?

For each ``--requests N`` (default 1 M and 10 M), in separate processes so that each
peak RSS is its own:

1. **write** — synthesises N plausible records (96 % ok with 32 streamed tokens, i.e. 31
   ITL gaps each; failures of several classes; shed arrivals; a few cancelled) and puts
   every one through the bounded-memory ``Ledger`` into ``ledger.arrows``, as
   ``faultkit load`` does (``Ledger(keep_records=False, columnar_path=…)``);
2. **summarize** — ``colstats.summarize_file`` (the ``faultkit load`` summary);
3. **windows** — ``colstats.fixed_windows`` with 60 s windows (a soak's SLIs over time).

``--old N`` also times the old path on N records: ``ledger.jsonl`` read with
``read_ledger`` and summarised with ``stats.summarize``, next to the new path on the same
records. Time is wall-clock (``time.perf_counter``) of the call alone; RSS is the process's
peak (``ru_maxrss``). The files go to a temporary directory (``--dir`` to choose; 10 M
records take ~3 GB) and are removed.

    .venv/bin/python bench/ledger.py [--requests 1000000 10000000] [--old 100000]
                                     [--json FILE] [--dir DIR] [--keep]

``--json FILE`` writes ``{"summarize_1m_s", "summarize_10m_s", "peak_rss_mib", …}``:
``peak_rss_mib`` is the highest peak RSS of the summarize runs; each run's figures are in
``runs``. A size that was not run is ``null``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from faultkit.model.records import JsonlWriter, RequestRecord

CHUNK = 8_192
EPOCH0 = 1_767_268_800.0  # 2026-01-01T12:00:00Z
RATE_RPS = 300.0
TOKENS = 32


def synthesize(n: int, seed: int = 0) -> Iterator[RequestRecord]:
    """``n`` records of an open-loop run at 300 req/s, built from numpy draws in chunks."""
    rng = np.random.default_rng(seed)
    t = EPOCH0
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        sched = t + np.cumsum(rng.exponential(1 / RATE_RPS, m))
        t = float(sched[-1])
        invoke = sched + rng.exponential(0.0005, m)
        ttft = rng.lognormal(-3.0, 0.5, m)
        itl = rng.lognormal(-4.0, 0.3, (m, TOKENS - 1))
        first = invoke + ttft
        last = first + itl.sum(axis=1)
        end = last + 0.0008
        kind = rng.random(m)
        cols = [c.tolist() for c in (sched, invoke, first, last, end, itl)]
        for j, u in enumerate(kind.tolist()):
            rid = f"b3c4d5-{start + j:06d}"
            s, i, f, la, e, gaps = (c[j] for c in cols)
            if u < 0.96:
                yield RequestRecord(
                    rid, "sim-vllm", "chat", i, "ok", e, i + 0.9 * (f - i), f, la, 200,
                    None, None, "length", 32, TOKENS, True, TOKENS + 2, TOKENS,
                    tuple(gaps), s, False,
                )  # fmt: skip
            elif u < 0.98:
                yield RequestRecord(
                    rid, "sim-vllm", "chat", i, "fail", i + 0.004, i + 0.004, None, None, 503,
                    "http_5xx", "HTTP 503: server overloaded", None, None, None, False, 0, 0,
                    (), s, True,
                )  # fmt: skip
            elif u < 0.99:
                yield RequestRecord(
                    rid, "sim-vllm", "chat", i, "fail", i + 0.2, i + 0.05, f, None, 200,
                    "reset", "ServerDisconnectedError", None, None, 3, False, 4, 3,
                    tuple(gaps[:2]), s, False,
                )  # fmt: skip
            elif u < 0.998:
                yield RequestRecord(
                    rid, "sim-vllm", "chat", s, "fail", s, None, None, None, None,
                    "shed_client", "client in-flight cap 256 reached", None, None, None,
                    False, 0, 0, (), s, False,
                )  # fmt: skip
            else:
                yield RequestRecord(
                    rid, "sim-vllm", "chat", i, "unknown", e, i + 0.01, f, None, 200,
                    "cancelled", "cancelled while draining", None, None, 5, False, 6, 5,
                    tuple(gaps[:4]), s, False,
                )  # fmt: skip


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------- phases (children)


def phase_write(n: int, path: Path) -> dict[str, Any]:
    from faultkit.load.ledger import Ledger

    ledger = Ledger(None, keep_records=False, columnar_path=path)
    t0 = time.perf_counter()
    for record in synthesize(n):
        ledger.start(record.id, record.t_invoke)
        ledger.finish(record)
    ledger.close()
    seconds = time.perf_counter() - t0
    assert not ledger.check(), ledger.check()[:3]
    return {"write_s": seconds, "bytes": path.stat().st_size, "peak_rss_mib": peak_rss_mib()}


def phase_write_jsonl(n: int, path: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    with JsonlWriter(path) as writer:
        for record in synthesize(n):
            writer.write(record)
    return {"write_s": time.perf_counter() - t0, "bytes": path.stat().st_size}


def phase_summarize(path: Path) -> dict[str, Any]:
    from faultkit.load.colstats import summarize_file

    t0 = time.perf_counter()
    summary = summarize_file(path)
    seconds = time.perf_counter() - t0
    return {"s": seconds, "peak_rss_mib": peak_rss_mib(), "requests": summary.requests,
            "itl_p99_s": summary.itl.p99}  # fmt: skip


def phase_windows(path: Path) -> dict[str, Any]:
    from faultkit.load.colstats import fixed_windows

    t0 = time.perf_counter()
    windows = fixed_windows(path, 60.0)
    seconds = time.perf_counter() - t0
    return {"s": seconds, "peak_rss_mib": peak_rss_mib(), "windows": len(windows)}


def phase_old(path: Path) -> dict[str, Any]:
    from faultkit.load.stats import summarize
    from faultkit.model.records import read_ledger

    t0 = time.perf_counter()
    summary = summarize(read_ledger(path))
    seconds = time.perf_counter() - t0
    return {"s": seconds, "peak_rss_mib": peak_rss_mib(), "requests": summary.requests,
            "itl_p99_s": summary.itl.p99}  # fmt: skip


PHASES = {
    "write": lambda a: phase_write(a.n, Path(a.path)),
    "write_jsonl": lambda a: phase_write_jsonl(a.n, Path(a.path)),
    "summarize": lambda a: phase_summarize(Path(a.path)),
    "windows": lambda a: phase_windows(Path(a.path)),
    "old": lambda a: phase_old(Path(a.path)),
}


def child(phase: str, path: Path, n: int = 0) -> dict[str, Any]:
    """Run one phase in a fresh interpreter; its last stdout line is the JSON result."""
    cmd = [sys.executable, __file__, "--phase", phase, "--path", str(path), "--n", str(n)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------------- driver


def label(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def run_size(n: int, work: Path, windows: bool) -> dict[str, Any]:
    path = work / f"ledger-{label(n)}.arrows"
    path.unlink(missing_ok=True)
    row: dict[str, Any] = {"requests": n, "write": child("write", path, n)}
    row["summarize"] = child("summarize", path)
    assert row["summarize"]["requests"] == n
    if windows:
        row["windows"] = child("windows", path)
    return row


def run_old(n: int, work: Path) -> dict[str, Any]:
    jsonl = work / f"old-{label(n)}.jsonl"
    arrows = work / f"ledger-{label(n)}.arrows"
    jsonl.unlink(missing_ok=True)
    row: dict[str, Any] = {"requests": n, "write_jsonl": child("write_jsonl", jsonl, n)}
    row["old"] = child("old", jsonl)
    if not arrows.exists():  # else written by run_size from the same seed: the same records
        child("write", arrows, n)
    row["new"] = child("summarize", arrows)
    assert row["old"]["itl_p99_s"] == row["new"]["itl_p99_s"], "old and new ITL p99 differ"
    row["ratio"] = row["old"]["s"] / row["new"]["s"]
    return row


def table(rows: list[dict[str, Any]], old: dict[str, Any] | None) -> str:
    lines = [
        f"{'requests':>10}  {'write s':>8}  {'write RSS':>10}  {'file MB':>8}  "
        f"{'summarize s':>11}  {'RSS MiB':>8}  {'windows s':>9}  {'RSS MiB':>8}"
    ]
    for r in rows:
        w, s, win = r["write"], r["summarize"], r.get("windows")
        lines.append(
            f"{r['requests']:>10,}  {w['write_s']:>8.1f}  {w['peak_rss_mib']:>10.0f}  "
            f"{w['bytes'] / 1e6:>8.0f}  {s['s']:>11.2f}  {s['peak_rss_mib']:>8.0f}  "
            + (f"{win['s']:>9.2f}  {win['peak_rss_mib']:>8.0f}" if win else f"{'—':>9}  {'—':>8}")
        )
    if old:
        o, nw = old["old"], old["new"]
        lines.append(
            f"old path, {old['requests']:,} requests ({old['write_jsonl']['bytes'] / 1e6:.0f} MB "
            f"JSONL): read_ledger + summarize {o['s']:.2f} s, {o['peak_rss_mib']:.0f} MiB; "
            f"summarize_file {nw['s']:.2f} s, {nw['peak_rss_mib']:.0f} MiB: "
            f"{old['ratio']:.0f}x faster"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--old", type=int, default=0, help="also time the old path on N")
    parser.add_argument("--no-windows", action="store_true", help="skip the windows figures")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--dir", help="where the ledgers go (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the ledger files")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(PHASES[args.phase](args)))
        return
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="faultkit-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rows = [run_size(n, work, not args.no_windows) for n in args.requests]
        old = run_old(args.old, work) if args.old else None
    finally:
        if not args.keep:
            for name in ("ledger-*.arrows", "old-*.jsonl"):
                for path in work.glob(name):
                    path.unlink()
            if not args.dir:
                shutil.rmtree(work, ignore_errors=True)
    print(table(rows, old))
    figures: dict[str, Any] = {f"summarize_{label(n)}_s": None for n in (1_000_000, 10_000_000)}
    for r in rows:
        figures[f"summarize_{label(r['requests'])}_s"] = round(r["summarize"]["s"], 3)
    figures["peak_rss_mib"] = round(max(r["summarize"]["peak_rss_mib"] for r in rows), 1)
    figures["runs"] = rows
    if old:
        figures["old_path"] = old
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
