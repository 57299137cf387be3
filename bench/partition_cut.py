"""When a ``partition mode=refuse`` cuts a node off, by three clocks: the cut watch, Docker's
``disconnect`` event and the API call's return.

Each trial runs the real fault (``faultkit.faults.make_fault``) on a testbed node, records
its timeline and reads Docker's own network events for the container. Times are seconds
after the fault's first act (``act``: just before the first ``disconnect`` call). The cut
watch's bracket (last answer → first failure) is where the node's clients lost it;
Docker's event and the call's return come after Docker's whole operation. ``--busy N``
keeps N busy-looping processes running meanwhile (a loaded CI machine). The lab must be up
(``faultkit testbed up``).

    .venv/bin/python bench/partition_cut.py --trials 10 --busy 0 --busy 4 \\
        --json bench/results/partition-cut.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
from pathlib import Path
from typing import Any

from faultkit.docker.host import DockerHost
from faultkit.faults import make_fault
from faultkit.inventory import Inventory, load_inventory
from faultkit.journal import FaultJournal
from faultkit.model.events import EventKind
from faultkit.model.records import Event
from faultkit.probes.health import wait_ready

INVENTORY = Path(__file__).resolve().parents[1] / "testbed" / "inventory.yaml"


def _spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


async def trial(inventory: Inventory, node_name: str, journal_dir: Path) -> dict[str, Any]:
    node = inventory.node(node_name)
    assert node.docker is not None
    events: list[Event] = []
    fault = make_fault("partition", node, inventory=inventory, timeline=events.append,
                       journal=FaultJournal(journal_dir), mode="refuse")
    t0 = time.time()
    async with fault:
        await asyncio.sleep(0.5)
    await wait_ready(node, timeout_s=30)
    docker = DockerHost(node.docker.host)
    disconnects = [int(e["timeNano"]) / 1e9
                   for e in docker.events(node.docker.container, t0, time.time())
                   if e.get("Type") == "network" and e.get("Action") == "disconnect"]
    act = next(e.t for e in events if e.kind == EventKind.ACT)
    effects = [e for e in events if e.kind == EventKind.EFFECT]
    observed = next((e for e in effects if e.data.get("evidence") == "observed"), None)
    confirmed = next(e.t for e in effects if e.data.get("evidence") == "mechanism")
    return {
        "cut_watch_last_answer_s": None if observed is None else observed.t - act,
        "cut_watch_first_failure_s": (None if observed is None
                                      else observed.t + observed.data["bracket_s"] - act),
        "docker_event_s": disconnects[0] - act if disconnects else None,
        "call_returned_s": confirmed - act,
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"trials": len(rows)}
    for key in rows[0]:
        values = [r[key] for r in rows if r[key] is not None]
        out[key] = ({"median": statistics.median(values), "max": max(values),
                     "min": min(values), "n": len(values)} if values else None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", default="sim-vllm")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--busy", type=int, action="append",
                        help="busy-looping processes beside the trials (repeat for several runs)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    inventory = load_inventory(INVENTORY)
    runs = []
    for busy in args.busy or [0]:
        rows = []
        for i in range(args.trials):
            spinners = [multiprocessing.Process(target=_spin, args=(time.time() + 5.0,))
                        for _ in range(busy)]
            for p in spinners:
                p.start()
            journal = Path(f"/tmp/faultkit-bench-cut-{i}")
            rows.append(asyncio.run(trial(inventory, args.node, journal)))
            for p in spinners:
                p.join()
            print(f"busy={busy} trial {i + 1}: {json.dumps(rows[-1])}", flush=True)
        runs.append({"busy": busy, "summary": summarise(rows), "trials": rows})
    print("| busy processes | cut watch: last answer → first failure (median) | "
          "Docker's disconnect event (median, max) | call returned (median, max) |")
    print("|---|---|---|---|")
    for run in runs:
        s = run["summary"]

        def ms(entry: dict[str, Any] | None, key: str) -> str:
            return "—" if entry is None else f"{entry[key] * 1000:.0f} ms"

        print(f"| {run['busy']} | {ms(s['cut_watch_last_answer_s'], 'median')} → "
              f"{ms(s['cut_watch_first_failure_s'], 'median')} | "
              f"{ms(s['docker_event_s'], 'median')}, {ms(s['docker_event_s'], 'max')} | "
              f"{ms(s['call_returned_s'], 'median')}, {ms(s['call_returned_s'], 'max')} |")
    if args.json:
        args.json.write_text(json.dumps({"node": args.node, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
