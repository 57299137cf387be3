"""``faultkit sweep``: revert every fault a killed harness left applied (idempotent).

The policy is :func:`faultkit.sweep.sweep`'s: a ``shell`` undo step runs only when the
inventory has it as a serving config's ``rollback:``, and records older than ``--max-age``
(default 1 h) are listed, not replayed, unless ``--force``. Exit status: 0 when nothing is
left applied, 1 when a record could not be reverted or was refused or not replayed (each
listed with what to do), 2 on bad input.

It also lists what live harnesses hold: their applied faults and their node locks
(``node n1 locked by fault pause-n1-1a2b3c4d (pause, pid 4242, 12 s)``), and, as
``BLOCKED node …``, every node that a record it left in the journal still blocks (no new
fault runs there: :mod:`faultkit.faults.admission`). ``--list`` lists the journal's state
(faults applied, whether their harness is alive, nodes blocked, node locks) and changes
nothing.
"""

from __future__ import annotations

from pathlib import Path

import click

from faultkit.commands.input import inventory_option, parse_duration
from faultkit.faults.admission import blocks_a_node, what_blocks
from faultkit.inventory import load_inventory
from faultkit.journal import FaultJournal, JournalRecord
from faultkit.model.durations import human_duration
from faultkit.sweep import LEFT_APPLIED, MAX_AGE_S
from faultkit.sweep import sweep as run_sweep


@click.command()
@inventory_option
@click.option("--journal-dir", type=click.Path(file_okay=False), default=None,
              help="journal directory (default: $FAULTKIT_HOME/journal)")
@click.option("--max-age", default=human_duration(MAX_AGE_S), show_default=True,
              help="replay only records younger than this (e.g. 30m, 1h, 2d)")
@click.option("--force", is_flag=True, help="replay records older than --max-age too")
@click.option("--list", "list_only", is_flag=True,
              help="list the faults applied and the node locks held; change nothing")
def sweep(inventory_path: Path, journal_dir: str | None, max_age: str, force: bool,
          list_only: bool) -> None:
    """Revert every fault recorded in the journal whose harness process is gone.

    A `shell` undo step runs only when it is the `rollback:` of a serving config in the
    inventory.
    """
    max_age_s = parse_duration(max_age, option="--max-age", max_s=366 * 86400)
    journal = FaultJournal(Path(journal_dir) if journal_dir else None)
    if list_only:
        _list(journal)
        return
    inventory = load_inventory(inventory_path)
    lines = run_sweep(journal, inventory=inventory, max_age_s=max_age_s, force=force,
                      helpers=True)
    for line in lines:
        click.echo(line)
    live = [r for r in journal.unreverted() if journal.is_live(r.id)]
    for record in live:
        click.echo(f"left alone (its harness, pid {record.pid}, is still running): "
                   f"{record.id} {record.description}")
    locks = journal.nodes.holders()
    for holder in locks:
        click.echo(holder.describe())
    if not lines and not live and not locks:
        click.echo(f"nothing to sweep ({journal.directory})")
    for record in journal.orphans():
        if blocks_a_node(record):
            click.echo(_blocked_line(record))
    if any(line.startswith(LEFT_APPLIED) for line in lines):
        raise SystemExit(1)


def _blocked_line(record: JournalRecord) -> str:
    return (f"BLOCKED node {record.node}: {what_blocks(record)}; no fault runs on it until "
            "`faultkit sweep` (or `faultkit sweep --force` for records older than 1 h) "
            "reverts it — check the node")


def _list(journal: FaultJournal) -> None:
    """Print the journal's state: faults applied (and whose), nodes blocked, node locks;
    touch nothing."""
    records = journal.unreverted()
    for record in records:
        if journal.is_live(record.id):
            click.echo(f"{record.id} {record.description} — applied, its harness "
                       f"(pid {record.pid}) is running")
        elif blocks_a_node(record):
            click.echo(_blocked_line(record))
        else:
            click.echo(f"{record.id} {record.description} — left by a harness that is gone: "
                       "`faultkit sweep` clears it")
    locks = journal.nodes.holders()
    for holder in locks:
        click.echo(holder.describe())
    for path in journal.corrupt():
        click.echo(f"unreadable journal record {path} (left for inspection)")
    if not records and not locks:
        click.echo(f"no fault applied, no node locked ({journal.directory})")
