"""Measurement truth table: how far faultkit's figures are from what really happened.

Runs each trial of ``testbed.truth.TRIALS`` ``--runs`` times on the testbed's sim-vllm node
(the lab must be up: ``faultkit testbed up``) and compares t_effect, t_recovered, detection
and lost requests with the simulator's truth file, Docker's events and Prometheus' ALERTS
series. Writes every trial to ``--json`` and prints the table of docs/measurement-truth.md
(max |error| per kind).

    .venv/bin/python bench/measurement_truth.py --runs 5 --json bench/results/truth.json
    .venv/bin/python bench/measurement_truth.py --from test-results/measurement-truth.jsonl

``--from`` summarises the trials a test run recorded (``tests/integration/test_measure_truth.py``
appends each one there) instead of running new ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testbed.lab import Lab
from testbed.truth import TRIALS, Trial, run_trial


def _max_abs(values: list[float | None]) -> float | None:
    present = [abs(v) for v in values if v is not None]
    return max(present) if present else None


def summarise(trials: list[Trial]) -> dict[str, dict[str, Any]]:
    """Per trial kind: runs, max |error| of each figure, runs with a problem."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(t.name for t in trials):
        mine = [t for t in trials if t.name == name]
        out[name] = {
            "runs": len(mine),
            "max_abs_t_effect_s": _max_abs([t.errors["t_effect"] for t in mine]),
            "max_abs_t_recovered_s": _max_abs([t.errors["t_recovered"] for t in mine]),
            "max_abs_detect_vs_alerts_s": _max_abs([t.errors["t_detect_vs_alerts"]
                                                    for t in mine]),
            "max_abs_lost_error": _max_abs([t.errors["lost"] for t in mine]),
            # the page: runs the pager received one in, the measured page against the
            # pager's own record, and the longest wait from firing to it
            "paged_runs": sum(1 for t in mine if t.truth.get("t_paged") is not None),
            "max_abs_t_paged_s": _max_abs([t.errors.get("t_paged") for t in mine]),
            "max_page_after_firing_s": max(
                (t.truth["t_paged"] - t.truth["t_alert_firing"] for t in mine
                 if t.truth.get("t_paged") is not None
                 and t.truth.get("t_alert_firing") is not None), default=None),
            "effect_evidence": sorted({str(t.measured["effect_evidence"]) for t in mine}),
            "detect_signals": sorted({str(t.measured["detect_signal"]) for t in mine}),
            "runs_with_problems": sum(1 for t in mine if t.problems
                                      or t.measured["inconclusive"]),
        }
    return out


def table(summary: dict[str, dict[str, Any]]) -> str:
    def f(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    rows = ["| trial | runs | t_effect evidence | max \\|Δt_effect\\| s | max \\|Δt_recovered\\| s "
            "| max \\|Δdetect − ALERTS\\| s | max \\|Δlost\\| | paged | max \\|Δpage\\| s "
            "| max page − firing s |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        rows.append(f"| {name} | {s['runs']} | {', '.join(s['effect_evidence'])} | "
                    f"{f(s['max_abs_t_effect_s'])} | {f(s['max_abs_t_recovered_s'])} | "
                    f"{f(s['max_abs_detect_vs_alerts_s'])} | {f(s['max_abs_lost_error'])} | "
                    f"{s.get('paged_runs', 0)} | {f(s.get('max_abs_t_paged_s'))} | "
                    f"{f(s.get('max_page_after_firing_s'))} |")
    return "\n".join(rows)


def load_trials(path: Path) -> list[Trial]:
    """Trials recorded one JSON object per line (by the integration test)."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return [Trial(**json.loads(line)) for line in lines]


def write(trials: list[Trial], out: Path | None) -> None:
    summary = summarise(trials)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"summary": summary,
                                   "trials": [t.to_json() for t in trials]}, indent=2))
    print(table(summary))


async def main(runs: int, names: list[str], out: Path | None) -> int:
    lab = Lab(progress=lambda message: print(f"[testbed] {message}", file=sys.stderr))
    # Lab.up() runs its own event loop when it waits for a node: not inside this one
    await asyncio.to_thread(lab.up)
    trials: list[Trial] = []
    with tempfile.TemporaryDirectory(prefix="faultkit-truth-") as tmp:
        for run in range(runs):
            for name in names:
                started = time.monotonic()
                trial = await run_trial(name, lab.inventory, Path(tmp))
                trials.append(trial)
                took = time.monotonic() - started
                problems = f" PROBLEMS {'; '.join(trial.problems)}" if trial.problems else ""
                print(f"[{run + 1}/{runs}] {name}: errors {trial.errors} ({took:.0f} s){problems}",
                      file=sys.stderr)
    summary = summarise(trials)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        report = {"summary": summary, "trials": [t.to_json() for t in trials]}
        out.write_text(json.dumps(report, indent=2))  # noqa: ASYNC240
    print(table(summary))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trial", action="append", choices=list(TRIALS),
                        help="only these trials (repeatable; default: all)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--from", dest="source", type=Path, default=None,
                        help="summarise trials recorded by the integration test instead")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be ≥ 1")
    if args.source is not None:
        if not args.source.is_file():
            parser.error(f"--from {args.source}: no such file")
        write(load_trials(args.source), args.json)
        sys.exit(0)
    sys.exit(asyncio.run(main(args.runs, args.trial or list(TRIALS), args.json)))
