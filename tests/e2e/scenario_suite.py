"""Running the scenario catalogue as CI does: ``pytest scenarios`` subprocesses, exactly as
a user runs them, in lanes side by side (:func:`run_scenario_lanes`), their JUnit files
read back into :class:`Outcome` rows. ``test_scenario_verdicts`` judges what they found.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from faultkit.commands.lanes_run import NOT_APPLICABLE
from faultkit.inventory import Inventory
from faultkit.lanes import plan_passes, run_side_by_side
from slo.gaps import harness_stalled
from tests.e2e.conftest import REPO

#: the catalogue runs in this many lanes side by side (faultkit.lanes.plan_passes), with
#: these engines' nodes kept out of them and tested after them (:func:`run_scenario_lanes`);
#: what CI runs is what `faultkit lanes --lanes 5` prints: every engine node in a lane of
#: its own (the second host's with its host-wide restarts), the gateway as soon as the lanes
#: of its upstreams have ended (beside vLLM's), then the exclusive scenarios. The gateway
#: beside vLLM's lane lost more users than its objective allows until its serving configs
#: gave it 8× an engine's CPU weight (docs/ci.md, "The gateway beside the lanes")
SCENARIO_LANES = 5
ALONE_ENGINES: tuple[str, ...] = ()



@dataclass(frozen=True)
class Outcome:
    test_id: str
    passed: bool
    skipped: bool
    message: str  # a failure's message, or why it was skipped
    run_dir: Path | None
    #: the plugin's faultkit_verdict property: PASS/FAIL/INCONCLUSIVE/ACCEPTED
    verdict: str | None = None
    #: JUnit's classname (``scenarios.test_pause``): with test_id, the pytest node id
    classname: str = ""
    #: the outcomes of earlier attempts, when the harness stalled (:func:`rerun_stalled`)
    earlier: tuple[Outcome, ...] = ()

    def measurement(self) -> dict[str, Any] | None:
        path = self.run_dir / "measurement.json" if self.run_dir else None
        return json.loads(path.read_text()) if path and path.exists() else None

    def node_id(self) -> str:
        """``scenarios/test_pause.py::test_pause[sim-vllm]``, relative to the repository."""
        return f"{self.classname.replace('.', '/')}.py::{self.test_id}"

    def harness_stalled(self) -> bool:
        """INCONCLUSIVE because the load client itself stalled (:func:`slo.gaps.harness_stalled`,
        the gate's rule too). Such a run says nothing of the node, for or against."""
        return self.verdict == "INCONCLUSIVE" and harness_stalled(self.measurement() or {})


def run_scenarios(
    out: Path, *args: str, timeout: float = 3600, tests: Sequence[str] = ()
) -> tuple[int, dict[str, Outcome], str]:
    """Run ``pytest scenarios`` as a user would (or just the node ids ``tests``, relative
    to the repository); return exit code, outcomes by id, output."""
    junit = out / "junit.xml"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *(tests or [str(REPO / "scenarios")]),
        "-p",
        "no:cacheprovider",
        "-q",
        "--runs-dir",
        str(out / "runs"),
        f"--junitxml={junit}",
        *args,
    ]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False
    )
    outcomes: dict[str, Outcome] = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            props = {p.get("name"): p.get("value") for p in case.iter("property")}
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            skip = case.find("skipped")
            said = failure if failure is not None else skip  # a failure's, or a skip's why
            test_id = case.get("name", "?")
            run_dir = props.get("faultkit_run_dir")
            outcomes[test_id] = Outcome(
                test_id=test_id,
                passed=failure is None and skip is None,
                skipped=skip is not None,
                message=(said.get("message") or "") if said is not None else "",
                run_dir=Path(run_dir) if run_dir else None,
                verdict=props.get("faultkit_verdict"),
                classname=case.get("classname", ""),
            )
    return proc.returncode, outcomes, proc.stdout[-6000:] + proc.stderr[-3000:]




