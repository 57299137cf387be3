"""The current config's figures in the gate's scenarios: its baseline, and the regressions.

The gate runs its fault scenarios on the candidate only (running them on both configs would
double a gate's time). What the *current* config did in the same scenarios comes from runs
already on disk: for each gate scenario, the newest earlier run directory under the baseline
directory (``faultkit gate --baseline-dir``, default the gate's ``--out``, where
``pytest scenarios`` writes too) whose ``run.json`` names the same node, the same test
(scenario and case) and the current serving config, and whose verdict passed (PASS or
ACCEPTED: a failed run is no baseline of what the config does). Gate directories' own
scenario runs count as well: an earlier gate of the current config, or one that promoted it.

A candidate's figure is a **regression** when it is worse than the baseline's by more than
both a factor and an absolute margin (:data:`TOLERANCES`): noise on a quick figure (0.4 s
against 0.6 s) is not a regression, a real one (recovery 0.5 s → 40 s) is. A figure the
baseline reached but the candidate did not (detected, recovered) is a regression too. A
scenario with no baseline run, or a figure either side did not capture, is shown as not
compared and fails nothing: the candidate's own verdicts still decide. Definitions:
docs/definitions.md ("The gate's baseline").
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from faultkit.model.events import EventKind
from faultkit.model.gatefile import GateResult
from faultkit.model.records import iter_jsonl
from faultkit.model.runfiles import RunInfo
from faultkit.rundir import RunDir
from reports.baseline import figure_text

__all__ = [
    "TOLERANCES",
    "Baseline",
    "FigureRegression",
    "Tolerance",
    "compare_figures",
    "find_baselines",
    "judge_against_baseline",
    "run_figures",
]

Figure = Literal["detection_s", "recovery_s", "lost", "peak_rps"]

#: the verdicts a baseline run may have (verdict.json ``outcome``)
_PASSING = frozenset({"PASS", "ACCEPTED"})


@dataclass(frozen=True)
class Tolerance:
    """How much worse a figure may be: a regression exceeds both ``factor`` × the
    baseline's and the baseline's + ``margin`` (seconds, or requests for ``lost``) — or,
    for a figure where more is better (``higher_is_better``: a throughput), falls below
    both the baseline's ÷ ``factor`` and the baseline's − ``margin``."""

    factor: float
    margin: float
    unit: str
    higher_is_better: bool = False

    def exceeded(self, baseline: float, candidate: float) -> bool:
        if self.higher_is_better:
            return candidate < baseline / self.factor and candidate < baseline - self.margin
        return candidate > baseline * self.factor and candidate > baseline + self.margin

    def describe(self) -> str:
        if self.higher_is_better:
            return f"below both 1/{self.factor:g} and −{self.margin:g}{self.unit}"
        return f"above both {self.factor:g}× and +{self.margin:g}{self.unit}"


#: detection and recovery in seconds, lost in requests (at the scenarios' load of ~10 req/s,
#: 10 requests are a second of outage). The factor of 2 covers the spread of one config gated
#: twice on two busy cores (vLLM's CPU-bound restart: recovery 25.9 s then 42.4 s, 1.64×;
#: docs/gate.md); the margins keep quick figures (a sim node recovers in ~0.5 s, loses ~4)
#: from ever tripping on noise.
#: ``peak_rps`` is the overload scenario's served rate under its flood (the saturation
#: point, ``test_overload``'s ``saturation`` event): a candidate serving under two thirds of
#: the current config's peak, and 2 req/s less, carries less traffic than the config it
#: replaces — a capability regression (docs/gate.md, "Capabilities"); the band keeps two
#: floods of one config, on two busy cores, apart from it.
TOLERANCES: Mapping[Figure, Tolerance] = {
    "detection_s": Tolerance(2.0, 5.0, " s"),
    "recovery_s": Tolerance(2.0, 15.0, " s"),
    "lost": Tolerance(2.0, 10.0, " requests"),
    "peak_rps": Tolerance(1.5, 2.0, " req/s", higher_is_better=True),
}

_LABELS: Mapping[Figure, str] = {
    "detection_s": "detection", "recovery_s": "recovery", "lost": "lost",
    "peak_rps": "peak throughput (served under the overload's flood)"}


@dataclass(frozen=True)
class Baseline:
    """The current config's newest passing run of one gate scenario."""

    test: str
    run_dir: str
    t_start: float
    detection_s: float | None
    recovery_s: float | None
    lost: int | None
    peak_rps: float | None = None

    def figure(self, name: Figure) -> float | None:
        value: float | None = getattr(self, name)
        return value

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FigureRegression:
    """One figure of one scenario that the candidate made worse beyond its tolerance."""

    test: str
    figure: Figure
    current: float | None
    candidate: float | None
    tolerance: str

    def line(self) -> str:
        """``test_kill[llama]: recovery 0.5 s on the current config, 40.2 s on the
        candidate (above both 1.5× and +10 s)``."""
        return (f"{self.test}: {_LABELS[self.figure]} {_show(self.figure, self.current)} on "
                f"the current config, {_show(self.figure, self.candidate)} on the candidate "
                f"({self.tolerance})")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "line": self.line()}


