"""Read a run directory into one :class:`RunData`, tolerating missing or unreadable files.

A report must render from whatever a run left behind (a crashed run may have no
``verdict.json``); every file that could not be read is listed in ``RunData.missing`` /
``RunData.problems`` and the report says "not captured" for it. Nothing is invented.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from faultkit.errors import NotARunDirectory
from faultkit.records import Event, RequestRecord, iter_jsonl
from faultkit.rundir import RunDir
from slo.types import Measurement, Verdict

#: files whose presence makes a directory a run directory (any one suffices)
RUN_FILES: tuple[str, ...] = (
    "run.json",
    "timeline.jsonl",
    "ledger.jsonl",
    "prometheus.json",
    "container.json",
    "measurement.json",
    "verdict.json",
)


@dataclass
class RunData:
    """Everything read from one run directory. ``None``/empty means "not captured"."""

    path: Path
    run: dict[str, Any] = field(default_factory=dict)
    timeline: list[Event] = field(default_factory=list)
    ledger: list[RequestRecord] = field(default_factory=list)
    prometheus: dict[str, Any] = field(default_factory=dict)
    container: dict[str, Any] = field(default_factory=dict)
    measurement: Measurement | None = None
    verdict: Verdict | None = None
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def t_effect(self) -> float | None:
        """Epoch seconds the fault took effect: measurement first, else the first fault act."""
        if self.measurement is not None:
            return self.measurement.t_effect
        for kinds in (("act",), ("inject_start", "inject_end")):
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
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


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


def load_run(path: Path) -> RunData:
    """Read ``path``; raise :class:`NotARunDirectory` if it holds none of :data:`RUN_FILES`."""
    if not is_run_dir(path):
        raise NotARunDirectory(str(path), RUN_FILES)
    rd = RunDir(path)
    data = RunData(path=path)
    data.missing = [name for name in RUN_FILES if not (path / name).exists()]

    def read_obj(p: Path) -> dict[str, Any]:
        if not p.exists():
            return {}
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            data.problems.append(f"{p.name}: unreadable ({exc})")
            return {}
        if not isinstance(obj, dict):
            data.problems.append(f"{p.name}: expected a JSON object, got {type(obj).__name__}")
            return {}
        return obj

    data.run = read_obj(rd.run_json)
    data.prometheus = read_obj(rd.prometheus_json)
    data.container = read_obj(rd.container_json)
    events, n_lines = _read_lines(rd.timeline_jsonl, Event.from_json)
    data.timeline = sorted(events, key=lambda e: e.t)
    if len(events) < n_lines:
        data.problems.append(f"timeline.jsonl: {n_lines - len(events)} malformed event(s) skipped")
    data.ledger, n_lines = _read_lines(rd.ledger_jsonl, RequestRecord.from_json)
    if len(data.ledger) < n_lines:
        data.problems.append(
            f"ledger.jsonl: {n_lines - len(data.ledger)} malformed record(s) skipped"
        )
    m = read_obj(rd.measurement_json)
    if m:
        try:
            measurement = Measurement.from_json(m)
        except (TypeError, ValueError) as exc:
            data.problems.append(f"measurement.json: does not match slo.Measurement ({exc})")
        else:
            bad = [f"measurement.json {name}" for name in _bad_fields(measurement)] + [
                f"measurement.json slis.{k}.{name}"
                for k, w in measurement.slis.items()
                for name in _bad_fields(w)
            ]
            if bad:
                data.problems.append("wrong type in " + ", ".join(bad) + "; measurement ignored")
            else:
                data.measurement = measurement
    v = read_obj(rd.verdict_json)
    if v:
        try:
            data.verdict = Verdict.from_json(v)
        except (TypeError, ValueError) as exc:
            data.problems.append(f"verdict.json: does not match slo.Verdict ({exc})")
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
