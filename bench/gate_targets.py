"""The gate's time targets, measured in one run on one machine (docs/gate.md, "Targets").

Each case is ``faultkit gate --node NODE --config CONFIG`` as a user runs it (the gate's
defaults unless the case names more arguments), one after the other on the lab, and is
held against its target:

- a good sim config on one node, a node's first gate (nothing earlier under ``--out``: the
  gate also measures the current config's peak throughput itself) — and its second gate
  under the same ``--out`` (what every later gate of that node costs);
- a candidate broken at start-up (``sim-vllm-bad-maxlen``: the simulator refuses its flags);
- with ``--vllm``, the known-good vLLM gate.

    .venv/bin/python bench/gate_targets.py [--vllm] [--json bench/results/gate-targets.json]

The JSON has one row per case: the gate's decision and why, its seconds, the target and
whether it was met (:func:`held`, pure). Run it on the lab with nothing else running
(``faultkit testbed up`` first).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate_repeat import one_gate


@dataclass(frozen=True)
class Case:
    label: str
    node: str
    config: str
    decision: str  # what the gate must decide
    target_s: float
    out: str  # cases naming the same out share earlier gates (their baselines)
    args: tuple[str, ...] = ()


CASES = (
    Case("good sim config, a node's first gate", "sim-vllm", "sim-vllm-good", "pass", 150.0,
         "sim"),
    Case("good sim config, the next gate", "sim-vllm", "sim-vllm-good", "pass", 150.0, "sim"),
    Case("broken at start-up", "sim-vllm", "sim-vllm-bad-maxlen", "fail", 60.0, "broken"),
)
VLLM = Case("known-good vLLM config", "vllm", "vllm-good", "pass", 360.0, "vllm")


def held(case: Case, row: Mapping[str, Any]) -> dict[str, Any]:
    """The case's row: the gate's record with its target and whether the decision was the
    expected one within the target's seconds."""
    seconds = row.get("seconds")
    in_time = isinstance(seconds, int | float) and seconds <= case.target_s
    return {"case": case.label, "node": case.node, "config": case.config,
            "args": list(case.args), "expected": case.decision,
            "decision": row.get("decision"), "why": row.get("why"), "seconds": seconds,
            "target_s": case.target_s,
            "met": bool(in_time and row.get("decision") == case.decision)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", action="store_true", help="also gate vllm-good (≈ 7.5 min)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    opts = parser.parse_args(argv)
    cases = (*CASES, VLLM) if opts.vllm else CASES
    rows = []
    with tempfile.TemporaryDirectory(prefix="faultkit-gate-targets-") as tmp:
        for case in cases:
            out = Path(tmp) / case.out
            out.mkdir(exist_ok=True)
            row = held(case, one_gate(case.node, case.config, list(case.args), out))
            rows.append(row)
            print(f"{case.label}: {row['decision']} in {row['seconds']} s (target "
                  f"{case.target_s:g} s: {'met' if row['met'] else 'NOT met'})", flush=True)
    text = json.dumps({"cases": rows}, indent=2)
    if opts.json:
        opts.json.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
