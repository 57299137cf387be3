"""Typed models of the JSON files a run directory holds: what ``RunDir``'s readers return
and its writers take.

:class:`ContainerEvidence` (two :class:`ContainerSnapshot`) is ``container.json``;
:class:`RunInfo` (with its :class:`FaultInfo`) is ``run.json``; :class:`GateResult` is a
gate directory's ``gate.json``. Each ``from_json`` takes
whatever was written, old formats and torn runs included: a missing or wrongly typed value
reads as ``None`` and the object as written stays in ``fields``. A file that is not a JSON
object at all raises :class:`UnreadableRunFile` (from ``RunDir.read_object``).
docs/run-directory.md describes every file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


class UnreadableRunFile(ValueError):
    """A run file exists but is not what it should be (torn JSON, or not a JSON object).
    The message names the file: ``"<name>: unreadable (...)"`` or
    ``"<name>: expected a JSON object, got list"``."""


def _whole(value: Any) -> int | None:
    """An integer field: an int (not a bool), or a float with no fractional part."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _stamp(value: Any) -> float | str | None:
    """A time: epoch seconds, or an RFC 3339 string as older run directories hold."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


@dataclass(frozen=True, slots=True)
class ContainerSnapshot:
    """One side (``before`` or ``after``) of ``container.json``.

    Written as :meth:`faultkit.containers.ContainerState.to_json` (secrets redacted),
    ``{"error": why}`` when ``docker inspect`` failed, or ``null`` when the node has no
    container. The typed fields hold the values the readers judge by; a value of the wrong
    type reads as ``None`` and its name is listed in ``invalid``. ``fields`` is the object
    exactly as written (``{}``: not captured), for reports that show it verbatim.
    ``started_at``/``finished_at`` are epoch seconds, or RFC 3339 strings in older runs.
    """

    fields: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    status: str | None = None
    exit_code: int | None = None
    oom_killed: bool | None = None
    restart_count: int | None = None
    started_at: float | str | None = None
    finished_at: float | str | None = None
    image: str | None = None
    invalid: tuple[str, ...] = ()

    @property
    def captured(self) -> bool:
        """Anything was written for this side (an ``{"error": ...}`` counts)."""
        return bool(self.fields)

    def get(self, name: str, default: Any = None) -> Any:
        """A field as written (any JSON value), ``default`` when absent."""
        return self.fields.get(name, default)

    def to_json(self) -> dict[str, Any] | None:
        """The object as written; ``None`` (JSON ``null``) when not captured."""
        return dict(self.fields) if self.fields else None

    @classmethod
    def from_json(cls, data: Any) -> ContainerSnapshot:
        """Tolerant: anything but a JSON object is "not captured"; wrongly typed fields are
        ``None`` and named in ``invalid``."""
        if not isinstance(data, dict) or not data:
            return cls()
        invalid: list[str] = []

        def typed(name: str, parse: Callable[[Any], Any]) -> Any:
            value = data.get(name)
            if value is None:
                return None
            parsed = parse(value)
            if parsed is None:
                invalid.append(name)
            return parsed

        error = data.get("error")
        return cls(
            fields=dict(data),
            error=str(error) if error else None,
            status=typed("status", _text),
            exit_code=typed("exit_code", _whole),
            oom_killed=typed("oom_killed", _flag),
            restart_count=typed("restart_count", _whole),
            started_at=typed("started_at", _stamp),
            finished_at=typed("finished_at", _stamp),
            image=typed("image", _text),
            invalid=tuple(invalid),
        )


@dataclass(frozen=True, slots=True)
class ContainerEvidence:
    """``container.json``: the node's container state before and after the run, and its
    log tail (secrets redacted). Missing or partial files read as "not captured"."""

    before: ContainerSnapshot = field(default_factory=ContainerSnapshot)
    after: ContainerSnapshot = field(default_factory=ContainerSnapshot)
    #: the container log's last lines; ``None`` when absent or not a string
    log_tail: str | None = None
    #: the lines it wrote since a start during the run, each with Docker's RFC 3339 time
    #: (empty: it did not start during the run; ``None``: not captured)
    startup_log: str | None = None
    #: the file held a non-empty JSON object
    captured: bool = False

    @classmethod
    def of(cls, before: Any, after: Any, log_tail: str,
           startup_log: str = "") -> ContainerEvidence:
        """The evidence a run writes: each side as ``ContainerState.to_json()`` gives it
        (secrets redacted), ``{"error": why}``, or ``None`` for a node without a container."""
        return cls(before=ContainerSnapshot.from_json(before),
                   after=ContainerSnapshot.from_json(after), log_tail=log_tail,
                   startup_log=startup_log, captured=True)

    def to_json(self) -> dict[str, Any]:
        return {"before": self.before.to_json(), "after": self.after.to_json(),
                "log_tail": self.log_tail, "startup_log": self.startup_log}

    @classmethod
    def from_json(cls, data: Any) -> ContainerEvidence:
        if not isinstance(data, dict):
            return cls()
        tail, startup = data.get("log_tail"), data.get("startup_log")
        return cls(
            before=ContainerSnapshot.from_json(data.get("before")),
            after=ContainerSnapshot.from_json(data.get("after")),
            log_tail=tail if isinstance(tail, str) else None,
            startup_log=startup if isinstance(startup, str) else None,
            captured=bool(data),
        )


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _as_written(value: Any) -> float | None:
    """A finite number, its JSON type kept (an int stays an int: reports show it as such)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    return None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class FaultInfo:
    """``run.json`` ``fault``: what was injected, as ``Fault.describe()`` words it."""

    kind: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    describe: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "params": dict(self.params), "describe": self.describe}

    @classmethod
    def from_json(cls, data: Any) -> FaultInfo | None:
        """``None`` when ``data`` is not a JSON object (no fault recorded)."""
        if not isinstance(data, dict):
            return None
        return cls(
            kind=_text(data.get("kind")),
            params=_object(data.get("params")),
            describe=_text(data.get("describe")),
        )


