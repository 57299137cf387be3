"""Harness torture: kill the harness between its journal write and its revert, and count
what it leaves behind.

One trial starts ``faultkit inject KIND --duration 2s`` on a scratch node
(:mod:`testbed.scratch`: never the lab's own nodes) with a journal of its own, waits until
the fault's journal record is on disk (a fault is journalled before it acts), waits the
trial's delay and sends a signal:

- ``SIGKILL``: the harness dies with no chance to revert; ``faultkit sweep`` then reverts
  what the journal recorded;
- ``SIGINT`` (Ctrl-C): the harness reverts by itself; no sweep runs.

*Left behind* is every part of :func:`testbed.scratch.snapshot` (spec, networks, memory
limits, paused, running, the iptables rules faultkit tags in the container's namespace and
on the host, its qdiscs) that differs from the snapshot taken before the trial, a node that
no longer serves, and any journal record still unreverted. The evidence is Docker's
``inspect`` and the kernel's rule tables, read here, not what faultkit says it did.

Delays are drawn from a seeded generator: half in the first half second after the journal
write (before and during the act: for most kinds the act itself takes tens of milliseconds,
a rollout seconds), half spread over the hold and into the revert. Each trial records the
phase the harness had reached when the signal landed, read from its own event lines (its
stderr, line-buffered) just before sending it: ``journalled`` (no ``inject_start`` yet),
``applying``, ``holding``, ``reverting`` or ``reverted``.

``bench/fault_torture.py`` runs the torture table of docs/faults.md;
``tests/integration/test_fault_torture.py`` runs a few trials per kind in CI.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faultkit.errors import FaultkitError
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal
from faultkit.probes.health import wait_ready
from faultkit.sweep import sweep
from testbed.scratch import scratch_node, snapshot

#: how long each trial's fault is held before the harness reverts it by itself
HOLD_S = 2.0
#: the half of the delays that land in or just after the act
EARLY_S = 0.5
FAULTKIT = (sys.executable, "-m", "faultkit.cli")
#: the harness's event lines, in the order a fault goes through them, and the phase each opens
PHASES = (("inject_start", "applying"), ("inject_end", "holding"),
          ("revert_start", "reverting"), ("revert_end", "reverted"))


@dataclass(frozen=True)
class FaultCase:
    """One reversible fault kind with the parameters a trial injects it with."""

    kind: str
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return "-".join([self.kind, *self.params.values()])

    def argv(self) -> list[str]:
        out: list[str] = []
        for key, value in self.params.items():
            out += ["--param", f"{key}={value}"]
        return out


#: every reversible fault kind that acts on a container (the scratch node is a llama-server)
CASES: tuple[FaultCase, ...] = (
    FaultCase("pause"),
    FaultCase("stop"),
    FaultCase("partition", {"mode": "refuse"}),
    FaultCase("partition", {"mode": "blackhole"}),
    FaultCase("loss", {"percent": "30"}),
    FaultCase("latency", {"delay_ms": "200"}),
    FaultCase("bandwidth", {"rate": "1mbit"}),
    FaultCase("memory_squeeze", {"limit": "64m"}),
    FaultCase("rollout", {"config": "llama-alt"}),
)


@dataclass(frozen=True)
class TortureTrial:
    """What one trial did and what it left behind (empty: nothing)."""

    case: str
    signal: str
    delay_s: float
    phase: str
    exit_code: int | None
    left_behind: tuple[str, ...]
    sweep: tuple[str, ...]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def torture_node(lab_inventory: Inventory, name: str) -> tuple[Inventory, Node]:
    """A scratch llama-server node, with ``llama-alt`` (one slot instead of two) to roll out."""
    inventory, node = scratch_node(lab_inventory, name)
    good = inventory.serving_config("llama-good")
    alt = good.model_copy(update={"command": [a if a != "2" else "1" for a in good.command]})
    configs = {**inventory.serving_configs, "llama-alt": alt}
    return inventory.model_copy(update={"serving_configs": configs}), node


def draw_delays(count: int, seed: int, *, within_s: float | None = None) -> list[float]:
    """``count`` delays after the journal write: even trials early (``[0, EARLY_S)``), odd
    ones over the hold and into the revert (``[EARLY_S, HOLD_S + 1)``); with ``within_s``,
    all in ``[0, within_s)`` (to land inside a fast act: most take tens of milliseconds)."""
    rng = random.Random(seed)
    if within_s is not None:
        return [round(rng.uniform(0.0, within_s), 4) for _ in range(count)]
    return [round(rng.uniform(0.0, EARLY_S) if i % 2 == 0 else
                  rng.uniform(EARLY_S, HOLD_S + 1.0), 3) for i in range(count)]


def phase_reached(events_text: str) -> str:
    """The last phase the harness's event lines show (``journalled`` before any)."""
    reached = "journalled"
    for marker, phase in PHASES:
        if marker in events_text:
            reached = phase
    return reached


