"""A gate on one node against the same gate across a pool, interleaved in one run.

Each round gates CONFIG twice as a user would — ``faultkit gate --node NODE`` and then
``faultkit gate --node NODE --pool OTHER …`` — with the same options (``-- GATE ARGS``:
e.g. ``--steady-s 10 --soak-s 30``), and records how long each took, its decision and each
scenario's verdict. A known-good config must PASS both ways every time (a FAIL or
INCONCLUSIVE is a false alarm), and the pool must run the same scenarios (keyed across
nodes) as the single node. The ratio ``single_s / pool_s`` of each round compares two gates
run minutes apart on the same machine; the summary gives the median.

    .venv/bin/python bench/gate_pool.py --node sim-vllm --pool sim-vllm-h2 \
        --config sim-vllm-good [--rounds 2] [--extra-sim-nodes N] [--json FILE] [-- GATE ARGS]

``--extra-sim-nodes N`` measures a larger pool than the testbed has: it writes a copy of
the testbed inventory with N more nodes like NODE (``NODE-p1`` …, on free loopback ports),
brings them up with ``faultkit testbed --inventory COPY up`` (Prometheus scrapes them like
the others), adds them to the pool, and afterwards removes their containers and runs
``faultkit testbed up`` again, which puts Prometheus back on the testbed's own nodes.

Run it on the lab with nothing else running (``faultkit testbed up`` first).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from faultkit.gate.pool import node_of, scenario_key

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gate_repeat import one_gate  # a sibling script, not a package


def scenario_keys(scenarios: dict[str, Any], nodes: list[str]) -> list[str]:
    """The gate's test names with their node replaced by ``{node}`` (longest name first)."""
    return sorted(scenario_key(name, node_of(name, nodes) or "") for name in scenarios)


REPO = Path(__file__).resolve().parents[1]
TESTBED_INVENTORY = REPO / "testbed" / "inventory.yaml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _faultkit(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "faultkit.cli", *args], check=True, timeout=1800)


@contextlib.contextmanager
def extra_nodes(node: str, count: int) -> Iterator[tuple[list[str], list[str]]]:
    """``count`` more nodes like ``node`` on the lab, for the bench's duration: yields their
    names and the gate arguments that name the inventory holding them."""
    if count == 0:
        yield [], []
        return
    data = yaml.safe_load(TESTBED_INVENTORY.read_text())
    model = next(n for n in data["nodes"] if n["name"] == node)
    names = []
    for i in range(1, count + 1):
        name = f"{node}-p{i}"
        names.append(name)
        data["nodes"].append({
            **model, "name": name, "base_url": f"http://127.0.0.1:{_free_port()}",
            "docker": {**model["docker"], "container": f"faultkit-{name}"},
            "prometheus": {**model.get("prometheus", {}), "job": name},
        })
    # beside the original: paths in it are relative to the testbed directory
    copy = TESTBED_INVENTORY.with_name("inventory-gate-pool-bench.yaml")
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        _faultkit("testbed", "--inventory", str(copy), "up")
        yield names, ["--inventory", str(copy)]
    finally:
        subprocess.run(["docker", "rm", "-f", *(f"faultkit-{n}" for n in names)],
                       check=False, capture_output=True)
        copy.unlink(missing_ok=True)
        _faultkit("testbed", "up")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", required=True)
    parser.add_argument("--pool", action="append", required=True, help="repeatable")
    parser.add_argument("--config", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--extra-sim-nodes", type=int, default=0,
                        help="this many more nodes like --node, for the bench only")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("gate_args", nargs="*", help="after --: passed to faultkit gate")
    args = parser.parse_args()
    rounds: list[dict[str, Any]] = []
    with (extra_nodes(args.node, args.extra_sim_nodes) as (extra, inventory_args),
          tempfile.TemporaryDirectory(prefix="faultkit-gate-pool-") as tmp):
        nodes = [args.node, *args.pool, *extra]
        pool_args = [a for n in nodes[1:] for a in ("--pool", n)]
        gate_args = [*inventory_args, *args.gate_args]
        for i in range(args.rounds):
            single = one_gate(args.node, args.config, gate_args, Path(tmp) / "single")
            pooled = one_gate(args.node, args.config, [*pool_args, *gate_args],
                              Path(tmp) / "pool")
            same = (scenario_keys(single["scenarios"], nodes)
                    == scenario_keys(pooled["scenarios"], nodes))
            ratio = single["seconds"] / pooled["seconds"] if pooled["seconds"] else None
            rounds.append({"single": single, "pool": pooled, "same_scenarios": same,
                           "ratio_single_vs_pool": round(ratio, 2) if ratio else None})
            print(f"round {i + 1}: single {single['decision']} in {single['seconds']:.0f} s, "
                  f"pool of {len(nodes)} {pooled['decision']} in {pooled['seconds']:.0f} s "
                  f"({ratio or 0:.2f}x); same scenarios: {same}", flush=True)
    alarms = sum(r[side]["decision"] != "pass" for r in rounds for side in ("single", "pool"))
    ratios = [r["ratio_single_vs_pool"] for r in rounds if r["ratio_single_vs_pool"]]
    summary = {
        "node": args.node, "pool": nodes[1:], "config": args.config,
        "gate_args": args.gate_args, "rounds": len(rounds),
        "single_s": [r["single"]["seconds"] for r in rounds],
        "pool_s": [r["pool"]["seconds"] for r in rounds],
        "ratio_single_vs_pool_median": statistics.median(ratios) if ratios else None,
        "false_alarms": alarms,
        "same_scenarios_every_round": all(r["same_scenarios"] for r in rounds),
        "runs": rounds,
    }
    print(f"single {summary['single_s']} s, pool {summary['pool_s']} s; median ratio "
          f"{summary['ratio_single_vs_pool_median']}; {alarms} false alarm(s)")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
