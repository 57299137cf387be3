"""The ``faultkit`` command: a click group whose subcommands load lazily.

Every subcommand is a module of :mod:`faultkit.commands` (one command each), except
``testbed``, which the lab owns (``testbed.cli``). This module only wires them by name, so
``faultkit --help`` stays fast and a broken optional part cannot break the others. The
commands are entry points: they may use ``slo`` and ``reports``; the core they build on
may not (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from faultkit.commands.input import BadInput
from faultkit.errors import (
    FaultkitError,
    FaultParamError,
    FaultRefused,
    InventoryError,
    JournalUnwritable,
)

#: faultkit errors that mean the input was bad or the journal unwritable, and nothing was
#: done: exit status 2
BAD_INPUT_ERRORS: tuple[type[FaultkitError], ...] = (
    FaultParamError, FaultRefused, InventoryError, JournalUnwritable,
)

#: name -> "module:attribute" of a click command
COMMANDS: dict[str, tuple[str, str]] = {
    "testbed": ("testbed.cli:testbed", "bring the local lab up / down / show its status"),
    "inventory": ("faultkit.commands.inventory:inventory", "check an inventory file"),
    "load": ("faultkit.commands.load:load", "run streaming load and print TTFT/TPOT figures"),
    "ledger": (
        "faultkit.commands.ledger:ledger",
        "print a ledger as JSON lines, or summarise it from its columns",
    ),
    "inject": ("faultkit.commands.inject:inject", "run one fault against a node for a while"),
    "sweep": ("faultkit.commands.sweep:sweep", "revert every fault a killed harness left"),
    "pager": (
        "faultkit.commands.pager:pager",
        "receive Alertmanager's webhooks and date every page as it arrives",
    ),
    "rules": (
        "faultkit.commands.rules:rules",
        "write Prometheus alerting/recording rules for the SLOs",
    ),
    "budget": ("faultkit.commands.budget:budget", "SLO error-budget review from Prometheus"),
    "report": ("faultkit.commands.report:report", "re-render a run directory's incident report"),
    "gate": ("faultkit.commands.gate:gate", "pre-promotion gate for a serving config"),
    "runs": ("faultkit.commands.runs:runs", "list run and gate directories, newest first"),
    "lanes": (
        "faultkit.commands.lanes:lanes",
        "print the commands that test independent nodes side by side",
    ),
    "dashboard": ("faultkit.commands.dashboard:dashboard", "Grafana dashboard JSON for the SLOs"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module_name, attr = COMMANDS[cmd_name][0].split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; bad input exits 2 with one line, other faultkit errors exit 1.

        Bad input is click's own usage errors (an option out of range, a missing argument)
        and :data:`BAD_INPUT_ERRORS` (a journal that cannot be written before a fault acts
        among them: nothing was done). Exit status 1 is kept for FAIL and for errors met
        while acting (Docker, a node, the journal once a fault has acted).
        """
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a group called without a subcommand: its help, as click prints it
        except click.UsageError as exc:
            raise BadInput(exc.format_message()) from exc
        except BAD_INPUT_ERRORS as exc:
            raise BadInput(str(exc)) from exc
        except FaultkitError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=LazyGroup)
@click.version_option(package_name="faultkit")
def cli() -> None:
    """Chaos and reliability test harness for self-hosted LLM inference."""


def main() -> None:
    sys.exit(cli.main(standalone_mode=True))


if __name__ == "__main__":
    main()
