"""The two record types every run is made of: requests (the ledger) and events (the timeline).

Time base: every ``t_*`` field and ``Event.t`` is **Unix epoch seconds** (float), so it
compares directly with Prometheus sample timestamps. The load generator measures with the
monotonic clock and converts through one anchor taken at start
(``epoch = anchor_epoch + (monotonic - anchor_monotonic)``), so intervals between fields
of one process are monotonic-exact.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

Status = Literal["ok", "fail", "unknown"]
RequestKind = Literal["chat", "completion", "probe"]
EventSource = Literal["fault", "observer", "load", "harness"]

#: Error classes a failed request can carry (``RequestRecord.error_class``).
ERROR_CLASSES: tuple[str, ...] = (
    "refused",  # TCP connection refused (nothing listening)
    "reset",  # connection reset / closed by peer before a complete answer
    "timeout_connect",
    "timeout_first_token",
    "timeout_total",
    "http_4xx",
    "http_429",
    "http_5xx",
    "stream_error",  # error frame after HTTP 200
    "truncated",  # stream ended without [DONE]
    "cancelled",  # the harness cancelled it while draining
    # The open loop's arrival came while the client's in-flight cap was reached: never sent,
    # recorded at once (t_invoke = t_end = t_scheduled = its due time) and lost to that user.
    "shed_client",
    # The client ran out of its own resources (file descriptors, ephemeral ports, a free
    # connection in its pool): says nothing about the node, so the run is inconclusive.
    "client_exhausted",
    # A timeout the client cannot vouch for: the request was sent, or its timer fired, at
    # least LATE_CLIENT_S late because the client's own event loop was stalled, so the node
    # may well have answered in time (faultkit.load.client): the run is inconclusive.
    "client_stalled",
    "other",
)

#: Error classes caused by the load client itself, not by the node under test.
CLIENT_SIDE: frozenset[str] = frozenset({"shed_client", "client_exhausted", "client_stalled"})

#: How late the client may be and still vouch for a request: one sent this long or longer
#: after its arrival, or whose timer noticed its deadline this late, was delayed by the
#: client's own stalled event loop (a healthy loop is milliseconds late). A timeout that
#: late is ``client_stalled``; one outside the outage, or a request sent that late across
#: an edge of it, makes the run INCONCLUSIVE (``slo.gaps``). Measured on the testbed
#: beside the vLLM lane: requests sent 2.1 s late, whose connect then "timed out"
#: although the kernel completes a loopback handshake in microseconds.
LATE_CLIENT_S = 0.5


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request, from invoke to its single terminal status.

    ``status`` is ``ok`` (complete answer, ``[DONE]`` seen when streaming), ``fail``
    (``error_class`` says how) or ``unknown`` (the outcome cannot be known, e.g.
    cancelled mid-flight). ``itl_s`` holds the gaps between successive content chunks
    (per chunk, not per token).

    ``t_invoke`` is when the client actually sent the request. ``t_scheduled`` is when the
    user *arrived*: in an open loop the due time of the arrival schedule (never after
    ``t_invoke``; earlier when the client was late), in a closed loop equal to
    ``t_invoke``; None in ledgers written before it existed. ``error_body`` is True when a
    non-200 response carried an OpenAI-style error body (see :func:`is_clean_rejection`).
    ``served_by`` is, for a gateway target, the value of the response header that names
    the upstream which answered (LiteLLM: ``x-litellm-model-id``, the upstream node's
    name; :data:`faultkit.load.profile.SERVED_BY_HEADERS`); None when the target is not a
    gateway, no response came, or the answer did not carry it (LiteLLM's own error after
    its retries names no upstream). ``gateway_retries`` is, for a gateway target, how
    many times the gateway retried the request before this answer (LiteLLM:
    ``x-litellm-attempted-retries``; :data:`faultkit.load.profile.RETRIES_HEADERS`);
    None when not a gateway or the answer did not say. ``workload`` is the request's class
    (:data:`faultkit.load.prompts.WORKLOADS`: ``free``, ``extractive``); None in ledgers
    written before it existed.
    """

    id: str
    node: str
    kind: RequestKind
    t_invoke: float
    status: Status
    t_end: float
    t_first_byte: float | None = None
    t_first_token: float | None = None
    t_last_token: float | None = None
    http_status: int | None = None
    error_class: str | None = None
    error_detail: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_from_usage: bool = False
    chunks: int = 0
    content_chunks: int = 0
    itl_s: tuple[float, ...] = ()
    t_scheduled: float | None = None
    error_body: bool = False
    served_by: str | None = None
    gateway_retries: int | None = None
    workload: str | None = None

    @property
    def arrival(self) -> float:
        """When the user arrived: the scheduled time (open loop), else the send time."""
        return self.t_scheduled if self.t_scheduled is not None else self.t_invoke

    @property
    def lateness_s(self) -> float:
        """How long after its user arrived the client sent it (0 without a schedule)."""
        return 0.0 if self.t_scheduled is None else self.t_invoke - self.t_scheduled

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestRecord:
        values = dict(data)
        values["itl_s"] = tuple(values.get("itl_s") or ())
        return _from_mapping(cls, values)


def is_clean_rejection(r: RequestRecord) -> bool:
    """True when the server cleanly rejected the request (the rule).

    A clean rejection is a failed request answered with HTTP 4xx (429 included) or 503
    *and* an OpenAI-style error body (``r.error_body``: a JSON object with an ``error``
    key holding an object or a string, or vLLM's older ``{"object": "error", "message":
    ...}``). Any other 5xx, or a 4xx/503 with an HTML or empty body, is not clean.
    """
    code = r.http_status
    if r.status != "fail" or not r.error_body or code is None:
        return False
    return 400 <= code < 500 or code == 503


@dataclass(frozen=True, slots=True)
class Event:
    """One timeline event: something the harness did or saw at epoch time ``t``."""

    t: float
    source: EventSource
    kind: str
    node: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        return _from_mapping(cls, data)


_T = TypeVar("_T")


def _from_mapping(cls: type[_T], data: Mapping[str, Any]) -> _T:
    """Build ``cls`` from a mapping, ignoring keys newer versions may have added."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in names})


class JsonlWriter:
    """Append JSON lines to a file, flushed per record so a crash loses nothing finished."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self._fsync = fsync
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a", encoding="utf-8")

    def write(self, obj: RequestRecord | Event | Mapping[str, Any]) -> None:
        data = obj.to_json() if isinstance(obj, RequestRecord | Event) else dict(obj)
        self._fh.write(json.dumps(data, separators=(",", ":")) + "\n")
        self._fh.flush()
        if self._fsync:
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yield each JSON object of a JSON-lines file; a torn last line is skipped."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a crash mid-write


def read_ledger(path: Path) -> list[RequestRecord]:
    return [RequestRecord.from_json(d) for d in iter_jsonl(path)]


def read_timeline(path: Path) -> list[Event]:
    return sorted((Event.from_json(d) for d in iter_jsonl(path)), key=lambda e: e.t)

