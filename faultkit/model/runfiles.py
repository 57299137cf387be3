"""Typed models of the JSON files a run directory holds: what ``RunDir``'s readers return
and its writers take.

:class:`ContainerEvidence` (two :class:`ContainerSnapshot`) is ``container.json``;
:class:`RunInfo` (with its :class:`FaultInfo`) is ``run.json`` (a gate directory's
``gate.json`` is :class:`faultkit.model.gatefile.GateResult`). Each ``from_json`` takes
whatever was written, old formats and torn runs included: a missing or wrongly typed value
reads as ``None`` and the object as written stays in ``fields``. A file that is not a JSON
object at all raises :class:`UnreadableRunFile` (from ``RunDir.read_object``).
:func:`startup_lines` cuts ``container.json``'s ``startup_log`` from Docker's log, for the
runner and the postmortem alike.
docs/run-directory.md describes every file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from faultkit.model.jsonvalues import as_written, flag, number, object_of, stamp, text, whole
from faultkit.model.timestamps import parse_rfc3339


class UnreadableRunFile(ValueError):
    """A run file exists but is not what it should be (torn JSON, or not a JSON object).
    The message names the file: ``"<name>: unreadable (...)"`` or
    ``"<name>: expected a JSON object, got list"``."""










@dataclass(frozen=True, slots=True)
class ContainerSnapshot:
    """One side (``before`` or ``after``) of ``container.json``.

    Written as :meth:`faultkit.docker.containers.ContainerState.to_json` (secrets redacted),
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
            status=typed("status", text),
            exit_code=typed("exit_code", whole),
            oom_killed=typed("oom_killed", flag),
            restart_count=typed("restart_count", whole),
            started_at=typed("started_at", stamp),
            finished_at=typed("finished_at", stamp),
            image=typed("image", text),
            invalid=tuple(invalid),
        )


#: the container log's last lines kept (``log_tail``)
LOG_TAIL_LINES = 80
#: the start-up lines kept of a container that started again inside a run's window (vLLM
#: prints ~100): what the recovery phases are dated from (docs/definitions.md)
STARTUP_LOG_LINES = 300


def stamped_lines(stamped_log: str, since: float, until: float | None = None, *,
                  keep_stamps: bool = True) -> list[str]:
    """The lines of a ``docker logs --timestamps`` answer that Docker stamped inside
    [``since``, ``until``] (epoch seconds; no upper bound without ``until``), oldest first,
    their stamps removed unless ``keep_stamps``. A piece without a stamp of its own — the
    rest of a line split at a carriage return (a progress bar) — goes with its line."""
    out: list[str] = []
    inside = False
    for line in stamped_log.splitlines():
        stamp_text, _, rest = line.partition(" ")
        try:
            t = parse_rfc3339(stamp_text)
        except ValueError:
            t = None
        if t is None:
            if inside:
                out.append(line)
            continue
        inside = since <= t and (until is None or t <= until)
        if inside:
            out.append(line if keep_stamps else rest)
    return out


def startup_lines(stamped_log: str, started: float, until: float | None = None) -> str:
    """``startup_log`` from a ``docker logs --timestamps`` answer: the first
    :data:`STARTUP_LOG_LINES` lines the container wrote from its last start ``started``
    (to ``until``), each with Docker's own stamp (RFC 3339, UTC), one per line."""
    return "\n".join(stamped_lines(stamped_log, started, until)[:STARTUP_LOG_LINES])


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
            kind=text(data.get("kind")),
            params=object_of(data.get("params")),
            describe=text(data.get("describe")),
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
            scenario=text(data.get("scenario")),
            case=text(data.get("case")),
            node=text(data.get("node")),
            engine=text(data.get("engine")),
            serving_config=text(data.get("serving_config")),
            node_config_hash=text(data.get("node_config_hash")),
            harness_version=text(data.get("harness_version")),
            prometheus_url=text(data.get("prometheus_url")),
            scrape_interval_s=number(data.get("scrape_interval_s")),
            load_profile=object_of(data.get("load_profile")),
            slo=object_of(data.get("slo")),
            t_start=number(data.get("t_start")),
            t_end=number(data.get("t_end")),
            fault=FaultInfo.from_json(data.get("fault")),
            fault_result=object_of(data.get("fault_result")),
            aborted=text(data.get("aborted")),
            slo_window_requests=as_written(data.get("slo_window_requests")),
            slo_window=object_of(data.get("slo_window")),
        )


#: the typed keys of ``run.json`` (every :class:`RunInfo` field but ``fields``)
_RUN_INFO_KEYS = tuple(name for name in RunInfo.__dataclass_fields__ if name != "fields")
