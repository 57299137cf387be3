"""``faultkit inventory check FILE``: validate an inventory and say what is wrong."""

from __future__ import annotations

import click

from faultkit.errors import InventoryError
from faultkit.inventory import load_inventory


@click.group()
def inventory() -> None:
    """Work with inventory files."""


@inventory.command("check")
@click.argument("path", type=click.Path(dir_okay=False))
def check(path: str) -> None:
    """Validate PATH; exit 1 listing every problem with its line."""
    try:
        inv = load_inventory(path)
    except InventoryError as exc:
        for problem in exc.problems:
            click.echo(problem, err=True)
        raise SystemExit(1) from None
    click.echo(
        f"{path}: OK — {len(inv.nodes)} node(s) ({', '.join(inv.node_names)}), "
        f"{len(inv.serving_configs)} serving config(s), Prometheus {inv.prometheus.url}"
    )