def _show(figure: Figure, value: float | None) -> str:
    """A figure as gate.md's table shows it (a count stored as a float reads whole)."""
    return figure_text(figure, int(value) if figure == "lost" and value is not None
                       else value)


def run_figures(run: RunDir) -> dict[str, Any]:
    """A run's figures the gate compares, key by key (``None`` when absent): from
    measurement.json read as a plain object (a partial file still gives what it holds),
    and ``peak_rps`` from the overload scenario's ``saturation`` event, when it ran."""
    data = run.read_object(run.measurement_json)
    peak: Any = None
    # read line by line: a torn line, or one of another shape, is no saturation event; an
    # unreadable timeline has no peak to compare (a missing one reads empty)
    with contextlib.suppress(OSError):
        peak = next((line["data"].get("served_rps") for line in iter_jsonl(run.timeline_jsonl)
                     if isinstance(line, dict) and line.get("kind") == EventKind.SATURATION
                     and isinstance(line.get("data"), dict)), None)
    return {"detection_s": data.get("detection_s"), "recovery_s": data.get("recovery_s"),
            "lost": data.get("lost_total"), "peak_rps": peak}


def find_baselines(
    root: Path, *, node: str | Collection[str], config: str | None, tests: Iterable[str],
    before: float,
) -> dict[str, Baseline]:
    """The newest passing run, started before ``before`` (epoch seconds), of each test in
    ``tests`` on ``node`` (or any of several: a pool) with serving config ``config``, under
    ``root`` (searched
    recursively for ``run.json``). Tests with no such run are absent; ``config`` ``None``
    (the node names no serving config) finds nothing. Unreadable run directories are
    skipped: a baseline is a convenience, never a reason to fail."""
    wanted = set(tests)
    nodes = {node} if isinstance(node, str) else set(node)
    if config is None or not wanted or not root.is_dir():
        return {}
    found: dict[str, Baseline] = {}
    for run_json in root.rglob("run.json"):
        run = RunDir(run_json.parent)
        info = _info(run)
        test = info.test_name if info is not None else None
        if (info is None or test not in wanted or info.node not in nodes
                or info.serving_config != config or info.t_start is None
                or info.t_start >= before or _outcome(run) not in _PASSING):
            continue
        assert test is not None
        if test in found and found[test].t_start >= info.t_start:
            continue
        figures = run_figures(run)
        found[test] = Baseline(
            test=test, run_dir=str(run.path), t_start=info.t_start,
            detection_s=_number(figures["detection_s"]),
            recovery_s=_number(figures["recovery_s"]),
            lost=_count(figures["lost"]), peak_rps=_number(figures["peak_rps"]),
        )
    return found


