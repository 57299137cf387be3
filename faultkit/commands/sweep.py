"""``faultkit sweep``: revert every fault a killed harness left applied (idempotent).

The policy is :func:`faultkit.sweep.sweep`'s: a ``shell`` undo step runs only when the
inventory has it as a serving config's ``rollback:``, and records older than ``--max-age``
(default 1 h) are listed, not replayed, unless ``--force``. Exit status: 0 when nothing is
left applied, 1 when a record could not be reverted or was refused or not replayed (each
listed with what to do), 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path

import click

from faultkit.commands.input import inventory_option, parse_duration
from faultkit.durations import human_duration
from faultkit.inventory import load_inventory
from faultkit.journal import FaultJournal
from faultkit.sweep import LEFT_APPLIED, MAX_AGE_S
from faultkit.sweep import sweep as run_sweep


@click.command()
@inventory_option
@click.option("--journal-dir", type=click.Path(file_okay=False), default=None,
              help="journal directory (default: $FAULTKIT_HOME/journal)")
@click.option("--max-age", default=human_duration(MAX_AGE_S), show_default=True,
              help="replay only records younger than this (e.g. 30m, 1h, 2d)")
@click.option("--force", is_flag=True, help="replay records older than --max-age too")
def sweep(inventory_path: Path, journal_dir: str | None, max_age: str, force: bool) -> None:
    """Revert every fault recorded in the journal whose harness process is gone.

    A `shell` undo step runs only when it is the `rollback:` of a serving config in the
    inventory.
    """
    max_age_s = parse_duration(max_age, option="--max-age", max_s=366 * 86400)
    inventory = load_inventory(inventory_path)
    journal = FaultJournal(Path(journal_dir) if journal_dir else None)
    lines = run_sweep(journal, inventory=inventory, max_age_s=max_age_s, force=force)
    for line in lines:
        click.echo(line)
    live = [r for r in journal.unreverted() if journal.is_live(r.id)]
    for record in live:
        click.echo(f"left alone (its harness, pid {record.pid}, is still running): "
                   f"{record.id} {record.description}")
    if not lines and not live:
        click.echo(f"nothing to sweep ({journal.directory})")
    if any(line.startswith(LEFT_APPLIED) for line in lines):
        raise SystemExit(1)
