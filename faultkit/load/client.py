"""Send one request over aiohttp and classify how it ended — the load generator's hot path.

aiohttp is the transport because it is the one that keeps up (DESIGN.md "HTTP clients").
This module is the one place that translates aiohttp / socket exceptions into error classes:

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
``other``              anything else (detail names the exception type)
=====================  ==========================================================

``error_detail`` never contains request or response headers (where API keys live).
"""

from __future__ import annotations

import asyncio
import errno
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from faultkit.load.ledger import Clock, Ledger
from faultkit.load.profile import LoadProfile, Target
from faultkit.load.prompts import synthetic_prompt
from faultkit.load.sse import StreamInterpreter, StreamOutcome
from faultkit.records import RequestKind, RequestRecord, Status

__all__ = ["RequestRunner", "classify_exception"]

_ERROR_BODY_BYTES = 4096


@dataclass(slots=True)
class _Progress:
    """What is known about a request so far (monotonic times)."""

    t_invoke: float
    t_first_byte: float | None = None
    http_status: int | None = None
    outcome: StreamOutcome = field(default_factory=StreamOutcome)


class RequestRunner:
    """Builds request bodies for a profile and runs them against a target.

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
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=profile.connect_timeout_s, connect=None
        )
        self._headers = {"Content-Type": "application/json"}
        if target.api_key:
            self._headers["Authorization"] = f"Bearer {target.api_key}"

    def body(self, index: int) -> bytes:
        """The JSON body of request number ``index`` (deterministic from the profile seed)."""
        p = self.profile
        prompt = synthetic_prompt(p.input_tokens, seed=p.seed, index=index)
        body: dict[str, Any] = {"model": self.target.model, "max_tokens": p.output_tokens}
        if p.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body["stream"] = p.stream
        if p.stream and p.include_usage:
            body["stream_options"] = {"include_usage": True}
        if p.ignore_eos and self.target.supports_ignore_eos:
            body["ignore_eos"] = True
        body.update(p.extra_body)
        return json.dumps(body, separators=(",", ":")).encode()

    async def run(self, index: int, request_id: str) -> RequestRecord:
        """Send request ``index`` as ``request_id``; return its terminal record."""
        data = self.body(index)
        headers = {**self._headers, "X-Request-Id": request_id}
        progress = _Progress(t_invoke=self.clock.mono())
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
        record = self._record(request_id, progress, status, error_class, detail)
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
            async with asyncio.timeout_at(deadline) as cm:
                async with self.session.post(
                    self.url, data=data, headers=headers, timeout=self._timeout
                ) as resp:
                    progress.t_first_byte = self.clock.mono()
                    progress.http_status = resp.status
                    if resp.status != 200:
                        return "fail", *await _http_error(resp)
                    if p.stream and resp.content_type != "application/json":
                        interp = StreamInterpreter()
                        progress.outcome = interp.outcome
                        mono = self.clock.mono
                        async for chunk in resp.content.iter_any():
                            interp.feed(chunk, mono())
                            if waiting_first and interp.outcome.t_first_token is not None:
                                cm.reschedule(total_deadline)
                                waiting_first = False
                        outcome = interp.close(mono())
                    else:
                        outcome = _parse_whole(await resp.read(), self.clock.mono())
                        progress.outcome = outcome
        except TimeoutError as exc:
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

    def _record(
        self,
        request_id: str,
        progress: _Progress,
        status: Status,
        error_class: str | None,
        detail: str | None,
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
            t_end=epoch(self.clock.mono()),
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
        )


def _opt(epoch: Any, mono: float | None) -> float | None:
    return None if mono is None else float(epoch(mono))


def classify_exception(exc: BaseException) -> tuple[str, str]:
    """Map a transport exception to ``(error_class, short detail)``. The one translation point."""
    name = type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_err = exc.os_error
        if isinstance(os_err, ConnectionRefusedError) or os_err.errno == errno.ECONNREFUSED:
            return "refused", f"connection refused by {exc.host}:{exc.port}"
        if isinstance(os_err, TimeoutError):
            return "timeout_connect", f"connect to {exc.host}:{exc.port} timed out"
        return "other", f"cannot connect to {exc.host}:{exc.port}: {os_err.strerror or name}"
    if isinstance(exc, aiohttp.ConnectionTimeoutError | aiohttp.ServerTimeoutError):
        return "timeout_connect", f"connect timed out ({name})"
    if isinstance(
        exc,
        aiohttp.ServerDisconnectedError
        | aiohttp.ClientPayloadError
        | aiohttp.ClientOSError
        | ConnectionError,
    ):
        return "reset", f"connection broken: {name}: {_first_line(exc)}"
    if isinstance(exc, TimeoutError):
        return "timeout_total", f"timed out ({name})"
    return "other", f"{name}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""


async def _http_error(resp: aiohttp.ClientResponse) -> tuple[str, str]:
    """Error class and ``"HTTP <status>: <message>"`` for a non-200 response."""
    status = resp.status
    if status == 429:
        error_class = "http_429"
    elif 400 <= status < 500:
        error_class = "http_4xx"
    elif 500 <= status < 600:
        error_class = "http_5xx"
    else:
        error_class = "other"
    try:
        raw = await resp.content.read(_ERROR_BODY_BYTES)
    except (aiohttp.ClientError, ConnectionError):
        raw = b""
    return error_class, f"HTTP {status}: {_body_message(raw)}"


def _body_message(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    try:
        obj = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:200]
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict):
            msg = err.get("message") or err.get("type") or err
        else:
            msg = err if err is not None else obj.get("message") or obj.get("detail") or obj
        return " ".join(str(msg).split())[:200]
    return " ".join(text.split())[:200]


def _parse_whole(raw: bytes, t: float) -> StreamOutcome:
    """Interpret a non-streamed JSON answer (status 200) as a one-chunk outcome at ``t``."""
    out = StreamOutcome(done=True, chunks=1)
    try:
        obj = json.loads(raw)
    except ValueError:
        out.error_class, out.error_detail = "stream_error", f"body is not JSON: {raw[:120]!r}"
        return out
    if not isinstance(obj, dict) or "error" in obj:
        why = _body_message(raw)
        out.error_class, out.error_detail = "stream_error", f"error body after 200: {why}"
        return out
    usage = obj.get("usage")
    if isinstance(usage, dict):
        if isinstance(usage.get("prompt_tokens"), int):
            out.prompt_tokens = usage["prompt_tokens"]
        if isinstance(usage.get("completion_tokens"), int):
            out.completion_tokens = usage["completion_tokens"]
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        out.error_class, out.error_detail = "stream_error", "answer has no choices"
        return out
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    text: object = message.get("content") if isinstance(message, dict) else choice.get("text")
    reason = choice.get("finish_reason")
    if isinstance(reason, str):
        out.finish_reason = reason
        if reason in ("error", "abort"):
            out.error_class, out.error_detail = "stream_error", f"finish_reason {reason!r}"
    if text:
        out.t_first_token = out.t_last_token = t
        out.content_chunks = 1
    return out