def compare_figures(
    scenarios: Sequence[Mapping[str, Any]], baselines: Mapping[str, Baseline]
) -> list[FigureRegression]:
    """Every figure of every scenario (``ScenarioOutcome.to_json()`` rows) that is worse than
    its baseline beyond :data:`TOLERANCES`, in scenario then figure order."""
    out = []
    for row in scenarios:
        base = baselines.get(str(row.get("name")))
        if base is None or row.get("outcome") in ("SKIPPED", "INCONCLUSIVE"):
            continue
        for figure, tolerance in TOLERANCES.items():
            current, candidate = base.figure(figure), _number(row.get(figure))
            if _regressed(figure, current, candidate, tolerance):
                out.append(FigureRegression(base.test, figure, current, candidate,
                                            tolerance.describe()))
    return out


def _regressed(figure: Figure, current: float | None, candidate: float | None,
               tolerance: Tolerance) -> bool:
    if figure in ("lost", "peak_rps"):  # not captured on either side is not compared
        return current is not None and candidate is not None and tolerance.exceeded(
            current, candidate)
    if current is None:  # the current config never reached it: nothing to be worse than
        return False
    if candidate is None:  # the current config was detected/recovered, the candidate not
        return True
    return tolerance.exceeded(current, candidate)


def _info(run: RunDir) -> RunInfo | None:
    try:
        return run.info()
    except (OSError, ValueError):
        return None


def _outcome(run: RunDir) -> str | None:
    try:
        data = json.loads(run.verdict_json.read_text())
    except (OSError, ValueError):
        return None
    outcome = data.get("outcome") if isinstance(data, dict) else None
    return outcome if isinstance(outcome, str) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def judge_against_baseline(
    result: GateResult, baseline_dir: Path, *, say: Callable[[str], None],
    nodes: Collection[str] = (), detection_resolution_s: float | None = None,
    measured_now: Mapping[str, Baseline] | None = None,
    not_measured: Mapping[str, str] | None = None,
) -> None:
    """Compare the candidate's scenario figures with the current config's earlier runs of
    the same scenarios (the module docstring); a regression beyond the tolerance fails a
    gate that had passed, and is listed either way. ``say`` gets one progress line.
    ``nodes``: a pool's nodes (default: the gate's node) — a scenario's test name names
    its node, so each is compared with its own node's earlier run.
    ``detection_resolution_s``: how finely a detection time is known (Prometheus' scrape
    and evaluation interval), kept beside the figures for gate.md to state.
    ``measured_now``: the current config's runs this gate made itself (its peak throughput,
    :mod:`.current_peak`), held against as found ones are; ``not_measured``: why a run the
    gate tried to make gave nothing to hold against."""
    assert result.node is not None and result.started_at is not None
    baselines = {**find_baselines(
        baseline_dir, node=nodes or result.node, config=result.current,
        tests=[str(s.get("name")) for s in result.scenarios], before=result.started_at),
        **(measured_now or {})}
    regressions = compare_figures(result.scenarios, baselines)
    result.baseline = {
        "dir": str(baseline_dir),
        "runs": {test: b.to_json() for test, b in baselines.items()},
        "regressions": [r.to_json() for r in regressions],
        "tolerances": {figure: t.describe() for figure, t in TOLERANCES.items()},
        "detection_resolution_s": detection_resolution_s,
        "measured_now": sorted(measured_now or ()),
        "not_measured": dict(not_measured or {}),
    }
    lines = [r.line() for r in regressions]
    if baselines:
        say(f"baseline: {len(baselines)} of {len(result.scenarios)} scenarios have a passing "
             f"earlier run on {result.current} under {baseline_dir}; "
             f"{len(regressions)} figure regression(s)")
    else:
        say(f"baseline: no passing earlier run on {result.current} under {baseline_dir}: "
             "the scenarios' figures are not compared")
    result.not_passed += [f"regression — {line}" for line in lines]
    if result.passed and lines:
        result.fail(f"{len(lines)} figure regression(s) against {result.current}: "
                    + "; ".join(lines))
