"""The ``faultkit`` command: a click group whose subcommands load lazily.

Every subcommand is a module of :mod:`faultkit.commands` (one command each), wired here by
name so ``faultkit --help`` stays fast and a broken optional part cannot break the others.
Other packages add commands through the entry-point group :data:`PLUGIN_COMMANDS` (the
lab's ``testbed``); faultkit names none of them. The
commands are entry points: they may use ``slo`` and ``reports``; the core they build on
may not (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import EntryPoint, entry_points
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

#: name -> ("module:attribute" of a click command, its one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
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
    "postmortem": (
        "faultkit.commands.postmortem:postmortem",
        "report an outage faultkit did not cause, from monitoring alone",
    ),
}


#: the entry-point group through which another package adds a ``faultkit`` subcommand
PLUGIN_COMMANDS = "faultkit.commands"


def plugin_commands() -> dict[str, EntryPoint]:
    """The subcommands other packages register (a built-in name is never overridden)."""
    return {ep.name: ep for ep in entry_points(group=PLUGIN_COMMANDS) if ep.name not in COMMANDS}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *plugin_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS:
            module_name, attr = COMMANDS[cmd_name][0].split(":")
            command = getattr(importlib.import_module(module_name), attr)
        elif (plugin := plugin_commands().get(cmd_name)) is not None:
            command = plugin.load()
        else:
            return None
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self._help_line(ctx, name)) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _help_line(self, ctx: click.Context, name: str) -> str:
        """A built-in's line without importing it; a plugin's from its command."""
        if name in COMMANDS:
            return COMMANDS[name][1]
        try:
            command = self.get_command(ctx, name)
        except Exception as exc:  # a broken plugin must not break the listing
            return f"(cannot load: {exc})"
        return command.get_short_help_str(limit=80) if command is not None else ""

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
