"""``faultkit gate``: the pre-promotion gate for a candidate serving config.

Rolls the candidate onto the node, runs the scenarios marked ``gate`` against it (a
``pytest`` subprocess: the same scenarios users run), writes JUnit XML, ``gate.json`` and
``gate.md``, and exits 0 on pass, 1 on fail. Only PASS and ACCEPTED (a FAIL made only of
the node's accepted findings) pass: a scenario that failed, was INCONCLUSIVE (evidence
missing) or was skipped fails the gate, each listed on its own line with its reasons; ACCEPTED
ones are listed as accepted (:func:`decide`). The previous config is restored unless the
gate passed *and* ``--promote`` was given; an interrupted gate (Ctrl-C, SIGTERM, SIGHUP:
:mod:`faultkit.commands.interrupt`) first interrupts the scenario run as Ctrl-C would and
waits for it (``SCENARIO_GRACE_S``, then kills it), sweeps what it left applied, restores
the previous config and exits 128 + the signal's number. What a killed gate left behind
is reverted by ``faultkit sweep``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from faultkit.commands.gate_decision import config_diff, decide, read_junit
from faultkit.commands.input import inventory_option
from faultkit.commands.interrupt import until_interrupted
from faultkit.errors import FaultkitError, FaultRefused
from faultkit.faults import make_fault
from faultkit.faults.admission import existing_journal
from faultkit.faults.rollout import Rollout
from faultkit.inventory import Inventory, Node, load_inventory
from faultkit.progress import Progress
from faultkit.records import Event, JsonlWriter
from faultkit.rundir import GateDir, RunDir
from faultkit.sweep import sweep

#: the scenarios are async: these hold also where no ini file says so (an installed wheel)
_ASYNC_INI = ("-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function")
#: how long an interrupted gate waits for its scenario run to revert and exit (seconds)
SCENARIO_GRACE_S = 120.0


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


def _say(message: str) -> None:
    click.echo(f"[gate {time.strftime('%H:%M:%S')}] {message}", err=True)


async def _run_gate(
    inventory: Inventory,
    node: Node,
    config: str,
    out: Path,
    promote: bool,
    pytest_args: tuple[str, ...],
) -> dict[str, Any]:
    timeline = JsonlWriter(GateDir(out).timeline_jsonl)

    def emit(event: Event) -> None:
        timeline.write(event)
        _say(f"{event.kind} {event.data.get('reason', '')}".rstrip())

    rollout = make_fault("rollout", node, inventory=inventory, timeline=emit, config=config)
    data: dict[str, Any] = {
        "node": node.name,
        "candidate": config,
        "current": node.serving_config,
        "config_diff": config_diff(inventory, node.serving_config, config),
        "scenarios": [],
        "promoted": False,
        "rolled_back": False,
        "junit_xml": str(GateDir(out).junit_xml),
        "started_at": time.time(),
    }
    _say(f"rolling {config!r} onto {node.name} ({rollout.describe()})")
    try:
        await rollout.inject()
        if rollout.result.get("rolled_back"):
            data.update(
                decision="fail",
                rolled_back=True,
                why=(
                    f"{config} did not become ready "
                    f"({rollout.result.get('failed_reason', 'unknown')}); "
                    "it was rolled back automatically"
                ),
                rollout=rollout.result,
            )
            return data
        _say(f"{config} is serving; running the gate scenarios")
        argv = [
            sys.executable,
            "-m",
            "pytest",
            str(scenarios_dir()),
            "-m",
            "gate",
            "-p",
            "no:cacheprovider",
            *_ASYNC_INI,
            "--node",
            node.name,
            "--inventory",
            str(inventory.source),
            "--runs-dir",
            str(out / "runs"),
            "--serving-config",
            config,
            f"--junitxml={GateDir(out).junit_xml}",
            "-o",
            "junit_family=xunit2",
            "-p",
            "faultkit.commands.gate_feed",
            *pytest_args,
        ]
        code = await run_scenarios(argv, out)
        outcomes = read_junit(GateDir(out).junit_xml)
        data["scenarios"] = [o.to_json() for o in outcomes]
        decision = decide(outcomes, code, config)
        data.update(
            decision=decision.decision, why=decision.why, not_passed=list(decision.not_passed),
            accepted=list(decision.accepted),
        )
        data["rollout"] = rollout.result
        if data["decision"] == "pass" and promote:
            assert isinstance(rollout, Rollout)
            rollout.promote()
            data["promoted"] = True
        return data
    finally:
        if not data["promoted"]:
            # an interrupted scenario run may have left its fault applied: revert that first
            for line in await asyncio.to_thread(sweep, inventory=inventory):
                _say(f"sweep after the scenario run: {line}")
            _say(f"restoring {node.serving_config or 'the previous config'} on {node.name}")
            await rollout.revert()
            data["rolled_back"] = True
        timeline.close()


def _gate_progress() -> Progress:
    return Progress(
        stream=sys.stderr, prefix=lambda: f"[gate {time.strftime('%H:%M:%S')}] "
    )


async def run_scenarios(
    argv: Sequence[str], out: Path, progress: Progress | None = None
) -> int:
    """Run the scenario pytest ``argv``; show its scenarios and each one's result as it ends.

    The list and the ✓/✗ lines come from the ``gate_feed`` plugin's JSON lines
    (``out/feed.jsonl``), read while pytest runs. On a terminal a live line shows the
    scenario count, elapsed time and pytest's last output line, and pytest's output goes to
    ``out/pytest.log``; otherwise pytest writes to stdout as it always did and the list and
    results are plain lines on stderr. Returns pytest's exit code.
    """
    progress = progress or _gate_progress()
    feed = GateDir(out).feed_jsonl
    feed.write_text("")
    env = {**os.environ, "FAULTKIT_GATE_FEED": str(feed)}
    state = _FeedState(progress)
    if progress.live:
        log = GateDir(out).pytest_log
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        with progress.step(f"running the gate scenarios (pytest output: {log})") as step:
            state.step = step
            async with _ended_on_cancel(proc), _watching(feed, state):
                assert proc.stdout is not None
                with log.open("wb") as sink:
                    async for line in proc.stdout:
                        sink.write(line)
                        step.update(line.decode(errors="replace"))
                return await proc.wait()
    proc = await asyncio.create_subprocess_exec(*argv, env=env)
    async with _ended_on_cancel(proc), _watching(feed, state):
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
            _say(f"the scenario run did not end {grace_s:g} s after SIGINT: killing it")
            proc.kill()
    return await proc.wait()


@contextlib.asynccontextmanager
async def _watching(feed: Path, state: _FeedState) -> AsyncIterator[None]:
    """Follow ``feed`` while the body runs; read what is left of it once the body ends."""
    watcher = asyncio.create_task(_watch_feed(feed, state))
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        state.read(feed)


class _FeedState:
    """What has been read of the feed file, and printing each new event once."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.offset = 0
        self.total = 0
        self.finished = 0
        self.step: Any = None

    def read(self, feed: Path) -> None:
        try:
            with feed.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for raw in complete.splitlines():
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.show(event)

    def show(self, event: dict[str, Any]) -> None:
        if event.get("event") == "collected":
            names = [str(n) for n in event.get("names") or ()]
            self.total = len(names)
            self.progress(f"{len(names)} gate scenario{'s' * (len(names) != 1)}:")
            for name in names:
                self.progress(f"  · {name}")
        elif event.get("event") == "result":
            self.finished += 1
            mark = "✓" if event.get("passed") else "✗"
            duration = event.get("duration_s")
            took = f" ({duration:.1f} s)" if isinstance(duration, int | float) else ""
            self.progress(
                f"{mark} [{self.finished}/{self.total or '?'}] {event.get('name')}: "
                f"{event.get('word')}{took}"
            )


