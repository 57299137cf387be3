"""Running the gate's scenarios: one ``pytest`` of the catalogue's ``gate`` scenarios, its
progress shown as it goes, and its end when the gate is interrupted.

:func:`run_scenarios` starts the run and follows the ``gate_feed`` plugin's file
(:mod:`.gate_feed`) to print the scenario list and each result; :func:`end_scenarios`
ends a run as Ctrl-C would. :mod:`.gate` decides what to run (one node, or a pool node's
share: :mod:`.gate_pool`) and what the results mean.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import click

from faultkit.gate.feed import FEED_ENV, ONLY_ENV, ORDER_ENV, STOP_ENV, FeedState, watching
from faultkit.inventory import Inventory, Node
from faultkit.rundir import GateDir
from faultkit.runtime.progress import Progress

__all__ = ["ASYNC_INI", "SCENARIO_GRACE_S", "end_scenarios", "gate_progress", "run_scenarios",
           "say", "scenario_args", "scenario_argv", "scenarios_dir"]

#: the scenarios are async: these hold also where no ini file says so (an installed wheel)
ASYNC_INI = ("-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function")


def scenarios_dir() -> Path:
    """Where the installed scenario catalogue is: the ``scenarios`` package (shipped in the
    wheel; in a source checkout, the checkout's folder) — found without importing it."""
    spec = importlib.util.find_spec("scenarios")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        raise click.ClickException(
            "the scenario catalogue (the 'scenarios' package) is not installed with faultkit: "
            "reinstall faultkit (pip install faultkit) or run from its source checkout"
        )
    return Path(locations[0])


def scenario_argv(inventory: Inventory, node: Node, config: str, out: Path,
                   junit: Path | None, pytest_args: Sequence[str]) -> list[str]:
    """The pytest command of the gate scenarios on ``node`` (``junit`` None: no report, as
    for a collection or a dry run). The feed plugin is always loaded: it orders and
    narrows the run from its environment (:mod:`.feed`)."""
    report = ([f"--junitxml={junit}", "-o", "junit_family=xunit2"] if junit is not None
              else [])
    return [sys.executable, "-m", "pytest", str(scenarios_dir()), "-m", "gate",
            "-p", "no:cacheprovider", *ASYNC_INI, "--node", node.name,
            "--inventory", str(inventory.source), "--runs-dir", str(out / "runs"),
            "--serving-config", config, "-p", "faultkit.gate.feed", *report, *pytest_args]


def scenario_args(pytest_args: Sequence[str], *, soak_s: float, full: bool
                  ) -> tuple[tuple[str, ...], bool]:
    """The scenario run's pytest arguments — ``-x`` unless ``full`` (first, so a user's
    ``--maxfail`` after ``--`` wins), the soak's length (a later ``--soak-s`` overrides),
    then the user's — and whether the run stops at its first scenario that does not pass
    (also when the user's own arguments say so)."""
    stops = not full or any(a in ("-x", "--exitfirst", "--maxfail=1") for a in pytest_args)
    return (*(() if full else ("-x",)), "--soak-s", f"{soak_s:g}", *pytest_args), stops


#: how long an interrupted gate waits for its scenario run to revert and exit (seconds)
SCENARIO_GRACE_S = 120.0


def say(message: str) -> None:
    """One progress line of the gate, on stderr: ``[gate HH:MM:SS] message``."""
    click.echo(f"[gate {time.strftime('%H:%M:%S')}] {message}", err=True)


def gate_progress(node: str | None = None) -> Progress:
    """The gate's progress lines; a pool node's scenario run (``node``) writes plain lines
    that name it — several live lines at once would overwrite each other."""
    if node is None:
        return Progress(
            stream=sys.stderr, prefix=lambda: f"[gate {time.strftime('%H:%M:%S')}] "
        )
    return Progress(stream=sys.stderr, live=False,
                    prefix=lambda: f"[gate {time.strftime('%H:%M:%S')}] {node}: ")


async def run_scenarios(
    argv: Sequence[str], out: Path, progress: Progress | None = None,
    *, only: Sequence[str] | None = None, first: Sequence[str] = (),
    stop_file: Path | None = None,
) -> int:
    """Run the scenario pytest ``argv``; show its scenarios and each one's result as it ends.

    The list and the ✓/✗ lines come from the ``gate_feed`` plugin's JSON lines
    (``out/feed.jsonl``), read while pytest runs. On a terminal a live line shows the
    scenario count, elapsed time and pytest's last output line, and pytest's output goes to
    ``out/pytest.log``; otherwise pytest writes to stdout as it always did and the list and
    results are plain lines on stderr. ``only`` (a pool node's share: test names) keeps
    just those scenarios, and pytest's output goes to ``out/pytest.log`` whatever the
    terminal. ``first`` (scenario functions) run ahead of the others, in that order
    (the risk-first order, :mod:`.order`); ``stop_file``, shared by a pool's runs, ends
    this one after its scenario in hand once another's did not pass. Returns pytest's
    exit code.
    """
    progress = progress or gate_progress()
    feed = GateDir(out).feed_jsonl
    feed.write_text("")
    env = {**os.environ, FEED_ENV: str(feed)}
    if only is not None:
        env[ONLY_ENV] = json.dumps(list(only))
    if first:
        env[ORDER_ENV] = json.dumps(list(first))
    if stop_file is not None:
        env[STOP_ENV] = str(stop_file)
    state = FeedState(progress)
    if only is not None and not progress.live:
        log = GateDir(out).pytest_log
        with log.open("wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                *argv, env=env, stdout=sink, stderr=asyncio.subprocess.STDOUT)
            async with _ended_on_cancel(proc), watching(feed, state):
                return await proc.wait()
    if progress.live:
        log = GateDir(out).pytest_log
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        with progress.step(f"running the gate scenarios (pytest output: {log})") as step:
            state.step = step
            async with _ended_on_cancel(proc), watching(feed, state):
                assert proc.stdout is not None
                with log.open("wb") as sink:
                    async for line in proc.stdout:
                        sink.write(line)
                        step.update(line.decode(errors="replace"))
                return await proc.wait()
    proc = await asyncio.create_subprocess_exec(*argv, env=env)
    async with _ended_on_cancel(proc), watching(feed, state):
        return await proc.wait()


@contextlib.asynccontextmanager
async def _ended_on_cancel(proc: asyncio.subprocess.Process) -> AsyncIterator[None]:
    """When the gate is cancelled (a signal) while the scenario run ``proc`` runs, end the
    run first (:func:`end_scenarios`, to its end whatever else arrives), then let the
    cancellation go on: the rollout is reverted only once nothing runs on top of it."""
    try:
        yield
    except asyncio.CancelledError:
        ending = asyncio.ensure_future(end_scenarios(proc, SCENARIO_GRACE_S))
        while not ending.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(ending)
        raise


async def end_scenarios(proc: asyncio.subprocess.Process, grace_s: float) -> int:
    """Interrupt the scenario run as Ctrl-C would (pytest tears down, and the fault in hand
    is reverted), wait up to ``grace_s`` seconds, then kill it; its exit code."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.communicate(), grace_s)  # drains a piped stdout
        except TimeoutError:
            say(f"the scenario run did not end {grace_s:g} s after SIGINT: killing it")
            proc.kill()
    return await proc.wait()
