"""``faultkit lanes --run``: the plan of :mod:`faultkit.lanes`, carried out.

Every lane's ``pytest scenarios`` process starts at once; each gateway's pass starts when
the lanes of its upstreams have ended; then the ``alone`` pass, then the exclusive pass
(without the host-wide scenarios a lane ran). Each pass writes its output to
``LOGS/<label>.log`` and its JUnit file beside it; one line says when a pass starts and one
how it ended (exit status, time, pytest's summary), and every minute one names the passes
still running, so a long run shows its progress without interleaving five processes'
output. The run directories go where the scenarios
put them (``runs/`` unless the inventory's settings say otherwise).

A scenario that was INCONCLUSIVE because the load client stalled
(:func:`slo.gaps.harness_stalled`: the machine froze the harness, which says nothing of the
node) is run once more, alone, after every other pass — the ``again`` pass, the gate's rule
too (docs/gate.md) — and its later outcome stands; nothing else is ever run again.

The exit status is the worst of the passes' (pytest's: 1 means a scenario failed); a pass
that collected nothing (5: e.g. no exclusive scenario applies) counts as 0, and so does a
pass whose only scenarios not passed were run again (:func:`exit_status`). At the end the
passes' JUnit files are merged into ``LOGS/junit.xml`` (:func:`merged_outcomes`), and
:func:`outcome_lines` names every scenario that did not pass, with why and its run
directory, so nobody has to search five logs for a failure; :func:`rerun_lines` names each
scenario run again, with both outcomes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from faultkit.gate.decision import (
    ScenarioOutcome,
    ScenarioResult,
    merge_junit,
    read_junit,
    replace_cases,
)
from faultkit.gate.feed import ONLY_ENV
from faultkit.gate.scenarios import ASYNC_INI, scenarios_dir
from faultkit.lanes import LANE_STAGGER_S, LanePlan, run_side_by_side
from faultkit.runtime.progress import format_elapsed

__all__ = ["AGAIN", "PassResult", "exit_status", "merged_outcomes", "outcome_lines",
           "rerun_lines", "run_plan"]

#: pytest's exit status when a selection collects no test
NOTHING_COLLECTED = 5

#: the label of the pass that runs, alone after every other, the scenarios that were
#: INCONCLUSIVE because the load client stalled
AGAIN = "again"


@dataclass(frozen=True)
class PassResult:
    """How one ``pytest scenarios`` pass of the plan ended."""

    label: str
    nodes: str
    exit_code: int
    seconds: float
    summary: str  # pytest's last line ("17 passed, 5 skipped in 296.55s"), or ""
    log: Path
    #: its JUnit file's scenarios (none when it wrote no file)
    outcomes: tuple[ScenarioOutcome, ...] = ()

    @property
    def junit(self) -> Path:
        return self.log.with_suffix(".xml")

    def stalled(self) -> list[str]:
        """Its scenarios INCONCLUSIVE because the load client stalled."""
        return [o.name for o in self.outcomes if o.harness_stalled]


def _again(results: Sequence[PassResult]) -> PassResult | None:
    return next((r for r in results if r.label == AGAIN), None)


def _ran_again(results: Sequence[PassResult]) -> set[str]:
    """The scenarios whose later outcome, from the ``again`` pass, stands."""
    again = _again(results)
    return {o.name for o in again.outcomes} if again is not None else set()


def exit_status(results: Sequence[PassResult]) -> int:
    """The worst pass's pytest status; "nothing collected" counts as success, and so does
    a pass's 1 when each of its scenarios that did not pass was run again (the ``again``
    pass's status then stands for them)."""
    ran_again = _ran_again(results)

    def status(result: PassResult) -> int:
        if result.exit_code == NOTHING_COLLECTED:
            return 0
        answered = result.exit_code == 1 and result.label != AGAIN and bool(result.outcomes) \
            and all(o.passed or o.outcome == "SKIPPED" or o.name in ran_again
                    for o in result.outcomes)
        return 0 if answered else result.exit_code

    return max((status(r) for r in results), default=0)


def merged_outcomes(results: Sequence[PassResult], logs: Path) -> tuple[Path,
                                                                      list[ScenarioOutcome]]:
    """Every pass's JUnit file merged into ``logs/junit.xml`` (a pass that wrote none adds
    nothing), a scenario run again there once, with its later outcome; and the outcomes
    that stand."""
    merged = logs / "junit.xml"
    again = _again(results)
    merge_junit([r.junit for r in results if r is not again], merged)
    ran_again = _ran_again(results)
    if again is not None:
        replace_cases(merged, again.junit, ran_again)
    firsts = [o for r in results if r is not again for o in r.outcomes
              if o.name not in ran_again]
    return merged, firsts + list(again.outcomes if again is not None else ())


def rerun_lines(results: Sequence[PassResult]) -> list[str]:
    """One line per scenario run again: its first outcome (why, run directory), then the
    one that stands."""
    again = _again(results)
    if again is None:
        return []
    later = {o.name: o for o in again.outcomes}
    lines = []
    for first in (o for r in results if r is not again for o in r.outcomes
                  if o.harness_stalled):
        now = later.get(first.name)
        stands = (f"now {now.outcome}" + (f" ({now.run_dir})" if now.run_dir else "")
                  if now is not None else f"not run again ({again.log}): the first stands")
        lines.append(f"  ran again, alone: {first.name} — first INCONCLUSIVE because the "
                     f"load client stalled ({first.run_dir}); {stands}")
    return lines


