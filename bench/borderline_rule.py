"""How often the gate's steady-state TTFT judgement is wrong, with and without the
borderline rerun (docs/gate.md, "Borderline").

A simulated candidate whose TTFT p95 is a known multiple of the objective is judged the
way the gate judges it — a window of N requests through ``SteadyState.of_window``,
``judge_steady_state`` and ``borderline_checks``, and, when that says borderline, a second
window pooled with the first (``SteadyState.pooled_with``) — many times over. A FAIL of a
candidate whose true p95 meets the objective is a false alarm; a PASS of one that misses it
is a miss. The TTFTs are log-normal (σ = 0.5, the shape of the lab's steady windows: a
tight body and a long tail) scaled so their true p95 is the chosen multiple; the truth is
the simulation's own parameter, not anything the judged code computed.

    .venv/bin/python bench/borderline_rule.py [--trials 200] [--requests 300] \
        [--json bench/results/borderline-rule.json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

from faultkit.gate.steady import SteadyState
from faultkit.gate.steady_judge import borderline_checks, judge_steady_state
from faultkit.inventory import SLOSettings
from faultkit.model.records import RequestRecord

SLO = SLOSettings()
SIGMA = 0.5
Z95 = 1.6448536  # the standard normal's 95th percentile
RATIOS = (0.8, 0.9, 0.95, 1.05, 1.1, 1.25)


def window(rng: random.Random, requests: int, p95: float, start: float) -> SteadyState:
    """One steady window of ``requests`` users, 10 per second, whose true TTFT p95 is
    ``p95``."""
    mu = math.log(p95) - Z95 * SIGMA
    records = []
    for i in range(requests):
        t = start + i / 10
        ttft = rng.lognormvariate(mu, SIGMA)
        records.append(RequestRecord(id=f"{start}-{i}", node="n", kind="chat", t_invoke=t,
                                     status="ok", t_first_token=t + ttft,
                                     t_end=t + ttft + 0.2, output_tokens=16))
    return SteadyState.of_window("candidate", records, start, start + requests / 10)


def trial(rng: random.Random, requests: int, p95: float) -> tuple[bool, bool, bool]:
    """(passed on one window, passed under the rule, the rule measured twice)."""
    first = window(rng, requests, p95, 0.0)
    verdict = judge_steady_state(first.slis, SLO, (), first.intervals)
    alone = verdict.passed
    if not borderline_checks(verdict, first.slis, SLO, first.intervals):
        return alone, alone, False
    second = window(rng, requests, p95, 1000.0)
    both = first.pooled_with(second, "borderline")
    return alone, judge_steady_state(both.slis, SLO, (), both.intervals).passed, True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--requests", type=int, default=300,
                        help="requests per window (the gate's default: 30 s at 10 req/s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    for ratio in RATIOS:
        results = [trial(rng, args.requests, ratio * SLO.ttft_s) for _ in range(args.trials)]
        meets = ratio <= 1.0
        wrong_alone = sum(alone != meets for alone, _, _ in results)
        wrong_rule = sum(rule != meets for _, rule, _ in results)
        rows.append({
            "true_p95_over_objective": ratio,
            "kind_of_error": "false alarm (FAIL)" if meets else "miss (PASS)",
            "one_window_error_rate": round(wrong_alone / args.trials, 4),
            "rule_error_rate": round(wrong_rule / args.trials, 4),
            "measured_twice": round(sum(twice for _, _, twice in results) / args.trials, 4),
        })
        print(json.dumps(rows[-1]), file=sys.stderr)
    out = {"trials": args.trials, "requests_per_window": args.requests, "sigma": SIGMA,
           "objective_s": SLO.ttft_s, "seconds": round(time.monotonic() - started, 1),
           "rows": rows}
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
