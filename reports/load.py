"""Read a run directory into one :class:`RunData`, tolerating missing or unreadable files.

A report must render from whatever a run left behind (a crashed run may have no
``verdict.json``); every file that could not be read is listed in ``RunData.missing`` /
``RunData.problems`` and the report says "not captured" for it. Nothing is invented.

:func:`load_run` reads everything; :func:`load_run_summary` only ``run.json``,
``measurement.json`` and ``verdict.json`` (for listings). :func:`load_gate` reads a gate
directory's ``gate.json`` the same tolerant way. ``run.json``, ``container.json``,
``measurement.json`` and ``verdict.json`` are parsed by the run directory's typed readers
(:meth:`faultkit.rundir.RunDir.info`, :meth:`~faultkit.rundir.RunDir.container_evidence`,
:func:`slo.types.read_measurement`, :func:`slo.types.read_verdict`); a file they cannot
read is listed in ``problems``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from faultkit.model.events import EventKind
from faultkit.model.records import Event, RequestRecord, iter_jsonl
from faultkit.rundir import (
    CONTAINER_JSON,
    GATE_JSON,
    LEDGER_JSONL,
    MEASUREMENT_JSON,
    PROMETHEUS_JSON,
    RUN_JSON,
    TIMELINE_JSONL,
    VERDICT_JSON,
    ContainerEvidence,
    GateResult,
    RunDir,
    RunInfo,
    UnreadableRunFile,
)
from reports.errors import NotARunDirectory
from reports.numbers import is_number
from slo.capture import PrometheusCapture
from slo.types import Measurement, Verdict, read_measurement, read_verdict

#: files whose presence makes a directory a run directory (any one suffices)
RUN_FILES: tuple[str, ...] = (
    RUN_JSON,
    TIMELINE_JSONL,
    LEDGER_JSONL,
    PROMETHEUS_JSON,
    CONTAINER_JSON,
    MEASUREMENT_JSON,
    VERDICT_JSON,
)


@dataclass
class RunData:
    """Everything read from one run directory. ``None``/empty means "not captured"."""

    path: Path
    run: RunInfo = field(default_factory=RunInfo)
    timeline: list[Event] = field(default_factory=list)
    ledger: list[RequestRecord] = field(default_factory=list)
    prometheus: PrometheusCapture = field(default_factory=PrometheusCapture)
    container: ContainerEvidence = field(default_factory=ContainerEvidence)
    measurement: Measurement | None = None
    verdict: Verdict | None = None
    #: ``route_around.json`` (gateway runs of test_upstream_failure); {} when not written
    route_around: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def t_effect(self) -> float | None:
        """Epoch seconds the fault took effect: measurement first, else the first fault act."""
        if self.measurement is not None:
            return self.measurement.t_effect
        for kinds in ((EventKind.ACT,), (EventKind.INJECT_START, EventKind.INJECT_END)):
            for ev in self.timeline:
                if ev.source == "fault" and ev.kind in kinds:
                    return ev.t
        return None

    @property
    def t0(self) -> float | None:
        """Reference time for "+s" columns: injection, else the first event or request."""
        if self.t_effect is not None:
            return self.t_effect
        starts = [e.t for e in self.timeline] + [r.t_invoke for r in self.ledger]
        return min(starts) if starts else None


def _is_num(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def _bad_fields(obj: Any) -> list[str]:
    """Fields of a dataclass whose value does not fit its annotation (numbers, str, dict)."""
    bad = []
    for f in dataclasses.fields(obj):
        ann, value = str(f.type), getattr(obj, f.name)
        if value is None:
            if "None" not in ann:
                bad.append(f.name)
        elif ann.startswith(("float", "int")):
            if not _is_num(value):
                bad.append(f.name)
        elif ann.startswith(("str", "DetectSignal", "Status", "EventSource", "RequestKind")):
            if not isinstance(value, str):
                bad.append(f.name)
        elif ann.startswith("dict[str, int]"):
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and _is_num(v) for k, v in value.items()
            ):
                bad.append(f.name)
        elif (ann.startswith("dict") and not isinstance(value, dict)) or (
            ann.startswith("list") and not isinstance(value, list)
        ):
            bad.append(f.name)
    return bad


def _valid(obj: Event | RequestRecord) -> bool:
    return not [name for name in _bad_fields(obj) if name != "itl_s"]


_T = TypeVar("_T", Event, RequestRecord)


def _read_lines(path: Path, parse: Callable[[dict[str, Any]], _T]) -> tuple[list[_T], int]:
    """Parse each JSON line with ``parse``; keep well-typed ones. Returns (kept, lines seen)."""
    kept: list[_T] = []
    seen = 0
    for obj in iter_jsonl(path):
        seen += 1
        try:
            item = parse(obj)
        except (TypeError, ValueError, AttributeError):
            continue
        if _valid(item):
            kept.append(item)
    return kept, seen


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / name).exists() for name in RUN_FILES)


def _read_obj(path: Path, problems: list[str]) -> dict[str, Any]:
    """A JSON object file; ``{}`` when absent, and a line in ``problems`` when unreadable."""
    try:
        return RunDir(path.parent).read_object(path)
    except UnreadableRunFile as exc:
        problems.append(str(exc))
        return {}


def _measurement(rd: RunDir, problems: list[str]) -> Measurement | None:
    """``measurement.json`` as a :class:`Measurement`, or ``None`` (absent, unreadable, or
    wrongly typed)."""
    try:
        measurement = read_measurement(rd)
    except UnreadableRunFile as exc:
        problems.append(str(exc))
        return None
    if measurement is None:
        return None
    bad = [f"measurement.json {name}" for name in _bad_fields(measurement)] + [
        f"measurement.json slis.{k}.{name}"
        for k, w in measurement.slis.items()
        for name in _bad_fields(w)
    ]
    if bad:
        problems.append("wrong type in " + ", ".join(bad) + "; measurement ignored")
        return None
    return measurement


def _verdict(rd: RunDir, problems: list[str]) -> Verdict | None:
    """``verdict.json`` as a :class:`Verdict`, or ``None`` (absent, unreadable, or not a
    verdict)."""
    try:
        return read_verdict(rd)
    except UnreadableRunFile as exc:
        problems.append(str(exc))
        return None


def _require_run_dir(path: Path) -> RunData:
    if not is_run_dir(path):
        raise NotARunDirectory(str(path), RUN_FILES)
    return RunData(path=path, missing=[name for name in RUN_FILES if not (path / name).exists()])


def _load_judgement(data: RunData) -> None:
    """Fill ``run``, ``measurement`` and ``verdict`` of ``data`` from its directory."""
    rd = RunDir(data.path)
    try:
        data.run = rd.info()
    except UnreadableRunFile as exc:
        data.problems.append(str(exc))
    data.measurement = _measurement(rd, data.problems)
    data.verdict = _verdict(rd, data.problems)


def load_run(path: Path) -> RunData:
    """Read ``path``; raise :class:`NotARunDirectory` if it holds none of :data:`RUN_FILES`."""
    data = _require_run_dir(path)
    rd = RunDir(path)
    _load_judgement(data)
    data.prometheus = PrometheusCapture.from_json(_read_obj(rd.prometheus_json, data.problems))
    data.route_around = _read_obj(rd.route_around_json, data.problems)
    try:
        data.container = rd.container_evidence()
    except UnreadableRunFile as exc:
        data.problems.append(str(exc))
    events, n_lines = _read_lines(rd.timeline_jsonl, Event.from_json)
    data.timeline = sorted(events, key=lambda e: e.t)
    if len(events) < n_lines:
        data.problems.append(f"timeline.jsonl: {n_lines - len(events)} malformed event(s) skipped")
    data.ledger, n_lines = _read_lines(rd.ledger_jsonl, RequestRecord.from_json)
    if len(data.ledger) < n_lines:
        data.problems.append(
            f"ledger.jsonl: {n_lines - len(data.ledger)} malformed record(s) skipped"
        )
    return data


def load_run_summary(path: Path) -> RunData:
    """Only ``run.json``, ``measurement.json`` and ``verdict.json`` of ``path`` (cheap: no
    ledger, timeline or telemetry), for listings. Raises like :func:`load_run`."""
    data = _require_run_dir(path)
    _load_judgement(data)
    return data


#: the file ``faultkit gate`` writes last into a gate directory
GATE_FILE = GATE_JSON


@dataclass
class GateData:
    """One gate directory: ``gate.json`` as written by ``faultkit gate`` (``{}`` while the
    gate runs or when it was interrupted), and what could not be read."""

    path: Path
    gate: GateResult = field(default_factory=GateResult)
    problems: list[str] = field(default_factory=list)

    @property
    def scenarios(self) -> list[dict[str, Any]]:
        """The gate's scenario entries that are JSON objects."""
        return self.gate.scenarios


def is_gate_dir(path: Path) -> bool:
    """A directory ``faultkit gate`` wrote: it holds ``gate.json``, or is named ``gate-*``."""
    return path.is_dir() and ((path / GATE_FILE).exists() or path.name.startswith("gate-"))


def load_gate(path: Path) -> GateData:
    """Read a gate directory (or its ``gate.json``), tolerating a missing or torn file."""
    directory = path.parent if path.name == GATE_FILE else path
    data = GateData(path=directory)
    data.gate = GateResult.from_json(_read_obj(directory / GATE_FILE, data.problems))
    if not (directory / GATE_FILE).exists():
        data.problems.append(f"{GATE_FILE}: not written (gate running or interrupted)")
    return data


def finite_points(values: Any) -> list[tuple[float, float]]:
    """Prometheus ``[[t, "v"], ...]`` as floats, skipping malformed pairs and NaN/±Inf."""
    out: list[tuple[float, float]] = []
    for pair in values if isinstance(values, list) else []:
        try:
            t, v = float(pair[0]), float(pair[1])
        except (TypeError, ValueError, IndexError, KeyError):
            continue
        if math.isfinite(v) and math.isfinite(t):
            out.append((t, v))
    return out