async def _watch_feed(feed: Path, state: _FeedState) -> None:
    while True:
        state.read(feed)
        await asyncio.sleep(0.3)


@click.command()
@inventory_option
@click.option("--node", "node_name", required=True, help="node to gate the config on")
@click.option("--config", "config", required=True, help="candidate serving config (inventory name)")
@click.option("--promote", is_flag=True, help="keep the candidate if the gate passes")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="where the gate directory is written",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="check the inputs and print the plan (config diff, each gate scenario's fault plan); "
    "roll out nothing, run nothing, write nothing",
)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def gate(
    inventory_path: Path,
    node_name: str,
    config: str,
    promote: bool,
    out_dir: Path,
    dry_run: bool,
    pytest_args: tuple[str, ...],
) -> None:
    """Gate CONFIG on NODE: roll it out, run the `gate` scenarios, pass/fail, roll back.

    Exit code 0 = pass, 1 = fail, 2 = bad input. Writes gate.md, gate.json and junit.xml.
    """
    from reports.render import render_gate

    inventory = load_inventory(inventory_path)
    node = inventory.node(node_name)
    inventory.serving_config(config)  # unknown config: a clear error before anything happens
    if not node.allows("rollout"):
        raise click.UsageError(
            f"node {node_name!r} does not allow the rollout fault "
            "(protected, or 'rollout' missing from its faults allowlist)"
        )
    if dry_run:
        sys.exit(_dry_run(inventory, node, config, pytest_args))
    swept = sweep(inventory=inventory)
    if swept:
        _say("reverted leftovers of a killed harness: " + "; ".join(swept))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = out_dir / f"gate-{stamp}-{node_name}-{config}"
    out.mkdir(parents=True)
    try:
        data, signum = asyncio.run(until_interrupted(
            _run_gate(inventory, node, config, out, promote, pytest_args)))
    except FaultRefused:
        raise  # bad input, nothing was done: exit 2 (faultkit.cli), not a failed gate
    except FaultkitError as exc:
        raise click.ClickException(str(exc)) from exc
    if data is None or signum:
        _say("interrupted: the previous config was restored")
        sys.exit(128 + (signum or signal.SIGINT))
    data["finished_at"] = time.time()
    RunDir(out).write_json(GateDir(out).gate_json, data)
    md = render_gate(data, GateDir(out).gate_md)
    verdict = "PASS" if data["decision"] == "pass" else "FAIL"
    _say(f"{verdict}: {data['why']}")
    for line in data.get("not_passed") or ():
        _say(f"  {line}")
    click.echo(f"gate {verdict} — {config} on {node_name}; report: {md}")
    sys.exit(0 if data["decision"] == "pass" else 1)


