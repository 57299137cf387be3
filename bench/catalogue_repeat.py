"""The flake budget: the whole scenario catalogue, run N times as CI runs it, and every
verdict that was not the expected one, with its cause.

Each round is CI's catalogue run (``tests.e2e.scenario_suite.run_scenario_lanes``: every
engine node in a lane of its own, the gateway after its upstreams, then the exclusive
pass; a scenario INCONCLUSIVE only because the load client stalled is run again once).
Its outcomes are judged against the same expectations as the e2e suite
(``tests.e2e.expected_verdicts.unexpected_verdicts``) and its incident reports against the
diagnosis truth table (``tests.e2e.diagnosis_truth.judge``, the kernel's OOM kills read
from ``dmesg`` while the round ran). A first attempt the stall rule ran again is counted
apart: it is a harness stall, not an unexpected verdict, but it is listed with its cause.

    .venv/bin/python bench/catalogue_repeat.py --rounds 3 --json bench/results/catalogue_repeat.json

Run it on the testbed (``faultkit testbed up``) with nothing else running: the lanes share
the machine's cores. A round takes about as long as CI's catalogue (~18 min here).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from faultkit.inventory import load_inventory  # noqa: E402
from tests.e2e.diagnosis_truth import judge, oom_kills_in  # noqa: E402
from tests.e2e.expected_verdicts import unexpected_verdicts  # noqa: E402
from tests.e2e.kernel_log import KernelLog  # noqa: E402
from tests.e2e.scenario_suite import Outcome, run_scenario_lanes  # noqa: E402

INVENTORY = REPO / "testbed" / "inventory.yaml"


def one_round(out: Path) -> dict[str, Any]:
    """One catalogue run in ``out``: what ran, what was unexpected, which reports missed
    the truth, which first attempts the harness's stall reran."""
    inventory = load_inventory(INVENTORY)
    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    kernel = KernelLog(out / "dmesg.log").start()  # the independent record of OOM kills
    try:
        code, outcomes, _output = run_scenario_lanes(out / "suite", inventory)
        oom_kills = oom_kills_in(kernel)
    finally:
        kernel.stop()
    ran = {t: o for t, o in outcomes.items() if not o.skipped}
    rows = judge([(t, o.run_dir) for t, o in ran.items()], oom_kills)
    return {
        "seconds": round(time.time() - started, 1),
        "exit_code": code,
        "scenario_runs": len(ran),
        "verdicts": _count_verdicts(ran),
        "unexpected": unexpected_verdicts(outcomes),
        "reports_judged": len(rows),
        "reports_missing_the_truth": [f"{r.test_id}: {'; '.join(r.problems)}"
                                      for r in rows if not r.matches],
        "stall_reruns": [_stall_line(t, o) for t, o in outcomes.items() if o.earlier],
        "runs_root": str(out / "suite"),
    }


def _count_verdicts(ran: dict[str, Outcome]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome in ran.values():
        verdict = outcome.verdict or ("PASS" if outcome.passed else "FAIL")
        counts[verdict] = counts.get(verdict, 0) + 1
    return dict(sorted(counts.items()))


def _stall_line(test_id: str, outcome: Outcome) -> str:
    first = outcome.earlier[0]
    return (f"{test_id}: first attempt {first.verdict} ({first.message[:200]}); "
            f"rerun {outcome.verdict or ('PASS' if outcome.passed else 'FAIL')}")


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    runs = sum(r["scenario_runs"] for r in rounds)
    unexpected = sum(len(r["unexpected"]) for r in rounds)
    missed = sum(len(r["reports_missing_the_truth"]) for r in rounds)
    stalls = sum(len(r["stall_reruns"]) for r in rounds)

    def per_1000(n: int) -> float | None:
        return round(1000 * n / runs, 1) if runs else None

    return {"rounds": len(rounds), "scenario_runs": runs,
            "unexpected_verdicts": unexpected, "unexpected_per_1000": per_1000(unexpected),
            "reports_missing_the_truth": missed, "stall_reruns": stalls,
            "stall_reruns_per_1000": per_1000(stalls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="keep the rounds' run directories here "
                        "(default: a new directory under the system's temp dir)")
    parser.add_argument("--json", type=Path, help="write the result here too")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    out = args.out or Path(tempfile.mkdtemp(prefix="catalogue-repeat-"))
    rounds: list[dict[str, Any]] = []
    for k in range(1, args.rounds + 1):
        print(f"[catalogue_repeat] round {k} of {args.rounds} (runs under {out})",
              file=sys.stderr, flush=True)
        rounds.append(one_round(out / f"round-{k}"))
        last = rounds[-1]
        print(f"[catalogue_repeat] round {k}: {last['scenario_runs']} scenario runs in "
              f"{last['seconds']:.0f} s, {len(last['unexpected'])} unexpected verdict(s), "
              f"{len(last['reports_missing_the_truth'])} report(s) missing the truth, "
              f"{len(last['stall_reruns'])} stall rerun(s)", file=sys.stderr, flush=True)
        for line in last["unexpected"] + last["reports_missing_the_truth"] + last["stall_reruns"]:
            print(f"  {line}", file=sys.stderr, flush=True)
    result = {"summary": summarise(rounds), "rounds": rounds}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
