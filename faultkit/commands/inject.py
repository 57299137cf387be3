"""``faultkit inject KIND --node N``: run one fault against a node for a while, then revert.

Checks everything it was given first — the fault kind, the node and the blast-radius
policy, every ``--param`` against its allowed range — and on bad input prints one line
and exits 2 before anything is journaled or touched (``--dry-run`` included). Then it runs
the sweep (so a fault a killed run left behind is reverted before a new one; a node the
sweep could not restore stays BLOCKED and the fault is refused, exit 2), shows a
live line with what is applied, and reverts at the end of ``--duration``, on Ctrl-C, on
SIGTERM or on SIGHUP (then it exits 128 + the signal's number; see
:mod:`faultkit.commands.interrupt`). ``--dry-run`` prints the plan and touches nothing;
it is refused like the real run when the journal shows the node BLOCKED.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from faultkit.commands.input import inventory_option, parse_duration
from faultkit.commands.interrupt import until_interrupted
from faultkit.faults import make_fault
from faultkit.faults.admission import existing_journal
from faultkit.inventory import load_inventory
from faultkit.journal import FaultJournal
from faultkit.model.records import Event
from faultkit.sweep import sweep as run_sweep

__all__ = ["inject", "parse_duration", "parse_params"]


def parse_params(pairs: tuple[str, ...]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: use key=value", param_hint="'--param'")
        params[key.strip()] = value.strip()
    return params


@click.command()
@click.argument("kind")
@click.option("--node", "node_name", required=True, help="node name from the inventory")
@inventory_option
@click.option("--duration", default="30s", show_default=True, help="e.g. 30s, 2m, 500ms")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="fault parameter")
@click.option("--dry-run", is_flag=True, help="print the plan; act on nothing")
@click.option("--journal-dir", type=click.Path(file_okay=False), default=None,
              help="journal directory (default: $FAULTKIT_HOME/journal)")
def inject(kind: str, node_name: str, inventory_path: Path, duration: str,
           params: tuple[str, ...], dry_run: bool, journal_dir: str | None) -> None:
    """Apply fault KIND to a node for --duration, then revert (also on Ctrl-C, SIGTERM, SIGHUP)."""
    seconds = parse_duration(duration)
    inventory = load_inventory(inventory_path)
    given = parse_params(params)
    # bad input (kind, node, policy, params) raises here, before anything is journaled
    plan = make_fault(kind, node_name, inventory=inventory, dry_run=True, **given)
    if dry_run:
        # a node blocked by a fault left applied refuses the plan too (reads, creates nothing)
        plan.refuse_if_blocked(existing_journal(Path(journal_dir) if journal_dir else None))
        click.echo(f"plan: {plan.describe()} for {seconds:g} s")
        return
    journal = FaultJournal(Path(journal_dir) if journal_dir else None)
    for line in run_sweep(journal, inventory=inventory):
        click.echo(f"sweep: {line}")

    def emit(event: Event) -> None:
        extra = {k: v for k, v in event.data.items() if k not in ("fault", "id", "params")}
        stamp = time.strftime("%H:%M:%S", time.localtime(event.t))
        click.echo(f"\r{stamp} {event.kind}" + (f" {json.dumps(extra)}" if extra else ""),
                   err=True)

    fault = make_fault(kind, node_name, inventory=inventory, timeline=emit, journal=journal,
                       **given)
    signum = asyncio.run(_run(fault, seconds))
    if fault.result:
        click.echo("result: " + json.dumps(fault.result, default=str))
    if fault.guard_reason:
        click.echo(f"ended early: {fault.guard_reason}")
    if signum:
        raise SystemExit(128 + signum)


async def _run(fault: Any, seconds: float) -> int:
    """Hold the fault; return the signal number that ended it early (0 if none)."""
    _, signum = await until_interrupted(_hold(fault, seconds))
    if signum:
        click.echo("interrupted: fault reverted", err=True)
    return signum


async def _hold(fault: Any, seconds: float) -> None:
    """Inject, keep the fault applied for ``seconds`` (a live line on a terminal), revert."""
    live = sys.stderr.isatty()
    async with fault:
        # said once it holds: a fault its journal refused was never applied
        click.echo(f"applied: {fault.describe()} for {seconds:g} s")
        start = time.monotonic()
        while (left := seconds - (time.monotonic() - start)) > 0 and fault.active:
            if live:
                sys.stderr.write(f"\r[applied {seconds - left:5.1f}/{seconds:g} s] "
                                 f"{fault.describe()} (mode {fault.mode or '-'})\x1b[K")
                sys.stderr.flush()
            await fault.hold(min(1.0, left))
        if live:
            sys.stderr.write("\n")
