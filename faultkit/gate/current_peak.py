"""The current config's peak throughput, measured by the gate when nothing earlier holds it.

Peak throughput is a capability (docs/gate.md, "Peak throughput"): the candidate's
``test_overload`` run is held against the current config's newest passing run of it on the
same node (:mod:`.baseline`). Where no such run exists under the baseline directory — the
first gate on a node — the gate runs ``test_overload`` on the current config itself, into
``<gate>/current/``, so that a candidate serving less is caught on its first gate too:

- by default, after the scenarios, once the current config is restored: a candidate that
  failed never pays for it, and nothing is measured unless the candidate's flood passed
  with a peak to compare;
- under ``--promote``, before the rollout (the candidate stays, so the current config is
  measured while it still serves), when the node's gate collects ``test_overload``.

The run it leaves is a passing run of the current config under the gate's directory, so
the next gate there finds it as its baseline and measures nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

from faultkit.gate.baseline import Baseline, find_baselines
from faultkit.gate.decision import ScenarioOutcome, read_junit
from faultkit.gate.scenarios import run_scenarios
from faultkit.gate.scenarios import say as _say
from faultkit.inventory import Node
from faultkit.rundir import GateDir

#: a node's scenario pytest command running into a directory, with its JUnit file there
ScenarioArgv = Callable[[Node, Path, Path], list[str]]

__all__ = ["CURRENT_DIR", "OVERLOAD", "ScenarioArgv", "candidate_peaks", "measure_current_peaks",
           "overload_test", "peaks_due", "plan_line"]

#: the scenario whose flood measures the saturation point
OVERLOAD = "test_overload"
#: where, in the gate's directory, the current config's own run goes
CURRENT_DIR = "current"


def overload_test(node: str) -> str:
    """The overload scenario's test name on ``node`` (``test_overload[llama]``)."""
    return f"{OVERLOAD}[{node}]"


def peaks_due(
    tests: Iterable[str], baseline_dir: Path, *, nodes: Collection[str], current: str | None,
    before: float,
) -> list[str]:
    """Of the overload ``tests`` (names on ``nodes``), those no passing run of ``current``
    started before ``before`` under ``baseline_dir`` answers: the current config's peak
    the gate must measure itself (none when the node names no serving config)."""
    wanted = [t for t in tests if t in {overload_test(n) for n in nodes}]
    if current is None or not wanted:
        return []
    found = find_baselines(baseline_dir, node=nodes, config=current, tests=wanted,
                           before=before)
    return [t for t in wanted if t not in found]


def plan_line(node: Node, baseline_dir: Path, *, promote: bool, now: float) -> str:
    """What a gate of ``node`` starting ``now`` would hold the candidate's peak throughput
    against, in one line for the dry run."""
    test = overload_test(node.name)
    current = node.serving_config
    if current is None:
        return (f"peak throughput: {node.name} names no serving config, so the candidate's "
                "flood is not compared")
    found = find_baselines(baseline_dir, node=node.name, config=current, tests=[test],
                           before=now)
    if test in found:
        return (f"peak throughput: the candidate's {test} is held against {current}'s run "
                f"{found[test].run_dir}")
    when = ("before the rollout" if promote else
            "after the scenarios, once it is restored, if the candidate's flood passes")
    return (f"peak throughput: no passing {test} of {current} under {baseline_dir}: the gate "
            f"floods {current} too, {when} (into current/{node.name}/)")


def candidate_peaks(outcomes: Sequence[ScenarioOutcome]) -> list[str]:
    """The candidate's overload runs that passed with a peak: the ones worth comparing."""
    return [o.name for o in outcomes
            if o.name.startswith(f"{OVERLOAD}[") and o.passed and o.peak_rps is not None]


async def measure_current_peaks(
    tests: Sequence[str], nodes: Iterable[Node], argv: ScenarioArgv, out: Path,
) -> tuple[dict[str, Baseline], dict[str, str]]:
    """Run each overload test of ``tests`` on its node of ``nodes``, which serves the
    current config, into ``out/current/<node>`` (``argv``: the node's scenario command
    there); the passing runs as baselines, and why each other test gave no peak."""
    by_test = {overload_test(n.name): n for n in nodes}
    measured: dict[str, Baseline] = {}
    missing: dict[str, str] = {}
    for test in tests:
        node = by_test[test]
        where = out / CURRENT_DIR / node.name
        where.mkdir(parents=True, exist_ok=True)
        _say(f"measuring the current config's peak throughput on {node.name} ({test}: no "
             "earlier passing run of it to hold the candidate's against)")
        junit = GateDir(where).junit_xml
        await run_scenarios(argv(node, where, junit), where, only=[test])
        # the run just made, read as any earlier run is (passing verdict, its figures)
        found = find_baselines(where, node=node.name, config=node.serving_config,
                               tests=[test], before=math.inf).get(test)
        if found is not None and found.peak_rps is not None:
            measured[test] = found
        else:
            missing[test] = _why_no_peak(read_junit(junit), test)
    return measured, missing


def _why_no_peak(outcomes: Sequence[ScenarioOutcome], test: str) -> str:
    """Why the current config's run of ``test`` gave no peak to hold against."""
    outcome = next((o for o in outcomes if o.name == test), None)
    if outcome is None:
        return "the scenario did not run"
    if not outcome.passed:
        return f"{outcome.outcome}: {outcome.why}"
    return "the run recorded no saturation point"