#: pytest's own skip of a scenario whose parameter set is empty in one process: the
#: combination does not apply there (a gateway scenario in an engine node's lane, a node
#: another lane runs). It is not a scenario skipped, and the summary does not count it.
NOT_APPLICABLE = "got empty parameter set"


def outcome_lines(outcomes: Sequence[ScenarioOutcome]) -> list[str]:
    """What ran (scenario × node) by outcome, then one line per scenario that failed, was
    inconclusive or was skipped, with why; combinations that do not apply are left out."""
    ran = [o for o in outcomes if not (o.outcome == "SKIPPED" and NOT_APPLICABLE in o.why)]
    counts = Counter(outcome.outcome for outcome in ran)
    order: tuple[ScenarioResult, ...] = ("PASS", "ACCEPTED", "FAIL", "INCONCLUSIVE", "SKIPPED")
    judged = len(ran) - counts["SKIPPED"]
    tally = ", ".join(f"{counts[k]} {k.lower()}" for k in order if counts[k])
    lines = [f"{judged} scenario runs (scenario × node): {tally}" if ran else "no scenario ran"]
    for outcome in ran:
        if outcome.outcome in ("FAIL", "INCONCLUSIVE", "SKIPPED"):
            where = f" ({outcome.run_dir})" if outcome.run_dir else ""
            lines.append(f"  {outcome.outcome} {outcome.name} — {outcome.why}{where}")
    return lines


def _outcomes(junit: Path) -> tuple[ScenarioOutcome, ...]:
    """The scenarios of a pass's JUnit file; none when it wrote none or a torn one (a
    pass killed while writing it: its exit status says so)."""
    try:
        return tuple(read_junit(junit))
    except ET.ParseError:
        return ()


def _summary(log: Path) -> str:
    lines = [line.strip("= \n") for line in log.read_text(errors="replace").splitlines()]
    said = [line for line in lines if " in " in line and any(
        word in line for word in ("passed", "failed", "error", "skipped", "deselected"))]
    return said[-1] if said else ""


#: while passes run, a line every this many seconds names them and their elapsed time
HEARTBEAT_S = 60.0


def run_plan(plan: LanePlan, inventory: Path, logs: Path, echo: Callable[[str], None],
             pytest_args: Sequence[str] = (), *, stagger_s: float = LANE_STAGGER_S,
             heartbeat_s: float = HEARTBEAT_S) -> list[PassResult]:
    """Run every pass of ``plan`` (module docstring), the lanes ``stagger_s`` apart
    (:func:`faultkit.lanes.run_side_by_side`), a line every ``heartbeat_s`` naming the
    passes still running; their results in plan order."""
    logs.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    running: dict[str, float] = {}  # label (nodes) → when it started (monotonic)
    ended = threading.Event()

    def say(text: str) -> None:
        with lock:
            echo(f"[lanes {time.strftime('%H:%M:%S')}] {text}")

    def heartbeat() -> None:
        while not ended.wait(heartbeat_s):
            now = time.monotonic()
            with lock:
                still = [f"{name} {format_elapsed(now - t)}" for name, t in running.items()]
            if still:
                say("running: " + ", ".join(still))

    def run(label: str, nodes: str, selection: Sequence[str],
            env: dict[str, str] | None = None) -> PassResult:
        where = f" ({nodes})" if nodes else ""
        argv = [sys.executable, "-m", "pytest", str(scenarios_dir()), "-p", "no:cacheprovider",
                *ASYNC_INI, "--inventory", str(inventory), *selection,
                *(("--node", nodes) if nodes else ()),
                f"--junitxml={logs / f'{label}.xml'}", *pytest_args]
        log = logs / f"{label}.log"
        say(f"{label}{where}: started, output in {log}")
        started = time.monotonic()
        with lock:
            running[f"{label}{where}"] = started
        try:
            with log.open("w") as out:
                code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False,
                                      env={**os.environ, **env} if env else None).returncode
        finally:
            with lock:
                running.pop(f"{label}{where}", None)
        result = PassResult(label, nodes, code, time.monotonic() - started, _summary(log), log,
                            _outcomes(logs / f"{label}.xml"))
        status = "ok" if code in (0, NOTHING_COLLECTED) else f"exit {code}"
        say(f"{label}{where}: {status} after {format_elapsed(result.seconds)}"
            + (f" — {result.summary}" if result.summary else ""))
        return result

    beat = threading.Thread(target=heartbeat, name="lanes-heartbeat", daemon=True)
    beat.start()
    try:
        side_by_side = run_side_by_side(
            plan, lambda label, nodes, marks: run(label, nodes, ("-m", marks)),
            stagger_s=stagger_s)
        results = [r for _, r in side_by_side]
        results += [run(label, nodes, selection)
                    for label, nodes, selection in plan.passes_after_lanes()]
        stalled = [name for r in results for name in r.stalled()]
        if stalled:
            say(f"run again, once, alone: {', '.join(stalled)} (INCONCLUSIVE because the load "
                "client stalled: it says nothing of the node)")
            results.append(run(AGAIN, "", ("-p", "faultkit.gate.feed"),
                               {ONLY_ENV: json.dumps(stalled)}))
    finally:
        ended.set()
        beat.join()
    return results
