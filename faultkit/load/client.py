"""Send one request over aiohttp and classify how it ended — the load generator's hot path.

aiohttp is the transport because it is the one that keeps up (docs/architecture.md,
``load/``; ``bench/load_client.py`` measures it). This module is the one place that
translates aiohttp / socket exceptions into error classes:

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
``{"object": "error", "message": ...}``); ``faultkit.records.is_clean_rejection`` uses it.
Pool waits are recognised on sessions built with :func:`pool_trace_config` (the load
generator's own sessions with a connection limit are).

Times inside this module are monotonic (``Clock.mono``); records carry epoch seconds.
``error_detail`` never contains request or response headers (where API keys live).

Exceptions are classified by :mod:`faultkit.load.classify`; non-200 error bodies and
non-streamed answers are read by :mod:`faultkit.load.responses`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from yarl import URL

from faultkit.load.bodies import RequestBodies
from faultkit.load.classify import classify_exception
from faultkit.load.connections import CheckedReuseConnector
from faultkit.load.deadline import StreamDeadline
from faultkit.load.ledger import Clock, Ledger
from faultkit.load.profile import LoadProfile, Target
from faultkit.load.responses import header_count, http_error, parse_whole, response_header
from faultkit.load.rxstamps import ArrivalMarks, arrival_marks
from faultkit.load.sse import StreamInterpreter, StreamOutcome
from faultkit.records import RequestKind, RequestRecord, Status

__all__ = ["LATE_CLIENT_S", "RequestRunner", "classify_exception", "pool_trace_config"]

#: A timeout is the client's own doing (``client_stalled``) when the request was sent, or its
#: timer noticed the deadline, this late: a healthy loop is milliseconds late. Measured on
#: the testbed beside the vLLM lane: requests sent 2.1 s late, whose connect then "timed
#: out" although the kernel completes a loopback handshake in microseconds.
LATE_CLIENT_S = 0.5

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
    #: waiting for a free connection in the session's pool (see ``pool_trace_config``)
    pool_wait: bool = False
    outcome: StreamOutcome = field(default_factory=StreamOutcome)


class RequestRunner:
    """Runs a profile's requests (their bodies: :class:`RequestBodies`) against a target.

    ``run`` never raises for a failed request: it returns (and records in the ledger)
    one terminal :class:`RequestRecord`. Cancellation is recorded as ``unknown/cancelled``
    and then re-raised, so a cancelled request is never dropped.
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        target: Target,
        profile: LoadProfile,
        *,
        clock: Clock,
        ledger: Ledger,
    ) -> None:
        self.session = session
        self.target = target
        self.profile = profile
        self.clock = clock
        self.ledger = ledger
        self.kind: RequestKind = profile.endpoint
        path = "/chat/completions" if profile.endpoint == "chat" else "/completions"
        self.url = target.api_root + path
        url = URL(self.url)
        #: (host, port) as the connector keys this server's connections
        self._server = (url.host or "", url.port)
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=profile.connect_timeout_s, connect=None
        )
        self._headers = {"Content-Type": "application/json"}
        if target.api_key:
            self._headers["Authorization"] = f"Bearer {target.api_key}"
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
        headers = {**self._headers, "X-Request-Id": request_id}
        t_invoke = self.clock.mono()
        due = t_invoke if t_scheduled is None else min(t_scheduled, t_invoke)
        progress = _Progress(t_invoke=t_invoke, t_scheduled=due)
        self.ledger.start(request_id, self.clock.epoch(progress.t_invoke))
        try:
            status, error_class, detail = await self._exchange(data, headers, progress)
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
        connector = self.session.connector
        if not isinstance(connector, CheckedReuseConnector):
            return False
        return await connector.prove(*self._server)

    def _stop_reusing(self) -> None:
        """A connection broke before any response: maybe a kept-alive one the server had
        closed. Reuse no connection to this server from now on (the record stays a
        failure; see :mod:`faultkit.load.connections`)."""
        connector = self.session.connector
        if isinstance(connector, CheckedReuseConnector):
            connector.stop_reusing(*self._server)

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
        self, data: bytes, headers: dict[str, str], progress: _Progress
    ) -> tuple[Status, str | None, str | None]:
        p = self.profile
        t0 = progress.t_invoke
        total_deadline = t0 + p.total_timeout_s
        first_deadline = min(t0 + p.first_token_timeout_s, total_deadline)
        waiting_first = p.stream and first_deadline < total_deadline
        deadline = first_deadline if waiting_first else total_deadline
        try:
            async with StreamDeadline(deadline, total_deadline) as cm, self.session.post(
                self.url,
                data=data,
                headers=headers,
                timeout=self._timeout,
                trace_request_ctx=progress,
            ) as resp:
                progress.t_first_byte = self.clock.mono()
                progress.http_status = resp.status
                if self.target.served_by_header:
                    progress.served_by = response_header(resp, self.target.served_by_header)
                if self.target.retries_header:
                    progress.gateway_retries = header_count(
                        response_header(resp, self.target.retries_header)
                    )
                if resp.status != 200:
                    error_class, detail, progress.error_body = await http_error(resp)
                    return "fail", error_class, detail
                if p.stream and resp.content_type != "application/json":
                    interp = StreamInterpreter()
                    progress.outcome = interp.outcome
                    mono = self.clock.mono
                    body = resp.content
                    arrivals = _arrivals(resp)
                    if arrivals is not None and arrivals.body is body:
                        progress.t_first_byte = self._arrived(arrivals.headers_at)
                    received = 0
                    async for chunk in body.iter_any():
                        if arrivals is None:
                            interp.feed(chunk, mono())
                        else:
                            for piece, at in arrivals.split(body, chunk, received):
                                interp.feed(piece, self._arrived(at))
                            received += len(chunk)
                        if waiting_first and interp.outcome.t_first_token is not None:
                            cm.first_token()
                            waiting_first = False
                    outcome = interp.close(mono())
                else:
                    outcome = parse_whole(await resp.read(), self.clock.mono())
                    progress.outcome = outcome
        except TimeoutError as exc:
            if progress.pool_wait:  # never got a connection: the client's pool was full
                connector = self.session.connector
                limit = connector.limit if connector is not None else 0
                return (
                    "fail",
                    "client_exhausted",
                    f"no free connection in the client's pool (limit {limit}) in time",
                )
            if isinstance(exc, aiohttp.ServerTimeoutError):
                raise  # aiohttp's own (connect) timeout: classified by classify_exception
            now = self.clock.mono()
            if waiting_first and progress.outcome.t_first_token is None and now < total_deadline:
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
        )


