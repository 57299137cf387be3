"""Command-line input shared by every ``faultkit`` command: the ``--inventory`` option,
parameter types, and bad input (one clear line on stderr and exit status 2).

:func:`inventory_option` is the one ``--inventory``: the command line, else
``$FAULTKIT_INVENTORY``, else :func:`default_inventory` (``./inventory.yaml``, else an
installed lab's), the same order as the pytest plugin's settings.

Exit status 1 means FAIL in faultkit (a gate that failed, a sweep that could not revert);
bad input must never look like that. :class:`BadInput` is the one exception for it: click
prints ``Error: <message>`` (one line, no usage block) and exits 2. ``faultkit.cli`` turns
click's own usage errors and faultkit's input errors (an unknown node or fault, a fault
parameter out of range, a malformed inventory, a refused fault) into it.

Click parameter types here refuse what ``float()`` accepts but no option can mean:
``nan``, ``inf`` and ``1e400``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

import click

from faultkit.model import durations
from faultkit.model.durations import human_duration

#: The inventory file a user keeps beside their runs: the default where it exists.
LOCAL_INVENTORY = Path("inventory.yaml")
#: The entry-point group through which a lab offers its inventory as the default (the
#: testbed registers ``testbed.paths:INVENTORY``): faultkit names no lab, a lab names
#: itself.
LAB_INVENTORIES = "faultkit.labs"
#: The environment variable naming the inventory (below ``--inventory``, above the default).
INVENTORY_ENV = "FAULTKIT_INVENTORY"

_F = TypeVar("_F", bound=Callable[..., Any])


def default_inventory() -> Path:
    """The inventory used when neither ``--inventory`` nor ``$FAULTKIT_INVENTORY`` names one
    (docs/inventory.md, "Which inventory"): ``./inventory.yaml`` where it exists, else the
    inventory of the lab installed beside faultkit (this checkout's testbed), else
    ``./inventory.yaml`` — whose absence the inventory loader reports with what to do.

    Resolved when asked, not at import: importing a command loads no lab.
    """
    if LOCAL_INVENTORY.is_file():
        return LOCAL_INVENTORY
    for lab in sorted(entry_points(group=LAB_INVENTORIES), key=lambda ep: ep.name):
        return Path(lab.load())
    return LOCAL_INVENTORY


def inventory_option(command: _F) -> _F:
    """``--inventory FILE`` as the ``inventory_path`` argument (a :class:`~pathlib.Path`):
    the command line, else ``$FAULTKIT_INVENTORY``, else :func:`default_inventory`."""
    option = click.option(
        "--inventory",
        "inventory_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=default_inventory,
        envvar=INVENTORY_ENV,
        show_envvar=True,
        show_default="./inventory.yaml, else the installed lab's",
        help="inventory file",
    )
    return option(command)


class BadInput(click.ClickException):
    """Bad input: ``Error: <message>`` on stderr, exit status 2, nothing was done."""

    exit_code = 2


class FiniteFloat(click.FloatRange):
    """A finite number within bounds; the error names the option and the allowed range.

    ``gt``/``ge`` bound it from below (exclusive/inclusive), ``le`` from above; ``unit``
    is shown after the range (``--rate 1e9: must be > 0 and ≤ 2000 req/s``).
    """

    name = "number"  # shown in --help instead of FloatRange's "float range"

    def _describe_range(self) -> str:
        return self.allowed()

    def __init__(self, *, gt: float | None = None, ge: float | None = None,
                 le: float | None = None, unit: str = "") -> None:
        super().__init__()
        self.gt, self.ge, self.le, self.unit = gt, ge, le, unit

    def allowed(self) -> str:
        """The range as words: ``> 0 and ≤ 2000 req/s``."""
        parts = [f"{sign} {limit:g}" for sign, limit in
                 ((">", self.gt), ("≥", self.ge), ("≤", self.le)) if limit is not None]
        text = " and ".join(parts) or "any value"
        return f"{text} {self.unit}".rstrip()

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        ok = math.isfinite(number) and not (
            (self.gt is not None and number <= self.gt)
            or (self.ge is not None and number < self.ge)
            or (self.le is not None and number > self.le)
        )
        if not ok:
            finite = "" if math.isfinite(number) else "a finite number, "
            self.fail(f"{value}: must be {finite}{self.allowed()}", param, ctx)
        return number


def parse_duration(text: str, *, option: str = "--duration", max_s: float = 7 * 86400) -> float:
    """``30s`` / ``2m`` / ``500ms`` / ``1h`` / ``1d`` / ``45`` (seconds) → seconds
    (:func:`faultkit.model.durations.parse_duration`).

    Raises :class:`click.BadParameter` naming ``option`` unless the duration is above 0 and
    at most ``max_s`` seconds.
    """
    try:
        seconds = durations.parse_duration(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= max_s:
        raise click.BadParameter(
            f"{text!r}: must be a duration > 0 and ≤ {human_duration(max_s)}, "
            "such as 30s, 2m, 500ms or 1h",
            param_hint=f"'{option}'",
        )
    return seconds

