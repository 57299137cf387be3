"""Harness torture table: faults left behind when the harness is killed mid-fault.

For each reversible fault kind (``testbed.torture.CASES``), ``--trials`` times: start
``faultkit inject`` on a scratch llama-server node, SIGKILL it at a drawn moment between
its journal write and its revert (half of them in the first 0.5 s: before and during the
act), run ``faultkit sweep``, and compare the node with a snapshot taken before (Docker's
inspect, the iptables rules and qdiscs). Then ``--sigint-trials`` times Ctrl-C (SIGINT)
mid-partition, with no sweep: the harness must revert by itself. Prints the torture table of
docs/faults.md and writes every trial to ``--json``. The lab must be up (``faultkit testbed up``).

    .venv/bin/python bench/fault_torture.py --trials 20 --sigint-trials 50 \\
        --json bench/results/fault-torture.json
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from faultkit.docker.host import docker_host
from testbed.lab import Lab
from testbed.scratch import remove_scratch, write_inventory
from testbed.torture import (
    CASES,
    FaultCase,
    TortureTrial,
    draw_delays,
    repair,
    run_trial,
    torture_node,
)

SIGINT_CASE = FaultCase("partition", {"mode": "blackhole"})


def summarise(trials: list[TortureTrial]) -> list[dict[str, Any]]:
    rows = []
    for key in dict.fromkeys((t.case, t.signal) for t in trials):
        mine = [t for t in trials if (t.case, t.signal) == key]
        rows.append({
            "case": key[0], "signal": key[1], "trials": len(mine),
            "left_behind": sum(1 for t in mine if t.left_behind),
            "phases": dict(Counter(t.phase for t in mine)),
            "max_trial_s": max(t.seconds for t in mine),
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| fault | signal | left behind / trials | phase reached when the signal landed |",
           "|---|---|---|---|"]
    for r in rows:
        phases = ", ".join(f"{p} {n}" for p, n in sorted(r["phases"].items()))
        out.append(f"| {r['case']} | {r['signal']} | {r['left_behind']} / {r['trials']} | "
                   f"{phases} |")
    return "\n".join(out)


def main(trials: int, sigint_trials: int, seed: int, only: list[str], out: Path | None,
         within_s: float | None = None) -> int:
    lab = Lab(progress=lambda message: print(f"[testbed] {message}", file=sys.stderr))
    lab.up()
    inventory, node = torture_node(lab.inventory, "fk-torture")
    results: list[TortureTrial] = []
    plan: list[tuple[FaultCase, signal.Signals, list[float]]] = [
        (case, signal.SIGKILL, draw_delays(trials, seed, within_s=within_s)) for case in CASES
        if not only or case.label in only
    ]
    if sigint_trials:
        plan.append((SIGINT_CASE, signal.SIGINT, draw_delays(sigint_trials, seed + 1)))
    try:
        with tempfile.TemporaryDirectory(prefix="faultkit-torture-") as tmp:
            inventory_file = write_inventory(inventory, Path(tmp) / "inventory.yaml")
            for case, signum, delays in plan:
                for i, delay in enumerate(delays):
                    workdir = Path(tmp) / f"{case.label}-{signum.name}-{i}"
                    trial = run_trial(case, node, inventory_file, workdir, signum, delay)
                    results.append(trial)
                    mark = f" LEFT BEHIND: {'; '.join(trial.left_behind)}" \
                        if trial.left_behind else ""
                    print(f"[{case.label} {signum.name} {i + 1}/{len(delays)}] delay "
                          f"{delay:.3f} s, {trial.phase}, {trial.seconds:.1f} s{mark}",
                          file=sys.stderr)
                    if trial.left_behind:
                        repair(workdir / "journal")
    finally:
        remove_scratch(docker_host(node.docker.host), node.docker.container)  # type: ignore[union-attr]
    rows = summarise(results)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"seed": seed, "summary": rows,
                                   "trials": [t.to_json() for t in results]}, indent=2))
    print(table(rows))
    return 1 if any(r["left_behind"] for r in rows) else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="SIGKILL trials per fault kind")
    parser.add_argument("--sigint-trials", type=int, default=50,
                        help="Ctrl-C trials of a blackhole partition")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--case", action="append", default=[],
                        choices=[c.label for c in CASES], help="only these (repeatable)")
    parser.add_argument("--within", type=float, default=None, metavar="SECONDS",
                        help="draw every SIGKILL delay in [0, SECONDS) (e.g. 0.03: inside "
                             "the act of a fast fault)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.trials < 0 or args.sigint_trials < 0:
        parser.error("--trials and --sigint-trials must be ≥ 0")
    sys.exit(main(args.trials, args.sigint_trials, args.seed, args.case, args.json,
                  args.within))