def run_trial(
    case: FaultCase, node: Node, inventory_file: Path, workdir: Path, signum: signal.Signals,
    delay_s: float,
) -> TortureTrial:
    """Inject ``case`` on ``node``, send ``signum`` ``delay_s`` after the journal write, sweep
    (after SIGKILL) and compare the node with its snapshot from before."""
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    journal_dir = workdir / "journal"
    events = workdir / "inject.stderr"
    before = snapshot(node)
    argv = [*FAULTKIT, "inject", case.kind, "--node", node.name, "--inventory",
            str(inventory_file), "--duration", f"{HOLD_S:g}s", "--journal-dir",
            str(journal_dir), *case.argv()]
    with events.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        try:
            _wait_for_record(proc, journal_dir, events)
            time.sleep(delay_s)
            # the phase reached when the signal lands (a Ctrl-C'd harness goes on to revert)
            phase = phase_reached(events.read_text(errors="replace"))
            proc.send_signal(signum)
            exit_code: int | None = proc.wait(90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    swept: list[str] = []
    if signum == signal.SIGKILL:
        out = subprocess.run([*FAULTKIT, "sweep", "--journal-dir", str(journal_dir),
                              "--inventory", str(inventory_file)],
                             capture_output=True, text=True, timeout=180, check=False)
        swept = [line for line in out.stdout.splitlines() if line.strip()]
        if out.returncode != 0:
            swept.append(f"sweep exited {out.returncode}: {out.stderr.strip()[-300:]}")
    left = left_behind(node, before, journal_dir)
    return TortureTrial(
        case=case.label, signal=signum.name, delay_s=delay_s,
        phase=phase, exit_code=exit_code,
        left_behind=tuple(left), sweep=tuple(swept),
        seconds=round(time.monotonic() - started, 2),
    )


def left_behind(node: Node, before: dict[str, Any], journal_dir: Path) -> list[str]:
    """What differs from ``before`` once the node serves again (or after 60 s of trying)."""
    left: list[str] = []
    try:
        asyncio.run(wait_ready(node, timeout_s=60))
    except FaultkitError as exc:
        left.append(f"not serving: {exc}")
    after = snapshot(node)
    left += [f"{key}: {before[key]!r} -> {after.get(key)!r}" for key in before
             if after.get(key) != before[key]]
    if journal_dir.exists():
        journal = FaultJournal(journal_dir)
        try:
            left += [f"journal: {r.id} still {r.state}" for r in journal.unreverted()]
        finally:
            journal.close()
    return left


def repair(journal_dir: Path) -> None:
    """After a trial that left something behind: replay its journal whatever the records'
    age, so the next trial starts from a clean node."""
    if journal_dir.exists():
        journal = FaultJournal(journal_dir)
        try:
            sweep(journal, force=True)
        finally:
            journal.close()


def _wait_for_record(proc: subprocess.Popen[bytes], journal_dir: Path, events: Path) -> None:
    """Until the fault's journal record is on disk (the harness writes it before acting)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if journal_dir.is_dir() and any(not p.name.startswith(".")
                                        for p in journal_dir.glob("*.json")):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"faultkit inject exited {proc.returncode} before journalling "
                               f"its fault: {events.read_text(errors='replace')[-800:]}")
        time.sleep(0.002)
    raise RuntimeError(f"no journal record in {journal_dir} within 60 s")
