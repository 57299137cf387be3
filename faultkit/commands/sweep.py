"""``faultkit sweep``: revert every fault a killed harness left applied (idempotent)."""

from __future__ import annotations

import click

from faultkit.journal import FaultJournal
from faultkit.sweep import sweep as run_sweep


@click.command()
@click.option("--inventory", "inventory_path", type=click.Path(dir_okay=False), default=None,
              help="accepted for symmetry with inject; the journal alone says what to revert")
@click.option("--journal-dir", type=click.Path(file_okay=False), default=None,
              help="journal directory (default: $FAULTKIT_HOME/journal)")
def sweep(inventory_path: str | None, journal_dir: str | None) -> None:
    """Revert every fault recorded in the journal whose harness process is gone."""
    from pathlib import Path

    journal = FaultJournal(Path(journal_dir) if journal_dir else None)
    lines = run_sweep(journal)
    for line in lines:
        click.echo(line)
    live = [r for r in journal.unreverted() if journal.is_live(r.id)]
    for record in live:
        click.echo(f"left alone (its harness, pid {record.pid}, is still running): "
                   f"{record.id} {record.description}")
    if not lines and not live:
        click.echo(f"nothing to sweep ({journal.directory})")
    if any(line.startswith("FAILED") for line in lines):
        raise SystemExit(1)
