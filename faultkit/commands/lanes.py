"""``faultkit lanes``: the ``pytest scenarios`` commands that test independent nodes side by
side (:mod:`faultkit.lanes`), one process per lane, then the exclusive scenarios alone."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from faultkit.commands.input import inventory_option
from faultkit.inventory import load_inventory
from faultkit.lanes import EXCLUSIVE_MARK, plan_lanes


@click.command()
@inventory_option
@click.option("--lanes", "count", type=click.IntRange(1, 64), default=2, show_default=True,
              help="how many scenario processes run at once")
def lanes(inventory_path: Path, count: int) -> None:
    """Print the commands that run the scenario catalogue in lanes.

    Start the lane commands together (separate terminals, or `&` and `wait`), then run the
    last command alone. A gateway shares a lane with its upstreams. Lanes share the
    machine: CPU-bound engines side by side change each other's latency figures (on the
    2-core testbed, llama.cpp beside vLLM failed test_overload[llama] in one of two runs),
    so give each lane cores of its own.
    """
    inventory = load_inventory(inventory_path)
    where = shlex.quote(str(inventory_path))
    for lane in plan_lanes(inventory, count):
        click.echo(f"pytest scenarios --inventory {where} --node {lane.node_option()} "
                   f"-m 'not {EXCLUSIVE_MARK}'    # weight {lane.weight:g}")
    click.echo(f"pytest scenarios --inventory {where} -m {EXCLUSIVE_MARK}    # alone, after "
               "the lanes")
