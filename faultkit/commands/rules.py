"""``faultkit rules``: Prometheus alerting and recording rules for the inventory's SLOs
(:func:`slo.rules.render_rules`)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from faultkit.commands.input import inventory_option
from faultkit.inventory import load_inventory
from slo.rules import render_rules

#: a Prometheus duration (``0s``, ``30s``, ``2m``, ``1h30m``): units largest first, each once
_PROM_DURATION = re.compile(r"(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?")


def _prom_duration(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Accept a Prometheus duration for an alert's ``for:``; anything else is bad input."""
    text = value.strip()
    if not text or not _PROM_DURATION.fullmatch(text):
        raise click.BadParameter(
            f"{value!r}: must be a Prometheus duration ≥ 0s, such as 0s, 30s, 2m or 1h30m"
        )
    return text


@click.command()
@inventory_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="write the rules file here (default: stdout)")
@click.option("--node-down-for", default="0s", show_default=True, callback=_prom_duration,
              help="`for:` of FaultkitNodeDown (0s = first failed scrape)")
def rules(inventory_path: Path, output: str | None, node_down_for: str) -> None:
    """Write Prometheus alerting and recording rules for the inventory's SLOs.

    Check them with `promtool check rules FILE` and add the file to `rule_files:`.
    """
    text = render_rules(load_inventory(inventory_path), node_down_for=node_down_for)
    if output:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
