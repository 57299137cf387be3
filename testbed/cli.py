"""``faultkit testbed up | down | status``: the local lab from the command line."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from faultkit.commands.input import inventory_option
from faultkit.runtime.progress import Progress
from testbed.lab import HOST2, SKIPPABLE_NODES, Lab


def _progress() -> Progress:
    """Each step of the lab on stderr: a live spinner line (step, elapsed, the last line a
    long build printed) on a terminal; plain timestamped lines under CI, in a pipe or with
    TERM=dumb."""
    return Progress(prefix=lambda: f"[testbed {time.strftime('%H:%M:%S')}] ")


@click.group(short_help="bring the local lab up / down / show its status")
@inventory_option
@click.pass_context
def testbed(ctx: click.Context, inventory_path: Path) -> None:
    """The local lab: a real llama.cpp node, simulated vLLM/SGLang nodes, real Prometheus."""
    ctx.obj = inventory_path


@testbed.command()
@click.option(
    "--skip",
    "skip",
    multiple=True,
    type=click.Choice(sorted({*SKIPPABLE_NODES, HOST2})),
    help="leave a heavy node out (the real vLLM node: ~1.3 GiB, ~30 s per start; the "
    "LiteLLM gateway: a ~760 MiB virtualenv, ~2 min to build once), or the second Docker "
    "host and its nodes (host2: ~15 s the first time); "
    "run scenarios with --node for the others then",
)
@click.pass_obj
def up(inventory_path: Path, skip: tuple[str, ...]) -> None:
    """Install what is missing and start every node, Alertmanager, the pager and Prometheus
    (idempotent)."""
    Lab(inventory_path, progress=_progress()).up(frozenset(skip))


@testbed.command()
@click.pass_obj
def down(inventory_path: Path) -> None:
    """Remove every container and network the testbed created, and stop Prometheus,
    Alertmanager and the pager."""
    Lab(inventory_path, progress=_progress()).down()


@testbed.command()
@click.pass_obj
def status(inventory_path: Path) -> None:
    """One row per node: container state, readiness, Prometheus target health; then
    Prometheus, Alertmanager and the pager, ready or not."""
    lab = Lab(inventory_path, progress=_progress())
    rows = lab.status()
    headers = ("NODE", "ENGINE", "CONTAINER", "STATE", "RESTARTS", "READY", "TARGET", "STARTED")
    table = [headers] + [
        (
            r.name,
            r.engine,
            r.container,
            r.state,
            "-" if r.restarts is None else str(r.restarts),
            r.ready,
            r.target,
            r.started,
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    for row in table:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    prom_ready = lab.prometheus_ready()
    prom_state = "ready" if prom_ready else "NOT READY"
    click.echo(f"Prometheus {lab.inventory.prometheus.url}: {prom_state}")
    paging = lab.paging_ready()
    for what, url, ready in paging:
        click.echo(f"{what} {url}: {'ready' if ready else 'NOT READY'}")
    nodes_ready = all(r.ready == "ready" for r in rows if r.state != "absent")
    if not (prom_ready and nodes_ready and all(ready for _, _, ready in paging)):
        sys.exit(1)
