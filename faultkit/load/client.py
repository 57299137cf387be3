"""Send one request and classify how it ended — the load generator's hot path.

The transport is the client's own HTTP/1.1 connection (:mod:`faultkit.load.http1`) from
its own pool (:mod:`faultkit.load.connections`): a general HTTP library cost three times
the CPU a request (docs/load-client.md; ``bench/load_client.py`` measures it). Every
request ends in one of these error classes (or none):

=====================  ==========================================================
``refused``            TCP connect refused (nothing listening on the port)
``reset``              the connection broke (reset, closed mid-body, payload incomplete)
``timeout_connect``    no TCP connection within ``connect_timeout_s``
``timeout_first_token`` no content chunk within ``first_token_timeout_s`` of invoke (stream)
``timeout_total``      not finished within ``total_timeout_s`` of invoke
``http_429``/``http_4xx``/``http_5xx``  non-200 status (detail: status + error message)
``stream_error``       status 200 but an error frame / error field / bad frame (see ``sse``)
``truncated``          the stream ended cleanly but without ``[DONE]``
``cancelled``          the harness cancelled it (status ``unknown``: the outcome is unknowable)
``client_stalled``     a ``timeout_*`` the client cannot vouch for: the request was sent
                       :data:`LATE_CLIENT_S` or more after its arrival, or its timer fired
                       that late, because the client's own event loop was stalled (the
                       node may have answered in time). Evidence about the client.
``client_exhausted``   the client ran out of its own resources: ``EMFILE``/``ENFILE`` (too
                       many open files), ``EADDRNOTAVAIL`` (no ephemeral port left),
                       ``ENOBUFS``, or no free connection in the session's pool before the
                       deadline. Never ``refused``/``reset``: it says nothing about the node.
``shed_client``        never sent: the open loop's in-flight cap was reached on arrival
                       (:meth:`RequestRunner.shed`, called by the generator)
``other``              anything else (detail names the exception type)
=====================  ==========================================================

A non-200 answer also sets ``RequestRecord.error_body`` when its body is an OpenAI-style
error (a JSON object whose ``error`` is an object or a string, or vLLM's older
``{"object": "error", "message": ...}``); ``faultkit.model.records.is_clean_rejection`` uses it.
A request that waits for a free connection of a pool with a ``limit`` and is still
waiting at its deadline is ``client_exhausted``.

Times inside this module are monotonic (``Clock.mono``); records carry epoch seconds.
``error_detail`` never contains request or response headers (where API keys live).

Exceptions are classified by :mod:`faultkit.load.classify`; non-200 error bodies and
non-streamed answers are read by :mod:`faultkit.load.responses`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from faultkit.load.bodies import RequestBodies
from faultkit.load.classify import classify_exception
from faultkit.load.connections import ConnectionPool
from faultkit.load.deadline import StreamDeadline
from faultkit.load.dialer import Server
from faultkit.load.http1 import Http1Connection
from faultkit.load.ledger import Clock, Ledger
from faultkit.load.profile import LoadProfile, Target
from faultkit.load.responses import (
    ERROR_BODY_BYTES,
    header_count,
    http_error,
    parse_whole,
    response_header,
)
from faultkit.load.sse import StreamInterpreter, StreamOutcome
from faultkit.model.records import LATE_CLIENT_S, RequestKind, RequestRecord, Status

__all__ = ["LATE_CLIENT_S", "RequestRunner", "classify_exception"]


_TIMEOUTS = frozenset({"timeout_connect", "timeout_first_token", "timeout_total"})


@dataclass(slots=True)
class _Progress:
    """What is known about a request so far (monotonic times)."""

    t_invoke: float
    t_scheduled: float
    t_first_byte: float | None = None
    http_status: int | None = None
    error_body: bool = False
    #: the target's ``served_by_header`` on the response (which upstream answered)
    served_by: str | None = None
    #: the target's ``retries_header`` on the response, as a count (None: absent/not a count)
    gateway_retries: int | None = None
    #: waiting for a free connection in the pool (a pool with a ``limit``)
    pool_wait: bool = False
    #: the request's workload class (:meth:`RequestBodies.workload`)
    workload: str | None = None
    outcome: StreamOutcome = field(default_factory=StreamOutcome)

    def note_pool_wait(self, waiting: bool) -> None:
        self.pool_wait = waiting


class RequestRunner:
    """Runs a profile's requests (their bodies: :class:`RequestBodies`) against a target.

    ``run`` never raises for a failed request: it returns (and records in the ledger)
    one terminal :class:`RequestRecord`. Cancellation is recorded as ``unknown/cancelled``
    and then re-raised, so a cancelled request is never dropped.
    """

    def __init__(
        self,
        pool: ConnectionPool,
        target: Target,
        profile: LoadProfile,
        *,
        clock: Clock,
        ledger: Ledger,
    ) -> None:
        self.pool = pool
        self.target = target
        self.profile = profile
        self.clock = clock
        self.ledger = ledger
        self.kind: RequestKind = profile.endpoint
        path = "/chat/completions" if profile.endpoint == "chat" else "/completions"
        self.url = target.api_root + path
        self.server = Server.of_url(self.url)
        default_port = 443 if self.server.tls else 80
        name = f"[{self.server.host}]" if ":" in self.server.host else self.server.host
        host = name if self.server.port == default_port else f"{name}:{self.server.port}"
        headers = [
            f"POST {urlsplit(self.url).path} HTTP/1.1",
            f"Host: {host}",
            "User-Agent: faultkit",
            "Accept: */*",
            "Content-Type: application/json",
        ]
        if target.api_key:
            if any(c in target.api_key for c in "\r\n"):
                raise ValueError(f"node {target.name!r}: its API key contains a line break")
            headers.append(f"Authorization: Bearer {target.api_key}")
        #: the request head up to its per-request headers (X-Request-Id, Content-Length)
        self._head = ("\r\n".join(headers) + "\r\nX-Request-Id: ").encode("latin-1")
        self.bodies = RequestBodies(target, profile)

    def body(self, index: int) -> bytes:
        """The JSON body of request number ``index`` (:class:`RequestBodies`)."""
        return self.bodies.body(index)

    async def run(
        self, index: int, request_id: str, *, t_scheduled: float | None = None
    ) -> RequestRecord:
        """Send request ``index`` as ``request_id``; return its terminal record.

        ``t_scheduled`` is the monotonic time the user arrived (open loop: the due time);
        None means now. The record's ``t_scheduled`` is its epoch equivalent, clamped to
        ``t_invoke`` (the moment the request is actually sent) if it lies after it.
        """
        data = self.body(index)
        request = b"%s%s\r\nContent-Length: %d\r\n\r\n%s" % (
            self._head, request_id.encode("latin-1"), len(data), data
        )
        t_invoke = self.clock.mono()
        due = t_invoke if t_scheduled is None else min(t_scheduled, t_invoke)
        progress = _Progress(t_invoke=t_invoke, t_scheduled=due,
                             workload=self.bodies.workload(index))
        self.ledger.start(request_id, self.clock.epoch(progress.t_invoke))
        try:
            status, error_class, detail = await self._exchange(request, progress)
        except asyncio.CancelledError:
            record = self._record(request_id, progress, "unknown", "cancelled", "cancelled")
            self.ledger.finish(record)
            raise
        except Exception as exc:  # every request must end in a record, whatever broke
            error_class, detail = classify_exception(exc)
            status = "fail"
            if error_class == "reset" and progress.t_first_byte is None:
                self._stop_reusing()
        if error_class in _TIMEOUTS:
            error_class, detail = self._vouch_for_timeout(progress, error_class, detail or "")
        record = self._record(request_id, progress, status, error_class, detail)
        self.ledger.finish(record)
        return record

    def _vouch_for_timeout(
        self, progress: _Progress, error_class: str, detail: str
    ) -> tuple[str, str]:
        """``error_class`` as it was, or ``client_stalled`` when the client was too late to
        tell (module docstring): sent late, or its timer fired late."""
        p = self.profile
        limit = {
            "timeout_connect": p.connect_timeout_s,
            "timeout_first_token": p.first_token_timeout_s,
        }.get(error_class, p.total_timeout_s)
        sent_late = progress.t_invoke - progress.t_scheduled
        noticed_late = self.clock.mono() - progress.t_invoke - limit
        if max(sent_late, noticed_late) < LATE_CLIENT_S:
            return error_class, detail
        return "client_stalled", (
            f"{error_class} ({detail}), but the client sent it {sent_late:.2f} s after its "
            f"arrival and noticed the {limit:g} s deadline {noticed_late:.2f} s late"
        )

    async def prove_reuse(self) -> bool:
        """Decide now whether the server keeps idle connections open (connections.py,
        rule 3), waiting for a pooled connection to be old enough; True: reuse is on."""
        return await self.pool.prove(self.server)

    def _stop_reusing(self) -> None:
        """A connection broke before any response: maybe a kept-alive one the server had
        closed. Reuse no connection to this server from now on (the record stays a
        failure; see :mod:`faultkit.load.connections`)."""
        self.pool.stop_reusing(self.server)

    def shed(self, request_id: str, t_scheduled: float, reason: str) -> RequestRecord:
        """Record an arrival that is not sent at all; return its terminal record.

        ``t_scheduled`` is the arrival's monotonic due time. The record is
        ``fail``/``shed_client`` with ``t_scheduled = t_invoke = t_end`` = that time in
        epoch seconds and ``reason`` as its detail; it is started and finished in the
        ledger at once, so it counts as a request lost to that user.
        """
        progress = _Progress(t_invoke=t_scheduled, t_scheduled=t_scheduled)
        self.ledger.start(request_id, self.clock.epoch(t_scheduled))
        record = self._record(
            request_id, progress, "fail", "shed_client", reason, t_end=t_scheduled
        )
        self.ledger.finish(record)
        return record

    async def _exchange(
        self, request: bytes, progress: _Progress
    ) -> tuple[Status, str | None, str | None]:
        p = self.profile
        t0 = progress.t_invoke
        total_deadline = t0 + p.total_timeout_s
        first_deadline = min(t0 + p.first_token_timeout_s, total_deadline)
        waiting_first = p.stream and first_deadline < total_deadline
        response = _Response(self, progress, waiting_first)
        pool = self.pool
        conn: Http1Connection | None = None
        reusable = False
        try:
            async with StreamDeadline(
                first_deadline if waiting_first else total_deadline, total_deadline
            ) as response.deadline:
                on_wait = progress.note_pool_wait if pool.limit else None
                conn = await pool.acquire(self.server, p.connect_timeout_s, on_wait)
                try:
                    reusable = await conn.exchange(request, response)
                except ConnectionError:
                    if response.raw is None or progress.http_status == 200:
                        raise
                    # an error answer cut short: its status alone still classifies it
        except TimeoutError:
            if progress.pool_wait:  # never got a connection: the client's pool was full
                return (
                    "fail",
                    "client_exhausted",
                    f"no free connection in the client's pool (limit {pool.limit}) in time",
                )
            if (
                response.waiting_first
                and progress.outcome.t_first_token is None
                and self.clock.mono() < total_deadline
            ):
                return (
                    "fail",
                    "timeout_first_token",
                    (
                        f"no token within {p.first_token_timeout_s:g} s "
                        f"(status {progress.http_status}, {progress.outcome.chunks} chunks)"
                    ),
                )
            return (
                "fail",
                "timeout_total",
                (
                    f"not finished within {p.total_timeout_s:g} s "
                    f"({progress.outcome.content_chunks} content chunks)"
                ),
            )
        finally:
            if conn is not None:
                pool.release(self.server, conn, reusable=reusable)
        status = progress.http_status
        if status is not None and status != 200:
            raw = bytes(response.raw or b"")
            error_class, detail, progress.error_body = http_error(status, raw)
            return "fail", error_class, detail
        if response.interp is not None:
            outcome = response.interp.close(self.clock.mono())
        else:
            outcome = parse_whole(bytes(response.raw or b""), self.clock.mono())
            progress.outcome = outcome
        if outcome.ok:
            return "ok", None, None
        return "fail", outcome.error_class, outcome.error_detail

    def _arrived(self, stamp: float | None) -> float:
        """A kernel arrival stamp (epoch s) on the monotonic clock, never after now."""
        now = self.clock.mono()
        return now if stamp is None else min(self.clock.mono_of(stamp), now)

    def _record(
        self,
        request_id: str,
        progress: _Progress,
        status: Status,
        error_class: str | None,
        detail: str | None,
        *,
        t_end: float | None = None,
    ) -> RequestRecord:
        epoch = self.clock.epoch
        out = progress.outcome
        from_usage = out.completion_tokens is not None
        output_tokens = out.completion_tokens if from_usage else out.content_chunks
        return RequestRecord(
            id=request_id,
            node=self.target.name,
            kind=self.kind,
            t_invoke=epoch(progress.t_invoke),
            status=status,
            t_end=epoch(self.clock.mono() if t_end is None else t_end),
            t_first_byte=_opt(epoch, progress.t_first_byte),
            t_first_token=_opt(epoch, out.t_first_token),
            t_last_token=_opt(epoch, out.t_last_token),
            http_status=progress.http_status,
            error_class=error_class,
            error_detail=detail[:240] if detail else None,
            finish_reason=out.finish_reason,
            prompt_tokens=out.prompt_tokens,
            output_tokens=output_tokens,
            output_tokens_from_usage=from_usage,
            chunks=out.chunks,
            content_chunks=out.content_chunks,
            itl_s=tuple(out.itl_s),
            t_scheduled=epoch(progress.t_scheduled),
            error_body=progress.error_body,
            served_by=progress.served_by,
            gateway_retries=progress.gateway_retries,
            workload=progress.workload,
        )


class _Response:
    """One request's response as :class:`~faultkit.load.http1.Http1Connection` delivers
    it: the head into the request's progress, the body into its stream interpreter (a
    200 stream) or into ``raw`` (an error answer, at most ``ERROR_BODY_BYTES``; a whole
    JSON answer)."""

    __slots__ = ("deadline", "interp", "progress", "raw", "runner", "waiting_first")

    def __init__(self, runner: RequestRunner, progress: _Progress, waiting_first: bool) -> None:
        self.runner = runner
        self.progress = progress
        #: the first token is still due (a stream with a first-token deadline)
        self.waiting_first = waiting_first
        self.deadline: StreamDeadline | None = None
        self.interp: StreamInterpreter | None = None
        self.raw: bytearray | None = None

    def on_head(self, status: int, headers: dict[str, str], at: float | None) -> None:
        runner, progress = self.runner, self.progress
        progress.t_first_byte = runner._arrived(at)
        progress.http_status = status
        target = runner.target
        if target.served_by_header:
            progress.served_by = response_header(headers, target.served_by_header)
        if target.retries_header:
            progress.gateway_retries = header_count(response_header(headers, target.retries_header))
        mime = headers.get("content-type", "").partition(";")[0].strip().lower()
        if status == 200 and runner.profile.stream and mime != "application/json":
            self.interp = StreamInterpreter()
            progress.outcome = self.interp.outcome
        else:
            self.raw = bytearray()

    def on_body(self, data: bytes, at: float | None) -> None:
        interp = self.interp
        if interp is not None:
            interp.feed(data, self.runner._arrived(at))
            if self.waiting_first and interp.outcome.t_first_token is not None:
                self.waiting_first = False
                assert self.deadline is not None
                self.deadline.first_token()
            return
        raw = self.raw
        if raw is not None:
            if self.progress.http_status == 200:
                raw += data
            elif len(raw) < ERROR_BODY_BYTES:
                raw += data[: ERROR_BODY_BYTES - len(raw)]


def _opt(epoch: Callable[[float], float], mono: float | None) -> float | None:
    return None if mono is None else float(epoch(mono))

