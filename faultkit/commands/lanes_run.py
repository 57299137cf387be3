"""``faultkit lanes --run``: the plan of :mod:`faultkit.lanes`, carried out.

Every lane's ``pytest scenarios`` process starts at once; each gateway's pass starts when
the lanes of its upstreams have ended; then the ``alone`` pass, then the exclusive pass
(without the host-wide scenarios a lane ran). Each pass writes its output to
``LOGS/<label>.log`` and its JUnit file beside it; one line says when a pass starts and one
how it ended (exit status, time, pytest's summary), and every minute one names the passes
still running, so a long run shows its progress without interleaving five processes'
output. The run directories go where the scenarios
put them (``runs/`` unless the inventory's settings say otherwise).

The exit status is the worst of the passes' (pytest's: 1 means a scenario failed); a pass
that collected nothing (5: e.g. no exclusive scenario applies) counts as 0. At the end the
passes' JUnit files are merged into ``LOGS/junit.xml`` (:func:`merged_outcomes`), and
:func:`outcome_lines` names every scenario that did not pass, with why and its run
directory, so nobody has to search five logs for a failure.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from faultkit.gate.decision import (
    ScenarioOutcome,
    ScenarioResult,
    merge_junit,
    read_junit,
)
from faultkit.gate.scenarios import ASYNC_INI, scenarios_dir
from faultkit.lanes import LANE_STAGGER_S, LanePlan, run_side_by_side
from faultkit.runtime.progress import format_elapsed

__all__ = ["PassResult", "exit_status", "merged_outcomes", "outcome_lines", "run_plan"]

#: pytest's exit status when a selection collects no test
NOTHING_COLLECTED = 5


@dataclass(frozen=True)
class PassResult:
    """How one ``pytest scenarios`` pass of the plan ended."""

    label: str
    nodes: str
    exit_code: int
    seconds: float
    summary: str  # pytest's last line ("17 passed, 5 skipped in 296.55s"), or ""
    log: Path


def exit_status(results: Sequence[PassResult]) -> int:
    """The worst pass's pytest status; "nothing collected" counts as success."""
    return max((0 if r.exit_code == NOTHING_COLLECTED else r.exit_code for r in results),
               default=0)


def merged_outcomes(results: Sequence[PassResult], logs: Path) -> tuple[Path,
                                                                      list[ScenarioOutcome]]:
    """Every pass's JUnit file merged into ``logs/junit.xml``, and the scenarios' outcomes
    read from it (a pass that wrote none adds nothing)."""
    merged = logs / "junit.xml"
    merge_junit([r.log.with_suffix(".xml") for r in results], merged)
    return merged, read_junit(merged)


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

    def run(label: str, nodes: str, selection: Sequence[str]) -> PassResult:
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
                code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT,
                                      check=False).returncode
        finally:
            with lock:
                running.pop(f"{label}{where}", None)
        result = PassResult(label, nodes, code, time.monotonic() - started, _summary(log), log)
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
    finally:
        ended.set()
        beat.join()
    return results
