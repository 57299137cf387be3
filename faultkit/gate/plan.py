"""``faultkit gate --dry-run``: what the gate would do, acting on nothing.

The plan of the rollout and the configs' difference, each gate scenario's fault plan (the
scenarios run under the plugin's ``--dry-run``), and for a pool (``--pool``) how the
scenarios would be split among its nodes now (:func:`.gate_pool.split_scenarios`, with the
durations of the earlier gates under ``--out``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import click

from faultkit.errors import FaultkitError
from faultkit.experiment.speculation import speculation_check
from faultkit.faults import make_fault
from faultkit.faults.admission import existing_journal
from faultkit.gate.capability import KV_RATIO_MIN
from faultkit.gate.current_peak import plan_line
from faultkit.gate.decision import config_diff
from faultkit.gate.feed import ORDER_ENV
from faultkit.gate.load import describe_profile
from faultkit.gate.order import ScenarioOrder
from faultkit.gate.pool import (
    collect_gate_scenarios,
    expected_share_s,
    gathered,
    measured_seconds,
    split_scenarios,
)
from faultkit.gate.scenarios import scenario_argv, scenarios_dir
from faultkit.inventory import Inventory, Node
from faultkit.load.profile import LoadProfile
from faultkit.load.prompts import WORKLOADS

__all__ = ["dry_run", "print_split"]


def dry_run(inventory: Inventory, node: Node, config: str, pytest_args: tuple[str, ...],
            steady_s: float, profile: LoadProfile, *, order: ScenarioOrder,
            stop_at_first: bool, baseline_dir: Path, promote: bool = False,
            pool: Sequence[Node] = ()) -> int:
    """Print what the gate would do on ``node``; the scenarios run under the plugin's
    ``--dry-run``, which prints each fault plan, in the gate's ``order``, and acts on
    nothing. Returns pytest's exit code. A node BLOCKED by a fault left applied refuses the
    plan, as it would refuse the rollout."""
    plan = make_fault("rollout", node, inventory=inventory, dry_run=True, config=config)
    plan.refuse_if_blocked(existing_journal())
    steady = (f"steady state ({steady_s:g} s, {describe_profile(profile)}) of each config, "
              if steady_s else "steady state not checked, ")
    click.echo(f"gate plan (dry run): roll {config!r} onto {node.name} "
               f"(now {node.serving_config!r}), {steady}run the 'gate' scenarios, roll back")
    if len(pool) > 1 and node is pool[0]:
        click.echo(f"pool of {len(pool)} nodes ({', '.join(n.name for n in pool)}): the "
                   "candidate goes onto each; every node's gate scenarios are listed below, "
                   "and the gate runs each scenario on one of them (the split: at the end)")
    for line in config_diff(inventory, node.serving_config, config):
        click.echo(f"  {line.rstrip()}")
    if steady_s:
        click.echo("capabilities compared beside each steady state: context limit per request "
                   f"(any drop fails), KV cache (below ×{KV_RATIO_MIN:g} of the current's "
                   "fails), sequences at once where the engine serves a fixed number (any "
                   "drop fails)")
    check = speculation_check(inventory, node, config, steady_s, click.echo)
    if check is not None:
        click.echo(f"speculative decoding changes ({check.current_spec or 'off'} → "
                   f"{check.candidate_spec or 'off'}): each workload class "
                   f"({', '.join(WORKLOADS)}) for {check.seconds:g} s on each config; the "
                   f"gate fails if {node.name}'s {node.workload} workload is served slower")
    click.echo(plan_line(node, baseline_dir, promote=promote, now=time.time()))
    click.echo(f"scenarios: {scenarios_dir()}")
    click.echo(f"order: {order.why()}" + ("; the gate stops at the first scenario that does "
                                          "not pass (--full: all)" if stop_at_first else ""))
    with tempfile.TemporaryDirectory(prefix="faultkit-gate-dry-run-") as scratch:
        argv = scenario_argv(inventory, node, config, Path(scratch), None,
                             ["-rs", "--dry-run", *pytest_args])
        env = {**os.environ, ORDER_ENV: json.dumps(list(order.first))}
        return subprocess.run(argv, check=False, env=env).returncode


def print_split(inventory: Inventory, pool: Sequence[Node], config: str,
                pytest_args: Sequence[str], soak_s: float, gates_root: Path) -> int:
    """Print how a gate run now would split its scenarios among ``pool`` — each node's
    share and how long it is expected to take (earlier gates' durations under
    ``gates_root`` where there are any). Returns 0, or 1 when the scenarios could not be
    collected (the line says why)."""
    with tempfile.TemporaryDirectory(prefix="faultkit-gate-dry-run-") as scratch:
        try:
            collected = asyncio.run(gathered(*(
                collect_gate_scenarios(scenario_argv(inventory, n, config, Path(scratch), None,
                                                     pytest_args))
                for n in pool)))
        except FaultkitError as exc:
            click.echo(f"the split: {exc}")
            return 1
    names = [n.name for n in pool]
    measured = measured_seconds(gates_root, names)
    split = split_scenarios(dict(zip(names, collected, strict=True)), soak_s, measured)
    known = sum(len(m) for m in measured.values())
    click.echo(f"the split across the pool ({known} durations from earlier gates under "
               f"{gates_root}, fixed lengths for the rest):")
    for name in names:
        share = split[name]
        tests = ", ".join(t.rsplit("::", 1)[-1] for t in share) or "nothing"
        seconds = expected_share_s(share, name, soak_s, measured)
        click.echo(f"  {name} (~{seconds:.0f} s): {tests}")
    return 0
