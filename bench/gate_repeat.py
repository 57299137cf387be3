"""False alarms of the gate: the same known-good config gated again and again.

Each round runs ``faultkit gate --node NODE --config CONFIG`` as a user would (its
defaults: 30 s steady-state windows, a 60 s soak, every ``gate`` scenario) and records the
decision, how long it took and each scenario's verdict. A known-good config that is
gated onto itself must PASS every time: every FAIL or INCONCLUSIVE is a false alarm. All
rounds write into one ``--out`` directory, so from the second round on each gate also
compares its scenarios with the round before (the gate's baseline: the current config's
newest passing runs there) — a figure regression between two gates of one config is a
false alarm of the baseline's tolerances.

    .venv/bin/python bench/gate_repeat.py --node sim-vllm --config sim-vllm-good \
        [--rounds 5] [--json bench/results/gate-repeat.json] [-- GATE ARGS]

Run it on the lab with nothing else running (``faultkit testbed up`` first).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def one_gate(node: str, config: str, extra: list[str], out: Path) -> dict[str, Any]:
    before = set(out.glob("gate-*"))
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "faultkit.cli", "gate", "--node", node, "--config", config,
         "--out", str(out), *extra],
        capture_output=True, text=True, check=False, timeout=3600)
    seconds = time.monotonic() - started
    gates = sorted(set(out.glob("gate-*")) - before)
    data: dict[str, Any] = (json.loads((gates[-1] / "gate.json").read_text())
                            if gates and (gates[-1] / "gate.json").exists() else {})
    baseline = data.get("baseline") or {}
    return {
        "exit": proc.returncode, "seconds": round(seconds, 1),
        "decision": data.get("decision"), "why": data.get("why"),
        "scenarios": {s.get("name"): s.get("outcome") for s in data.get("scenarios", [])},
        "figures": {s.get("name"): {k: s.get(k) for k in ("detection_s", "recovery_s", "lost")}
                    for s in data.get("scenarios", [])},
        "baseline_compared": len(baseline.get("runs") or {}),
        "figure_regressions": [r.get("line") for r in baseline.get("regressions") or []],
        "stderr_tail": proc.stderr[-800:] if proc.returncode else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("gate_args", nargs="*", help="after --: passed to faultkit gate")
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="faultkit-gate-repeat-") as out:
        for i in range(args.rounds):
            result = one_gate(args.node, args.config, args.gate_args, Path(out))
            rounds.append(result)
            print(f"round {i + 1}: {result['decision']} (exit {result['exit']}) in "
                  f"{result['seconds']:.0f} s, {result['baseline_compared']} scenarios "
                  "compared with the round before"
                  + (f" — {result['why']}" if result["exit"] else ""), flush=True)
    alarms = sum(1 for r in rounds if r["decision"] != "pass")
    seconds = [r["seconds"] for r in rounds]
    regressions = sum(len(r["figure_regressions"]) for r in rounds)
    summary = {"node": args.node, "config": args.config, "rounds": len(rounds),
               "false_alarms": alarms, "figure_regressions": regressions,
               "seconds_min": min(seconds),
               "seconds_max": max(seconds), "runs": rounds}
    print(f"{alarms} false alarm(s) in {len(rounds)} gates ({regressions} figure regression(s) "
          f"against the round before); {min(seconds):.0f}–{max(seconds):.0f} s each")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