def catalogue_ids() -> set[str]:
    """The names of every scenario test the catalogue collects on the testbed
    (``test_kill[llama]``, …): what the lanes together must have run."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "scenarios"), "-p", "no:cacheprovider",
         "--collect-only", "-q"],
        capture_output=True, text=True, timeout=300, cwd=REPO, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {line.split("::")[-1] for line in proc.stdout.splitlines() if "::" in line}


#: pytest's own skip of a scenario whose parameter set is empty in that process
EMPTY_PARAMETERS = NOT_APPLICABLE


def merge_outcomes(runs: list[dict[str, Outcome]]) -> dict[str, Outcome]:
    """The outcomes of several ``pytest scenarios`` processes as one. A test that ran in
    two of them is an error of the plan; the rows pytest writes for an empty parameter set
    (a scenario with no node in that process's ``--node``) are skips, and give way to the
    process that did run the test. Such a row no process replaced (``test_rollout[NOTSET]``
    of a lane whose nodes have no rollout candidate) is no scenario at all, and is dropped:
    the catalogue's ids (:func:`catalogue_ids`) never hold it."""
    merged: dict[str, Outcome] = {}
    for outcomes in runs:
        for test_id, outcome in outcomes.items():
            seen = merged.get(test_id)
            if seen is None or seen.skipped:
                merged[test_id] = outcome
            else:
                assert outcome.skipped, f"{test_id} ran in two scenario processes"
    return {test_id: outcome for test_id, outcome in merged.items()
            if not (outcome.skipped and EMPTY_PARAMETERS in outcome.message)}


def rerun_stalled(
    out: Path, outcomes: dict[str, Outcome]
) -> tuple[dict[str, Outcome], tuple[int, dict[str, Outcome], str] | None]:
    """Run once more, alone, every scenario that was INCONCLUSIVE because the harness
    stalled (:meth:`Outcome.harness_stalled`: a machine that froze every process for
    seconds); the later attempt's outcome stands, the earlier one is kept in
    its ``earlier``. Nothing else is rerun: a FAIL, or an INCONCLUSIVE for want of the
    node's own evidence, stands as it is. Returns the outcomes and the rerun's result
    (None when nothing stalled)."""
    stalled = sorted(t for t, o in outcomes.items() if o.harness_stalled())
    if not stalled:
        return outcomes, None
    result = run_scenarios(out, tests=[outcomes[t].node_id() for t in stalled])
    _, again, _ = result
    merged = dict(outcomes)
    for test_id in stalled:
        if test_id in again:
            first = outcomes[test_id]
            merged[test_id] = replace(again[test_id], earlier=(*first.earlier, first))
    return merged, result


def suite_exit_code(codes: list[int], outcomes: dict[str, Outcome]) -> int:
    """The suite's exit status: 1 when a scenario's outcome (after any rerun) is not a pass,
    else the worst other status of its processes (5, nothing collected, counts as 0)."""
    if any(not o.passed and not o.skipped for o in outcomes.values()):
        return 1
    return max((c for c in codes if c not in (1, 5)), default=0)


def run_scenario_lanes(out: Path, inventory: Inventory) -> tuple[int, dict[str, Outcome], str]:
    """The whole catalogue, in CI's time budget (docs/ci.md): every engine node in a lane
    of its own, side by side (:func:`faultkit.lanes.plan_passes`; vLLM's, the longest,
    first), the gateway once its upstreams' lanes have ended, then the ``exclusive``
    scenarios alone. Exit code: the worst of the processes.

    Who shares the two cores follows what was measured (docs/ci.md, "Why this plan"):
    the simulators' latency is simulated time, hardly moved by a busy CPU, so they run
    side by side; the real engines' figures are CPU-bound, so the gateway
    runs after the lanes unless its serving configs carry a latency-critical CPU weight
    (``cpu_shares: 8192``), and two ``test_overload`` floods never run at once (the machine
    lock ``flood``: two at once stall the background load's event loop for seconds).
    """
    plan = plan_passes(inventory, SCENARIO_LANES, ALONE_ENGINES)
    passes = run_side_by_side(
        plan, lambda label, nodes, marks: run_scenarios(out / label, "--node", nodes, "-m", marks))
    nodes = ([lane.node_option() for lane in plan.lanes]
             + [follower.node_option() for follower in plan.followers])
    names = [f"{label} ({where})" for (label, _), where in zip(passes, nodes, strict=True)]
    results = [result for _, result in passes]
    for label, where, selection in plan.passes_after_lanes():
        names.append(f"{label} ({where or 'every node'})")
        results.append(run_scenarios(out / label, *(("--node", where) if where else ()),
                                     *selection))
    outcomes = merge_outcomes([lane_outcomes for _, lane_outcomes, _ in results])
    outcomes, rerun = rerun_stalled(out / "rerun", outcomes)
    if rerun is not None:
        names.append("rerun (INCONCLUSIVE because the harness stalled: " + ", ".join(
            t for t, o in outcomes.items() if o.earlier) + ")")
        results.append(rerun)
    output = "\n".join(f"--- {name}: exit {code}\n{text}"
                       for name, (code, _, text) in zip(names, results, strict=True))
    missing = catalogue_ids() - outcomes.keys()
    assert not missing, f"scenarios no lane ran: {sorted(missing)}\n{output}"
    return suite_exit_code([code for code, _, _ in results], outcomes), outcomes, output
