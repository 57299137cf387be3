"""The run directory: every file a scenario run leaves behind, and nothing else.

``runs/<utc-stamp>-<scenario>-<node>/`` holds::

    run.json            scenario, node, engine, serving config, load profile, harness version,
                        node config hash, Prometheus URL and scrape interval, start/end
    timeline.jsonl      Event per line (faults, observer, load, harness)
    ledger.jsonl        RequestRecord per line
    ledger.arrows       the same records, columnar (Arrow IPC stream; faultkit.load.ledgerfile)
    prometheus.json     {"series": [{"name", "promql", "labels", "values": [[t, v], ...]}],
                         "alerts": [{"alertname", "state", "activeAt", "t_seen", ...}]}
    container.json      {"before": state, "after": state, "log_tail": str}
    measurement.json    slo.Measurement
    verdict.json        slo.Verdict
    incident.md, timeline.png   rendered by ``reports``

Everything in a report is derivable from these files (``faultkit report RUN_DIR``).
Readers go through :class:`RunDir`'s typed readers: :meth:`RunDir.info` (:class:`RunInfo`),
:meth:`RunDir.container_evidence` (:class:`ContainerEvidence` of two
:class:`ContainerSnapshot`), and :meth:`RunDir.read_model` for the models that live above
this layer (``slo.types.read_measurement`` / ``read_verdict``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from faultkit.records import Event, JsonlWriter, RequestRecord, read_ledger, read_timeline

_M = TypeVar("_M")

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

# The one home of every file name in a run directory and a gate directory (docs/run-directory.md).
RUN_JSON = "run.json"
TIMELINE_JSONL = "timeline.jsonl"
LEDGER_JSONL = "ledger.jsonl"
PROMETHEUS_JSON = "prometheus.json"
CONTAINER_JSON = "container.json"
MEASUREMENT_JSON = "measurement.json"
VERDICT_JSON = "verdict.json"
#: test_upstream_failure only: how the gateway routed around the dead upstream (slo.routing)
ROUTE_AROUND_JSON = "route_around.json"
INCIDENT_MD = "incident.md"
TIMELINE_PNG = "timeline.png"
GATE_JSON = "gate.json"
GATE_MD = "gate.md"
JUNIT_XML = "junit.xml"
FEED_JSONL = "feed.jsonl"
PYTEST_LOG = "pytest.log"
BUDGET_MD = "budget.md"


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
    #: the file held a non-empty JSON object
    captured: bool = False

    @classmethod
    def from_json(cls, data: Any) -> ContainerEvidence:
        if not isinstance(data, dict):
            return cls()
        tail = data.get("log_tail")
        return cls(
            before=ContainerSnapshot.from_json(data.get("before")),
            after=ContainerSnapshot.from_json(data.get("after")),
            log_tail=tail if isinstance(tail, str) else None,
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

    def get(self, name: str, default: Any = None) -> Any:
        """A key as written (any JSON value), ``default`` when absent."""
        return self.fields.get(name, default)

    @property
    def captured(self) -> bool:
        """``run.json`` held anything."""
        return bool(self.fields)

    @classmethod
    def from_json(cls, data: Any) -> RunInfo:
        if not isinstance(data, dict):
            return cls()
        return cls(
            fields=dict(data),
            scenario=_text(data.get("scenario")),
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
        )


@dataclass(frozen=True)
class RunDir:
    """Paths and readers/writers of one run directory."""

    path: Path

    @classmethod
    def create(
        cls, runs_dir: Path, scenario: str, node: str, *, now: datetime | None = None
    ) -> RunDir:
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S.%fZ")[:-4] + "Z"
        name = f"{stamp}-{_UNSAFE.sub('_', scenario)}-{_UNSAFE.sub('_', node)}"
        path = runs_dir / name
        path.mkdir(parents=True, exist_ok=False)
        return cls(path)

    # file paths ------------------------------------------------------------------
    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def timeline_jsonl(self) -> Path:
        return self.path / TIMELINE_JSONL

    @property
    def ledger_jsonl(self) -> Path:
        return self.path / LEDGER_JSONL

    @property
    def ledger_arrows(self) -> Path:
        return self.path / "ledger.arrows"

    @property
    def prometheus_json(self) -> Path:
        return self.path / PROMETHEUS_JSON

    @property
    def container_json(self) -> Path:
        return self.path / CONTAINER_JSON

    @property
    def measurement_json(self) -> Path:
        return self.path / MEASUREMENT_JSON

    @property
    def verdict_json(self) -> Path:
        return self.path / VERDICT_JSON

    @property
    def route_around_json(self) -> Path:
        return self.path / ROUTE_AROUND_JSON

    @property
    def incident_md(self) -> Path:
        return self.path / INCIDENT_MD

    @property
    def timeline_png(self) -> Path:
        return self.path / TIMELINE_PNG

    # writers ----------------------------------------------------------------------
    def timeline_writer(self) -> JsonlWriter:
        return JsonlWriter(self.timeline_jsonl)

    def write_json(self, path: Path, data: Any) -> None:
        """Write JSON atomically (temp file + rename), so a reader never sees half a file."""
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str), encoding="utf-8")
        os.replace(tmp, path)

    # readers ----------------------------------------------------------------------
    def read_json(self, path: Path, default: Any = None) -> Any:
        if not path.exists():
            return default
        return json.loads(path.read_text(encoding="utf-8"))

    def read_object(self, path: Path) -> dict[str, Any]:
        """A JSON object file; ``{}`` when absent. Raises :class:`UnreadableRunFile` when it
        cannot be read or parsed, or holds something other than an object."""
        if not path.exists():
            return {}
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UnreadableRunFile(f"{path.name}: unreadable ({exc})") from exc
        if not isinstance(obj, dict):
            raise UnreadableRunFile(
                f"{path.name}: expected a JSON object, got {type(obj).__name__}"
            )
        return obj

    def read_model(
        self, path: Path, parse: Callable[[dict[str, Any]], _M], model: str
    ) -> _M | None:
        """A JSON object file as a typed model: ``parse`` is the model's ``from_json``,
        ``model`` its name for messages. ``None`` when the file is absent or ``{}``. Raises
        :class:`UnreadableRunFile` when it is torn, not an object, or ``parse`` rejects it
        (``TypeError``/``ValueError``: ``"<name>: does not match <model> (<why>)"``).
        ``measurement.json`` and ``verdict.json`` are read this way by
        ``slo.types.read_measurement`` / ``read_verdict`` (their models live in ``slo``)."""
        obj = self.read_object(path)
        if not obj:
            return None
        try:
            return parse(obj)
        except (TypeError, ValueError) as exc:
            raise UnreadableRunFile(f"{path.name}: does not match {model} ({exc})") from exc

    def container_evidence(self) -> ContainerEvidence:
        """``container.json``; "not captured" throughout when absent. Raises
        :class:`UnreadableRunFile` when it is torn or not a JSON object."""
        return ContainerEvidence.from_json(self.read_object(self.container_json))

    def ledger(self) -> list[RequestRecord]:
        return read_ledger(self.ledger_jsonl)

    def timeline(self) -> list[Event]:
        return read_timeline(self.timeline_jsonl)

    def info(self) -> RunInfo:
        """``run.json``; empty (every field ``None``) when absent. Raises
        :class:`UnreadableRunFile` when it is torn or not a JSON object."""
        return RunInfo.from_json(self.read_object(self.run_json))

    def run_info(self) -> dict[str, Any]:
        """``run.json`` as a plain dict, for its writer (``Experiment._write_run_info``
        updates and rewrites it); readers use :meth:`info`."""
        info = self.read_json(self.run_json, {})
        return info if isinstance(info, dict) else {}


@dataclass(frozen=True)
class GateDir:
    """Paths of one ``faultkit gate`` output directory (docs/run-directory.md, "The gate")."""

    path: Path

    @property
    def gate_json(self) -> Path:
        return self.path / GATE_JSON

    @property
    def gate_md(self) -> Path:
        return self.path / GATE_MD

    @property
    def junit_xml(self) -> Path:
        return self.path / JUNIT_XML

    @property
    def feed_jsonl(self) -> Path:
        """Live feed of scenario results the gate follows while pytest runs."""
        return self.path / FEED_JSONL

    @property
    def pytest_log(self) -> Path:
        """pytest's output when the gate shows its live list on a terminal instead."""
        return self.path / PYTEST_LOG

    @property
    def timeline_jsonl(self) -> Path:
        """The gate's own timeline (rollout, rollback)."""
        return self.path / TIMELINE_JSONL