def _dry_run(inventory: Inventory, node: Node, config: str, pytest_args: tuple[str, ...]) -> int:
    """Print what the gate would do; the scenarios run under the plugin's ``--dry-run``,
    which prints each fault plan and acts on nothing. Returns pytest's exit code. A node
    BLOCKED by a fault left applied refuses the plan, as it would refuse the rollout."""
    plan = make_fault("rollout", node, inventory=inventory, dry_run=True, config=config)
    plan.refuse_if_blocked(existing_journal())
    click.echo(f"gate plan (dry run): roll {config!r} onto {node.name} "
               f"(now {node.serving_config!r}), run the 'gate' scenarios, roll back")
    for line in config_diff(inventory, node.serving_config, config):
        click.echo(f"  {line.rstrip()}")
    click.echo(f"scenarios: {scenarios_dir()}")
    with tempfile.TemporaryDirectory(prefix="faultkit-gate-dry-run-") as scratch:
        argv = [sys.executable, "-m", "pytest", str(scenarios_dir()), "-m", "gate", "-p",
                "no:cacheprovider", "-rs", *_ASYNC_INI, "--node", node.name,
                "--inventory", str(inventory.source), "--serving-config", config,
                "--runs-dir", scratch, "--dry-run", *pytest_args]
        return subprocess.run(argv, check=False).returncode

