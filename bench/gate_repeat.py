"""False alarms of the gate: the same known-good config gated again and again.

Each round runs ``faultkit gate --node NODE --config CONFIG`` as a user would (its
defaults: 30 s steady-state windows, a 60 s soak, every ``gate`` scenario) and records the
decision, how long it took, each scenario's verdict and figures, and the steady-state
phase's figures (current and candidate). A known-good config that is gated onto itself must
PASS every time: every FAIL or INCONCLUSIVE is a false alarm. All rounds write into one
``--out`` directory, so from the second round on each gate also compares its scenarios with
the round before (the gate's baseline: the current config's newest passing runs there) — a
figure regression between two gates of one config is a false alarm of the baseline's
tolerances.

The JSON's ``summary`` (:func:`summarize`, pure) gives the false-alarm rate with its
one-sided 95 % upper bound (Clopper-Pearson; 0 of n: the "rule of three", ≈ 3/n), the
spread of the gate's duration, of every scenario figure across rounds and of the
steady-state figures and their candidate/current ratio — to set against the gate's
tolerances (faultkit/gate/baseline.py ``TOLERANCES``, faultkit/gate/steady_judge.py).

    .venv/bin/python bench/gate_repeat.py --node sim-vllm --config sim-vllm-good \
        [--rounds 5] [--deadline HH:MM] [--json bench/results/gate-repeat.json] [-- GATE ARGS]

``--deadline`` (UTC): no round starts that would, at the longest round's pace so far, end
after it. Run it on the lab with nothing else running (``faultkit testbed up`` first).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: the scenario figures the gate's baseline compares (faultkit/gate/baseline.py)
FIGURES = ("detection_s", "recovery_s", "lost", "peak_rps")
#: the steady-state figures the gate compares (faultkit/gate/steady_judge.py ``FIGURES``)
STEADY = ("ttft_p95_s", "e2e_p95_s", "error_ratio", "output_tokens_per_s")


def one_gate(node: str, config: str, extra: list[str], out: Path) -> dict[str, Any]:
    before = set(out.glob("gate-*"))
    started = time.monotonic()
    started_at = dt.datetime.now(dt.UTC).strftime("%H:%M:%S")
    proc = subprocess.run(
        [sys.executable, "-m", "faultkit.cli", "gate", "--node", node, "--config", config,
         "--out", str(out), *extra],
        capture_output=True, text=True, check=False, timeout=3600)
    seconds = time.monotonic() - started
    gates = sorted(set(out.glob("gate-*")) - before)
    data: dict[str, Any] = (json.loads((gates[-1] / "gate.json").read_text())
                            if gates and (gates[-1] / "gate.json").exists() else {})
    baseline = data.get("baseline") or {}
    steady = data.get("steady_state") or {}
    return {
        "started_utc": started_at, "exit": proc.returncode, "seconds": round(seconds, 1),
        "decision": data.get("decision"), "why": data.get("why"),
        "not_passed": data.get("not_passed") or [],
        "scenarios": {s.get("name"): s.get("outcome") for s in data.get("scenarios", [])},
        "figures": {s.get("name"): {k: s.get(k) for k in FIGURES  # peak_rps: overload only
                                    if k != "peak_rps" or s.get(k) is not None}
                    for s in data.get("scenarios", [])},
        "steady": {row.get("key"): {k: row.get(k) for k in (
            "current", "candidate", "current_interval", "candidate_interval", "regression")}
                   for row in steady.get("comparison") or []},
        "steady_regressions": steady.get("regressions") or [],
        "baseline_compared": len(baseline.get("runs") or {}),
        "figure_regressions": [r.get("line") for r in baseline.get("regressions") or []],
        "stderr_tail": proc.stderr[-800:] if proc.returncode else "",
    }


def upper95(failures: int, n: int) -> float:
    """One-sided 95 % Clopper-Pearson upper bound of a rate seen ``failures`` times in
    ``n``: the p at which P(X <= failures) = 0.05 (0 of n: 1 - 0.05^(1/n), ≈ 3/n)."""
    if n <= 0:
        return 1.0
    if failures >= n:
        return 1.0
    lo, hi = failures / n, 1.0
    for _ in range(100):  # bisection: the binomial CDF falls as p grows
        mid = (lo + hi) / 2
        cdf = sum(math.comb(n, i) * mid**i * (1 - mid) ** (n - i) for i in range(failures + 1))
        lo, hi = (mid, hi) if cdf > 0.05 else (lo, mid)
    return hi


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """min/median/max of the values captured (None: not captured), their max/min ratio
    (None when the min is not positive) and max - min."""
    got = [float(v) for v in values if v is not None]
    if not got:
        return {"n": 0, "missing": len(values)}
    lo, hi = min(got), max(got)
    return {"n": len(got), "missing": len(values) - len(got), "min": lo,
            "median": statistics.median(got), "max": hi,
            "max_min_ratio": hi / lo if lo > 0 else None, "max_minus_min": hi - lo}


def summarize(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary of the rounds (:func:`one_gate` records): pure."""
    n = len(rounds)
    alarms = [i + 1 for i, r in enumerate(rounds) if r.get("decision") != "pass"]
    names = list(dict.fromkeys(name for r in rounds for name in r.get("figures") or {}))
    scenarios = {name: {fig: spread([(r.get("figures") or {}).get(name, {}).get(fig)
                                     for r in rounds])
                        for fig in FIGURES
                        if any(fig in ((r.get("figures") or {}).get(name) or {})
                               for r in rounds)}
                 for name in names}
    steady: dict[str, Any] = {}
    for key in STEADY:
        rows = [(r.get("steady") or {}).get(key) or {} for r in rounds]
        cur = [row.get("current") for row in rows]
        cand = [row.get("candidate") for row in rows]
        ratio = [b / a if a is not None and b is not None and a > 0 else None
                 for a, b in zip(cur, cand, strict=True)]
        diff = [b - a if a is not None and b is not None else None
                for a, b in zip(cur, cand, strict=True)]
        steady[key] = {"current": spread(cur), "candidate": spread(cand),
                       "ratio_per_round": ratio, "ratio": spread(ratio),
                       "difference_per_round": diff, "difference": spread(diff),
                       "regressions": sum(1 for row in rows if row.get("regression"))}
    return {
        "rounds": n, "passed": n - len(alarms), "false_alarms": len(alarms),
        "false_alarm_rounds": alarms,
        "false_alarm_rate": len(alarms) / n if n else None,
        "false_alarm_rate_upper95": upper95(len(alarms), n),
        "figure_regressions": sum(len(r.get("figure_regressions") or []) for r in rounds),
        "steady_regressions": sum(len(r.get("steady_regressions") or []) for r in rounds),
        "seconds": spread([r.get("seconds") for r in rounds]),
        "scenarios": scenarios, "steady": steady,
    }


