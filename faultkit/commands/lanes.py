"""``faultkit lanes``: the ``pytest scenarios`` commands that test independent nodes side by
side (:mod:`faultkit.lanes`), one process per lane, then the exclusive scenarios alone."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from faultkit.commands.input import inventory_option
from faultkit.inventory import load_inventory
from faultkit.lanes import EXCLUSIVE_MARK, plan_passes


@click.command()
@inventory_option
@click.option("--lanes", "count", type=click.IntRange(1, 64), default=2, show_default=True,
              help="how many scenario processes run at once")
@click.option("--alone", "alone", multiple=True, metavar="ENGINE",
              help="keep this engine's nodes out of the lanes: test them after the lanes, "
                   "in one process (repeatable; e.g. --alone llamacpp --alone litellm)")
def lanes(inventory_path: Path, count: int, alone: tuple[str, ...]) -> None:
    """Print the commands that run the scenario catalogue in lanes.

    Start the lane commands together (separate terminals, or `&` and `wait`), then run the
    other commands one after the other. A gateway shares a lane with its upstreams. Lanes
    share the machine: CPU-bound engines side by side change each other's latency figures
    (on the 2-core testbed, llama.cpp beside vLLM failed test_overload[llama] in one of two
    runs), so give each lane cores of its own, or keep such engines --alone. CI runs
    `--lanes 4 --alone litellm --alone vllm` (README, "CI").
    """
    inventory = load_inventory(inventory_path)
    engines = {n.engine for n in inventory.nodes}
    unknown = sorted(set(alone) - engines)
    if unknown:
        raise click.BadParameter(f"no node of {inventory_path} runs {', '.join(unknown)} "
                                 f"(engines: {', '.join(sorted(engines))})", param_hint="--alone")
    plan = plan_passes(inventory, count, alone)
    where = shlex.quote(str(inventory_path))
    not_exclusive = f"-m 'not {EXCLUSIVE_MARK}'"
    for lane in plan.lanes:
        click.echo(f"pytest scenarios --inventory {where} --node {lane.node_option()} "
                   f"{not_exclusive}    # weight {lane.weight:g}")
    if plan.alone:
        click.echo(f"pytest scenarios --inventory {where} --node {','.join(plan.alone)} "
                   f"{not_exclusive}    # alone, after the lanes")
    click.echo(f"pytest scenarios --inventory {where} -m {EXCLUSIVE_MARK}    # alone, last")