@dataclass(frozen=True, slots=True)
class RunInfo:
    """``run.json``: what ran, where, with which settings (docs/run-directory.md).

    Every key is optional (a crashed run may have written only the first version, an
    aborted one has no ``fault``); a missing or wrongly typed value reads as ``None`` (or
    ``{}`` for the objects). ``fields`` is the object exactly as written, for reports that
    show values verbatim and for keys without a typed field.
    """

    fields: Mapping[str, Any] = field(default_factory=dict)
    scenario: str | None = None
    #: the scenario's case, pytest's parameter id (``llama-long-prefill`` of
    #: ``test_oom[llama-long-prefill]``); ``None`` for a scenario without parameters
    case: str | None = None
    node: str | None = None
    engine: str | None = None
    serving_config: str | None = None
    node_config_hash: str | None = None
    harness_version: str | None = None
    prometheus_url: str | None = None
    scrape_interval_s: float | None = None
    load_profile: dict[str, Any] = field(default_factory=dict)
    slo: dict[str, Any] = field(default_factory=dict)
    t_start: float | None = None
    t_end: float | None = None
    fault: FaultInfo | None = None
    fault_result: dict[str, Any] = field(default_factory=dict)
    aborted: str | None = None
    #: requests expected in the SLO window (reports' "SLO budget spent"), when recorded;
    #: an int when written as one
    slo_window_requests: float | None = None
    #: how ``slo_window_requests`` was counted (``slo.traffic.WindowTraffic.to_json``:
    #: window, history Prometheus held, PromQL) or why it could not be
    slo_window: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        """A key as written (any JSON value), ``default`` when absent."""
        return self.fields.get(name, default)

    @property
    def captured(self) -> bool:
        """``run.json`` held anything."""
        return bool(self.fields)

    @property
    def test_name(self) -> str | None:
        """The pytest test this run was, as JUnit names it: ``test_oom[llama-long-prefill]``,
        ``test_smoke``; ``None`` when no scenario was recorded."""
        if self.scenario is None:
            return None
        return f"test_{self.scenario}" + (f"[{self.case}]" if self.case else "")

    def updated(self, **changes: Any) -> RunInfo:
        """A copy with ``changes`` set (typed keys only: ``fault`` a :class:`FaultInfo`),
        exactly as they will be written — ``None`` and ``{}`` included."""
        unknown = sorted(set(changes) - set(_RUN_INFO_KEYS))
        if unknown:
            raise TypeError(f"run.json has no key {', '.join(unknown)}")
        written = {k: v.to_json() if isinstance(v, FaultInfo) else v for k, v in changes.items()}
        return RunInfo.from_json({**self.to_json(), **written})

    def to_json(self) -> dict[str, Any]:
        """The object to write: the keys as read (``fields``) under the typed values that
        are set, so a rewrite keeps every key it does not know."""
        out = dict(self.fields)
        for name in _RUN_INFO_KEYS:
            value = getattr(self, name)
            if value is None or (isinstance(value, dict) and not value and name not in out):
                continue
            out[name] = value.to_json() if isinstance(value, FaultInfo) else value
        return out

    @classmethod
    def from_json(cls, data: Any) -> RunInfo:
        if not isinstance(data, dict):
            return cls()
        return cls(
            fields=dict(data),
            scenario=_text(data.get("scenario")),
            case=_text(data.get("case")),
            node=_text(data.get("node")),
            engine=_text(data.get("engine")),
            serving_config=_text(data.get("serving_config")),
            node_config_hash=_text(data.get("node_config_hash")),
            harness_version=_text(data.get("harness_version")),
            prometheus_url=_text(data.get("prometheus_url")),
            scrape_interval_s=_number(data.get("scrape_interval_s")),
            load_profile=_object(data.get("load_profile")),
            slo=_object(data.get("slo")),
            t_start=_number(data.get("t_start")),
            t_end=_number(data.get("t_end")),
            fault=FaultInfo.from_json(data.get("fault")),
            fault_result=_object(data.get("fault_result")),
            aborted=_text(data.get("aborted")),
            slo_window_requests=_as_written(data.get("slo_window_requests")),
            slo_window=_object(data.get("slo_window")),
        )