def _deadline(hhmm: str | None) -> float | None:
    """Epoch seconds of the next HH:MM UTC (today's, or tomorrow's if it has passed)."""
    if hhmm is None:
        return None
    now = dt.datetime.now(dt.UTC)
    hour, minute = (int(x) for x in hhmm.split(":"))
    at = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return (at if at > now else at + dt.timedelta(days=1)).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--deadline", help="HH:MM UTC: start no round that would end after it")
    parser.add_argument("--json", type=Path, help="write the figures here too (every round)")
    parser.add_argument("gate_args", nargs="*", help="after --: passed to faultkit gate")
    args = parser.parse_args()
    deadline = _deadline(args.deadline)
    rounds: list[dict[str, Any]] = []
    stopped = ""

    def write() -> None:
        if args.json:
            report = {"node": args.node, "config": args.config, "gate_args": args.gate_args,
                      "rounds_requested": args.rounds, "deadline_utc": args.deadline,
                      "stopped": stopped, "summary": summarize(rounds), "runs": rounds}
            args.json.write_text(json.dumps(report, indent=1) + "\n")

    with tempfile.TemporaryDirectory(prefix="faultkit-gate-repeat-") as out:
        for i in range(args.rounds):
            longest = max((r["seconds"] for r in rounds), default=0.0)
            if deadline is not None and time.time() + longest > deadline:
                stopped = f"deadline {args.deadline} UTC: {i} of {args.rounds} rounds run"
                print(stopped, flush=True)
                break
            result = one_gate(args.node, args.config, args.gate_args, Path(out))
            rounds.append(result)
            print(f"round {i + 1}: {result['decision']} (exit {result['exit']}) in "
                  f"{result['seconds']:.0f} s, {result['baseline_compared']} scenarios "
                  "compared with the round before"
                  + (f" — {result['why']}" if result["exit"] else ""), flush=True)
            write()  # after every round: a stopped bench keeps what it measured
    write()
    s = summarize(rounds)
    print(f"{s['false_alarms']} false alarm(s) in {s['rounds']} gates (rate ≤ "
          f"{s['false_alarm_rate_upper95']:.2f} at 95 %; {s['figure_regressions']} figure "
          f"regression(s) against the round before); {s['seconds'].get('min', 0):.0f}–"
          f"{s['seconds'].get('max', 0):.0f} s each")

if __name__ == "__main__":
    main()
