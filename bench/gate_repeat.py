"""False alarms of the gate: the same known-good config gated again and again.

Each round runs ``faultkit gate --node NODE --config CONFIG`` as a user would (its
defaults: 30 s steady-state windows, a 60 s soak, every ``gate`` scenario) and records the
decision, how long it took and each scenario's verdict. A known-good config that is
gated onto itself must PASS every time: every FAIL or INCONCLUSIVE is a false alarm.

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


def one_gate(node: str, config: str, extra: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="faultkit-gate-repeat-") as out:
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "faultkit.cli", "gate", "--node", node, "--config", config,
             "--out", out, *extra],
            capture_output=True, text=True, check=False, timeout=3600)
        seconds = time.monotonic() - started
        gates = sorted(Path(out).glob("gate-*"))
        data: dict[str, Any] = (json.loads((gates[-1] / "gate.json").read_text())
                                if gates and (gates[-1] / "gate.json").exists() else {})
    return {
        "exit": proc.returncode, "seconds": round(seconds, 1),
        "decision": data.get("decision"), "why": data.get("why"),
        "scenarios": {s.get("name"): s.get("outcome") for s in data.get("scenarios", [])},
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
    for i in range(args.rounds):
        result = one_gate(args.node, args.config, args.gate_args)
        rounds.append(result)
        print(f"round {i + 1}: {result['decision']} (exit {result['exit']}) in "
              f"{result['seconds']:.0f} s" + (f" — {result['why']}" if result["exit"] else ""),
              flush=True)
    alarms = sum(1 for r in rounds if r["decision"] != "pass")
    seconds = [r["seconds"] for r in rounds]
    summary = {"node": args.node, "config": args.config, "rounds": len(rounds),
               "false_alarms": alarms, "seconds_min": min(seconds),
               "seconds_max": max(seconds), "runs": rounds}
    print(f"{alarms} false alarm(s) in {len(rounds)} gates; {min(seconds):.0f}–"
          f"{max(seconds):.0f} s each")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
