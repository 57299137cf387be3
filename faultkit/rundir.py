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
    loop-stalls.json    [LoopStall]: each stall of the harness's event loop
                        (faultkit.runtime.loopwatch)
    verdict.json        slo.Verdict
    incident.md, timeline.png   rendered by ``reports``, each written whole or not at all
                        (:func:`replaced_whole`): a harness killed while rendering leaves
                        the run re-renderable, never a torn report

Everything in a report is derivable from these files (``faultkit report RUN_DIR``).
Readers go through :class:`RunDir`'s typed readers: :meth:`RunDir.info` (:class:`RunInfo`),
:meth:`RunDir.container_evidence` (:class:`ContainerEvidence` of two
:class:`ContainerSnapshot`), and :meth:`RunDir.read_model` for the models that live above
this layer (``slo.types.read_measurement`` / ``read_verdict``).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from faultkit.model.gatefile import GateResult
from faultkit.model.records import Event, JsonlWriter, RequestRecord, read_ledger, read_timeline
from faultkit.model.runfiles import (
    ContainerEvidence,
    ContainerSnapshot,
    FaultInfo,
    RunInfo,
    UnreadableRunFile,
)

__all__ = ["ContainerEvidence", "ContainerSnapshot", "FaultInfo", "GateDir", "GateResult",
           "JsonModel", "RunDir", "RunInfo", "UnreadableRunFile", "replaced_whole"]

_M = TypeVar("_M")


class JsonModel(Protocol):
    """What :meth:`RunDir.write_model` writes: a model that gives its JSON object."""

    def to_json(self) -> Mapping[str, Any]: ...


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@contextlib.contextmanager
def replaced_whole(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (``.<name>.<pid>.tmp``) to write, which replaces
    ``path`` in one rename when the block ends without an error and is removed otherwise.
    A reader sees the old file or the new one, never part of one; a process killed
    mid-write leaves the temporary file only, and the next write of ``path`` removes it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    remove_dead_writers_temps(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):  # renamed already, or never written
            tmp.unlink()

def remove_dead_writers_temps(path: Path) -> list[Path]:
    """Remove the temporary files of ``path`` (:func:`replaced_whole`'s) that a process no
    longer alive left behind — one killed mid-write; a live writer's stays. Returns them."""
    prefix, removed = f".{path.name}.", []
    for stale in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        pid = stale.name[len(prefix):-len(".tmp")]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
                removed.append(stale)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


# The one home of every file name in a run directory and a gate directory (docs/run-directory.md).
RUN_JSON = "run.json"
TIMELINE_JSONL = "timeline.jsonl"
LEDGER_JSONL = "ledger.jsonl"
LEDGER_ARROWS = "ledger.arrows"
PROMETHEUS_JSON = "prometheus.json"
CONTAINER_JSON = "container.json"
MEASUREMENT_JSON = "measurement.json"
VERDICT_JSON = "verdict.json"
#: test_upstream_failure only: how the gateway routed around the dead upstream (slo.routing)
ROUTE_AROUND_JSON = "route_around.json"
LOOP_STALLS_JSON = "loop-stalls.json"
INCIDENT_MD = "incident.md"
TIMELINE_PNG = "timeline.png"
GATE_JSON = "gate.json"
GATE_MD = "gate.md"
JUNIT_XML = "junit.xml"
FEED_JSONL = "feed.jsonl"
PYTEST_LOG = "pytest.log"
CANDIDATE_LOG = "candidate.log"
BUDGET_MD = "budget.md"


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
        return self.path / LEDGER_ARROWS

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
    def loop_stalls_json(self) -> Path:
        return self.path / LOOP_STALLS_JSON

    @property
    def incident_md(self) -> Path:
        return self.path / INCIDENT_MD

    @property
    def timeline_png(self) -> Path:
        return self.path / TIMELINE_PNG

    # writers ----------------------------------------------------------------------
    def timeline_writer(self) -> JsonlWriter:
        return JsonlWriter(self.timeline_jsonl)

    def write_model(self, path: Path, model: JsonModel) -> None:
        """Write a typed model (anything with ``to_json()``: ``Measurement``, ``Verdict``,
        a scenario's own result) as JSON, atomically."""
        self.write_json(path, model.to_json())

    def write_info(self, info: RunInfo) -> None:
        """``run.json``: written when the run starts, rewritten as it learns more."""
        self.write_json(self.run_json, info.to_json())

    def write_container_evidence(self, evidence: ContainerEvidence) -> None:
        """``container.json``: the container before and after, and its log tail."""
        self.write_json(self.container_json, evidence.to_json())

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
    def candidate_log(self) -> Path:
        """A candidate that never became ready: its container's last log lines, redacted."""
        return self.path / CANDIDATE_LOG

    @property
    def timeline_jsonl(self) -> Path:
        """The gate's own timeline (rollout, rollback)."""
        return self.path / TIMELINE_JSONL

    @property
    def steady_dir(self) -> Path:
        """The steady-state runs' directories, one per config measured (and per node of a
        pool): each a run directory (ledger, timeline, series, container evidence)."""
        return self.path / "steady"

    def write_result(self, result: GateResult) -> None:
        """``gate.json``, atomically (temp file + rename)."""
        RunDir(self.path).write_json(self.gate_json, result.to_json())

    def result(self) -> GateResult:
        """``gate.json`` (every field at its default when absent). Raises
        :class:`UnreadableRunFile` when it is torn or not a JSON object."""
        return GateResult.from_json(RunDir(self.path).read_object(self.gate_json))
