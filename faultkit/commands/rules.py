"""``faultkit rules``: Prometheus alerting and recording rules for the inventory's SLOs
(:func:`slo.rules.render_rules`)."""

from __future__ import annotations

from pathlib import Path

import click

from faultkit.commands.input import inventory_option
from faultkit.constants import FAULTKIT_ALERTS
from faultkit.inventory import load_inventory
from faultkit.model.durations import parse_model_duration
from slo.rules import render_rules


def _prom_duration(ctx: click.Context, param: click.Parameter, value: str | None
                   ) -> str | None:
    """Accept a Prometheus duration for an alert's ``for:``; anything else is bad input."""
    if value is None:
        return None
    try:
        parse_model_duration(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: must be a Prometheus duration ≥ 0s, such as 0s, 30s, 2m or 1h30m"
        ) from None
    return value.strip()


def _alert_for(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
               ) -> dict[str, str]:
    """``ALERT=DURATION`` pairs naming faultkit alerts; anything else is bad input."""
    out: dict[str, str] = {}
    for pair in values:
        name, sep, duration = pair.partition("=")
        if not sep or name.strip() not in FAULTKIT_ALERTS:
            raise click.BadParameter(
                f"{pair!r}: use ALERT=DURATION with ALERT one of {', '.join(FAULTKIT_ALERTS)}")
        checked = _prom_duration(ctx, param, duration)
        assert checked is not None
        out[name.strip()] = checked
    return out


@click.command()
@inventory_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="write the rules file here (default: stdout)")
@click.option("--node-down-for", default=None, callback=_prom_duration,
              help="`for:` of FaultkitNodeDown on every node (default 0s: the first failed "
              "scrape; a node's prometheus.alert_for otherwise)")
@click.option("--for", "alert_for", multiple=True, metavar="ALERT=DURATION",
              callback=_alert_for,
              help="`for:` of one faultkit alert on every node, e.g. FaultkitNodeDown=1m "
              "(repeatable; over the inventory's prometheus.alert_for)")
def rules(inventory_path: Path, output: str | None, node_down_for: str | None,
          alert_for: dict[str, str]) -> None:
    """Write Prometheus alerting and recording rules for the inventory's SLOs.

    Check them with `promtool check rules FILE` and add the file to `rule_files:`.
    """
    fors = ({"FaultkitNodeDown": node_down_for} if node_down_for else {}) | alert_for
    text = render_rules(load_inventory(inventory_path), alert_for=fors)
    if output:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