def pool_trace_config() -> aiohttp.TraceConfig:
    """A trace config that lets :class:`RequestRunner` tell a pool wait from a slow node.

    Give it to a ``ClientSession`` whose connector has a connection ``limit``: a request
    still queued for a free connection when its deadline passes (or aiohttp's ``connect``
    timeout fires) is then ``client_exhausted``, not ``timeout_*``.
    """
    config = aiohttp.TraceConfig()
    config.on_connection_queued_start.append(_queued_start)
    config.on_connection_queued_end.append(_queued_end)
    return config


async def _queued_start(
    session: aiohttp.ClientSession, ctx: Any, params: aiohttp.TraceConnectionQueuedStartParams
) -> None:
    if isinstance(ctx.trace_request_ctx, _Progress):
        ctx.trace_request_ctx.pool_wait = True


async def _queued_end(
    session: aiohttp.ClientSession, ctx: Any, params: aiohttp.TraceConnectionQueuedEndParams
) -> None:
    if isinstance(ctx.trace_request_ctx, _Progress):
        ctx.trace_request_ctx.pool_wait = False


def _arrivals(resp: aiohttp.ClientResponse) -> ArrivalMarks | None:
    """The kernel arrival marks of the response's connection (None: the consumer's clock,
    on a connection the load client's connector did not open)."""
    connection = resp.connection
    return arrival_marks(connection.transport) if connection is not None else None




def _opt(epoch: Any, mono: float | None) -> float | None:
    return None if mono is None else float(epoch(mono))

