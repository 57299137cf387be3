"""The run directories under a runs directory, newest first, one :class:`RunEntry` each.

A run directory (``<stamp>-<scenario>-<node>``) gives its scenario, node, verdict and the
measurement's detection, recovery and loss; a gate directory (``gate-<stamp>-<node>-
<config>``) gives the gate's decision and how many of its scenarios passed. Everything is
read through :mod:`reports.load` (``load_run_summary``, ``load_gate``): a half-written or
torn directory is still listed, with what it lacks left empty. Used by ``faultkit runs``
and for the chaos-run annotations of ``faultkit dashboard``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from reports.evidence import fault_kind
from reports.load import (
    GateData,
    RunData,
    is_gate_dir,
    is_run_dir,
    load_gate,
    load_run,
    load_run_summary,
)
from reports.numbers import is_number
from reports.outage import no_outage
from reports.phases import recovery_phases
from reports.server_estimate import server_estimate
from slo.types import Measurement

#: ``20261130T132827.555Z`` (runs) or ``20261130T132827Z`` (gates) at the start of a name
_STAMP = re.compile(r"^(?:gate-)?(\d{8}T\d{6})(\.\d+)?Z")


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One line of ``faultkit runs``. ``None`` means "not recorded" (never 0 or PASS)."""

    kind: Literal["run", "gate"]
    path: Path
    stamp: str
    t_start: float | None
    t_end: float | None
    scenario: str | None
    node: str | None
    fault: str | None
    #: PASS / FAIL / INCONCLUSIVE; for a gate its decision (PASS / FAIL)
    verdict: str | None
    detection_s: float | None = None
    detect_signal: str | None = None
    recovery_s: float | None = None
    lost: int | None = None
    requests: int | None = None
    #: a request-level fault that caused no outage: detection and recovery do not apply
    not_applicable: bool = False
    #: a gate's scenarios: how many passed, of how many
    passed: int | None = None
    scenarios: int | None = None
    #: what could not be read (missing or torn files)
    problems: tuple[str, ...] = ()
    #: a restarted engine's way back (:mod:`reports.phases`), read only when asked for
    #: (``list_runs(..., phases=True)``): None when not read, () when the run has none
    phases: tuple[PhaseEntry, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: the fields, ``path`` as a string, plus the directory ``name``."""
        data = asdict(self)
        data.update(path=str(self.path), name=self.path.name, problems=list(self.problems))
        if self.phases is None:
            del data["phases"]
        return data

    @property
    def slowest_phase(self) -> PhaseEntry | None:
        return max(self.phases or (), key=lambda p: p.duration_s, default=None)


@dataclass(frozen=True, slots=True)
class PhaseEntry:
    """One recovery phase, in seconds from the fault's effect."""

    phase: str
    from_effect_s: float
    duration_s: float
    evidence: str


def stamp_time(name: str) -> float | None:
    """Epoch seconds of the UTC stamp a run or gate directory name starts with."""
    match = _STAMP.match(name)
    if match is None:
        return None
    t = datetime.strptime(match.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=UTC).timestamp()
    return t + float(match.group(2) or 0)


def _stamp(name: str, t_start: float | None) -> str:
    """The directory name's stamp, else the start time written the same way."""
    match = _STAMP.match(name)
    if match is not None:
        return match.group(1) + (match.group(2) or "") + "Z"
    if t_start is None:
        return "—"
    return datetime.fromtimestamp(t_start, UTC).strftime("%Y%m%dT%H%M%S.%f")[:-3] + "Z"


def _num(value: object) -> float | None:
    return float(value) if is_number(value) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def run_entry(path: Path, *, phases: bool = False) -> RunEntry:
    """The entry of one run directory (``NotARunDirectory`` if it is none); with
    ``phases``, its recovery phases too (the whole directory is read)."""
    data: RunData = load_run(path) if phases else load_run_summary(path)
    m = data.measurement
    t_start = data.run.t_start or stamp_time(path.name)
    t_end = data.run.t_end or (m.t_window_end if m is not None else None)
    kind = fault_kind(data)
    quiet = m is not None and no_outage(kind, m)
    return RunEntry(
        kind="run",
        path=path,
        stamp=_stamp(path.name, t_start),
        t_start=t_start,
        t_end=t_end,
        scenario=data.run.scenario or None,
        node=data.run.node or (m.node if m is not None else None),
        fault=kind,
        verdict=data.verdict.outcome if data.verdict is not None else None,
        detection_s=None if m is None else m.detection_s,
        detect_signal=None if m is None else m.detect_signal,
        recovery_s=None if m is None else m.recovery_s,
        lost=_lost(m),
        requests=None if m is None else m.requests_total,
        not_applicable=quiet,
        problems=tuple(data.problems),
        phases=_phases(data) if phases else None,
    )


def _lost(m: Measurement | None) -> int | None:
    """The lost requests a listing shows: the ledger's count, or for a run no client
    recorded (a postmortem) the server-side estimate — ``None`` when not estimated."""
    if m is None:
        return None
    estimate = server_estimate(m)
    if estimate is None:
        return m.lost_total
    lost = estimate.get("lost")
    return lost if isinstance(lost, int) else None


def _phases(data: RunData) -> tuple[PhaseEntry, ...]:
    m = data.measurement
    if m is None or m.t_effect is None:
        return ()
    t0 = m.t_effect
    return tuple(PhaseEntry(p.name, round(p.t_start - t0, 3), round(p.duration_s, 3),
                            p.evidence) for p in recovery_phases(data))


def _gate_lost(gate: GateData) -> int | None:
    """The lost requests summed over the gate's scenarios (``None`` if any is unknown)."""
    values = [s.get("lost") for s in gate.scenarios]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return sum(v for v in values if isinstance(v, int))


def gate_entry(path: Path) -> RunEntry:
    """The entry of one gate directory; its verdict is the gate's decision."""
    gate = load_gate(path)
    g = gate.gate
    t_start = g.started_at or stamp_time(path.name)
    decision = g.decision
    candidate = g.candidate
    return RunEntry(
        kind="gate",
        path=path,
        stamp=_stamp(path.name, t_start),
        t_start=t_start,
        t_end=g.finished_at,
        scenario=f"gate {candidate}" if candidate else "gate",
        node=g.node,
        fault="rollout",
        verdict=decision.upper() if decision in ("pass", "fail") else None,
        lost=_gate_lost(gate),
        passed=sum(1 for s in gate.scenarios if s.get("passed") is True),
        scenarios=len(gate.scenarios),
        problems=tuple(gate.problems),
    )


def _sort_key(entry: RunEntry) -> tuple[float, str]:
    if entry.t_start is not None:
        return entry.t_start, entry.path.name
    try:
        return entry.path.stat().st_mtime, entry.path.name
    except OSError:
        return 0.0, entry.path.name


def list_runs(runs_dir: Path, *, include_gate_runs: bool = False,
              phases: bool = False) -> list[RunEntry]:
    """Every run and gate directory directly under ``runs_dir``, newest first.

    With ``include_gate_runs``, the run directories inside each gate's ``runs/`` are
    listed too (they are chaos runs like any other); with ``phases``, each run's recovery
    phases. Anything else is skipped.
    """
    entries: list[RunEntry] = []
    if not runs_dir.is_dir():
        return entries
    for path in runs_dir.iterdir():
        if is_gate_dir(path):
            entries.append(gate_entry(path))
            if include_gate_runs and (path / "runs").is_dir():
                entries += [run_entry(p, phases=phases) for p in (path / "runs").iterdir()
                            if is_run_dir(p)]
        elif is_run_dir(path):
            entries.append(run_entry(path, phases=phases))
    return sorted(entries, key=_sort_key, reverse=True)