#: the typed keys of ``run.json`` (every :class:`RunInfo` field but ``fields``)
_RUN_INFO_KEYS = tuple(name for name in RunInfo.__dataclass_fields__ if name != "fields")


def _lines(value: Any) -> list[str]:
    """A list of text lines: a JSON list (each item as text), or one string split in lines."""
    if isinstance(value, list):
        return [str(item) for item in value]
    if isinstance(value, str):
        return value.splitlines()
    return []


@dataclass(slots=True)
class GateResult:
    """``gate.json``: what ``faultkit gate`` decided and the evidence it decided on
    (docs/run-directory.md, "The gate directory").

    The gate fills it in as it goes (it is written once, at the end); readers get it from
    :meth:`from_json`, which is tolerant like the run models: a missing or wrongly typed
    value reads as its default and the object as written stays in ``fields``.
    ``decision`` is ``"pass"`` or ``"fail"`` (``None``: the gate did not get that far).
    ``scenarios`` are ``ScenarioOutcome.to_json()`` rows; ``rollout`` the rollout fault's
    result; ``steady_state`` the steady-state phase's (``SteadyPhase.to_json()``).
    """

    node: str | None = None
    candidate: str | None = None
    current: str | None = None
    config_diff: list[str] = field(default_factory=list)
    decision: str | None = None
    why: str | None = None
    not_passed: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    scenarios: list[dict[str, Any]] = field(default_factory=list)
    rollout: dict[str, Any] = field(default_factory=dict)
    steady_state: dict[str, Any] | None = None
    #: the current config's earlier runs of the gate scenarios and the candidate's figure
    #: regressions against them (``faultkit.commands.gate_baseline``): ``{"dir", "runs":
    #: {test: Baseline}, "regressions": [FigureRegression], "tolerances": {figure: text}}``;
    #: ``None`` when no scenario ran
    baseline: dict[str, Any] | None = None
    #: a gate across a pool (``--pool``): one entry per node, the gate's own first —
    #: ``{"node", "rollout", "steady_state", "scenarios": [pytest ids], "junit_xml"}``;
    #: empty for a gate on one node
    pool: list[dict[str, Any]] = field(default_factory=list)
    promoted: bool = False
    rolled_back: bool = False
    junit_xml: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.decision == "pass"

    def fail(self, why: str) -> None:
        """Decide FAIL, for ``why``."""
        self.decision, self.why = "fail", why

    def to_json(self) -> dict[str, Any]:
        """The keys as read (``fields``) under the typed values."""
        out = dict(self.fields)
        for name in _GATE_KEYS:
            out[name] = getattr(self, name)
        return out

    @classmethod
    def from_json(cls, data: Any) -> GateResult:
        if not isinstance(data, dict):
            return cls()
        steady = data.get("steady_state")
        return cls(
            node=_text(data.get("node")),
            candidate=_text(data.get("candidate")),
            current=_text(data.get("current")),
            config_diff=_lines(data.get("config_diff")),
            decision=_text(data.get("decision")),
            why=_text(data.get("why")),
            not_passed=_lines(data.get("not_passed")),
            accepted=_lines(data.get("accepted")),
            scenarios=[s for s in data.get("scenarios") or [] if isinstance(s, dict)]
            if isinstance(data.get("scenarios"), list) else [],
            rollout=_object(data.get("rollout")),
            steady_state=steady if isinstance(steady, dict) else None,
            baseline=_object(data.get("baseline")) or None,
            pool=[p for p in data.get("pool") or [] if isinstance(p, dict)]
            if isinstance(data.get("pool"), list) else [],
            promoted=data.get("promoted") is True,
            rolled_back=data.get("rolled_back") is True,
            junit_xml=_text(data.get("junit_xml")),
            started_at=_number(data.get("started_at")),
            finished_at=_number(data.get("finished_at")),
            fields=dict(data),
        )


#: the typed keys of ``gate.json``
_GATE_KEYS = tuple(name for name in GateResult.__dataclass_fields__ if name != "fields")
