"""The HTTP face of a simulated node (aiohttp 3.8 API only): OpenAI routes, health, metrics,
admin. SSE frames are ``data: {json}\\n\\n`` ending with ``data: [DONE]\\n\\n``; a mid-stream
engine death sends ``data: {"error": {…}}`` then ``[DONE]``.

Request ids: the ``X-Request-Id`` header when the client sends one (echoed back), else the
response id; ground-truth lines carry it as ``id``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any

from aiohttp import web

from testbed.simnode import textgen
from testbed.simnode.engine import Engine, engine_dead_error
from testbed.simnode.errors_body import error_response, over_context_message
from testbed.simnode.scheduler import SimRequest
from testbed.simnode.textgen import VOCAB_JSON, token_index
from testbed.simnode.validate import invalid_field

log = logging.getLogger("testbed.simnode")

SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
DONE = b"data: [DONE]\n\n"
UNTRACKED = frozenset({"/metrics", "/health"})


class Api:
    """Routes bound to one engine. ``loading`` is true until the model "has loaded"."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.cfg = engine.cfg
        self.truth = engine.truth
        self.metrics = engine.metrics
        self.created = int(time.time())
        #: what --leak-bytes-per-request keeps (written bytes: resident, not lazy zero pages)
        self._leaked: list[bytes] = []

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._http_metrics], client_max_size=64 * 1024**2)
        r = app.router
        r.add_get("/health", self.health)
        if self.cfg.personality == "sglang":
            r.add_get("/health_generate", self.health)
        else:
            r.add_get("/version", self.version)
        r.add_get("/v1/models", self.models)
        if self.cfg.personality == "vllm":
            r.add_post("/tokenize", self.tokenize)
        r.add_get("/metrics", self.metrics_text)
        r.add_post("/v1/chat/completions", self.chat)
        r.add_post("/v1/completions", self.completions)
        if self.cfg.admin:
            r.add_post("/admin/hang", self.admin_hang)
            r.add_post("/admin/slow", self.admin_slow)
            r.add_post("/admin/resume", self.admin_resume)
            r.add_get("/admin/state", self.admin_state)
        return app

    @web.middleware
    async def _http_metrics(self, request: web.Request, handler: Any) -> web.StreamResponse:
        t0 = time.monotonic()
        status = 500
        try:
            resp: web.StreamResponse = await handler(request)
            status = resp.status
            return resp
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            route = request.match_info.route.resource
            name = route.canonical if route is not None else "none"
            if name not in UNTRACKED:
                self.metrics.on_http(name, request.method, status, time.monotonic() - t0)

    # ------------------------------------------------------------------ plain routes
    async def health(self, request: web.Request) -> web.Response:
        eng = self.engine
        if eng.state != "ready":
            return web.Response(status=503)
        if self.cfg.personality == "sglang" and eng.stopped:
            ok = await eng.wait_progress(self.cfg.health_check_timeout_s)
            if not ok:
                log.error("Health check failed. Server couldn't get a response from "
                          "detokenizer for last %s seconds.", self.cfg.health_check_timeout_s)
                return web.Response(status=503)
        self.truth.emit("health_ok")  # the truth of a node answering readiness again
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.26.0+sim"})

    async def models(self, request: web.Request) -> web.Response:
        card = {"id": self.cfg.model_name, "object": "model", "created": self.created,
                "owned_by": self.cfg.personality, "root": self.cfg.model, "parent": None,
                "max_model_len": self.cfg.effective_max_model_len}
        return web.json_response({"object": "list", "data": [card]})

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM's ``POST /tokenize``: ``messages`` (with the chat template, as a chat
        completion counts them) or ``prompt`` → ``count``, ``max_model_len``, ``tokens``."""
        try:
            payload = await request.json()
            if not isinstance(payload, dict):
                raise ValueError("the body must be a JSON object")
            if "messages" in payload:
                count = textgen.count_chat_tokens(payload["messages"])
            else:
                count = textgen.count_prompt_tokens(payload.get("prompt"))
        except ValueError as exc:
            return web.json_response({"error": {"message": str(exc), "type": "BadRequestError",
                                                "param": None, "code": 400}}, status=400)
        return web.json_response({"count": count, "max_model_len": self.cfg.effective_max_model_len,
                                  "tokens": list(range(count))})

    async def metrics_text(self, request: web.Request) -> web.Response:
        body = self.metrics.render(self.engine.snapshot())
        return web.Response(body=body.encode(),
                            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    # ------------------------------------------------------------------ admin
    async def admin_hang(self, request: web.Request) -> web.Response:
        self.engine.hang()
        self.truth.emit("admin", action="hang")
        return web.json_response({"hung": True})

    async def admin_slow(self, request: web.Request) -> web.Response:
        try:
            factor = float(request.query.get("factor", "5"))
        except ValueError:
            factor = -1.0
        if not factor > 0:
            return web.json_response({"error": "factor must be a positive number"}, status=400)
        self.engine.slow(factor)
        self.truth.emit("admin", action="slow", factor=factor)
        return web.json_response({"slow_factor": factor})

    async def admin_resume(self, request: web.Request) -> web.Response:
        self.engine.resume()
        self.truth.emit("admin", action="resume")
        return web.json_response({"hung": False, "slow_factor": 1.0})

    async def admin_state(self, request: web.Request) -> web.Response:
        e = self.engine
        return web.json_response({
            "state": e.state, "hung": e.hung, "slow_factor": e.slow_factor,
            "core_stalled": e.core is not None and e.core.stalled,
            "core_pid": e.core.pid if e.core is not None else None,
            "running": len(e.scheduler.running), "waiting": len(e.scheduler.waiting),
            "free_blocks": e.allocator.num_free, "num_blocks": e.allocator.num_blocks,
            "preemptions": e.scheduler.num_preemptions,
            "headroom_bytes": e.budget.headroom_bytes,
        })

    # ------------------------------------------------------------------ generation
    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    def _reject(self, rid: str, status: int, message: str, etype: str,
                param: str | None = None) -> web.Response:
        self.truth.emit("rejected", id=rid, status=status, reason=message[:200])
        return error_response(self.cfg.personality, status, message, etype, param, rid)

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        cfg = self.cfg
        prefix = "chatcmpl-" if chat else "cmpl-"
        resp_id = prefix + uuid.uuid4().hex
        rid = request.headers.get("X-Request-Id") or resp_id
        eng = self.engine
        if eng.state == "dead":
            body = engine_dead_error(cfg.personality)
            status = 500 if cfg.personality == "vllm" else 503
            return self._reject(rid, status, body["message"], body["type"])
        if eng.state != "ready":
            return self._reject(rid, 503, "The server is starting up.", "ServiceUnavailable")
        try:
            payload = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._reject(rid, 400, "Invalid JSON in request body", "BadRequestError")
        if not isinstance(payload, dict):
            return self._reject(rid, 400, "Request body must be a JSON object", "BadRequestError")
        invalid = invalid_field(payload)
        if invalid is not None:
            return self._reject(rid, 400, invalid[1], "BadRequestError", invalid[0])
        model = payload.get("model", cfg.model_name)
        if model not in (cfg.model_name, cfg.model):
            return self._reject(rid, 404, f"The model `{model}` does not exist.",
                                "NotFoundError", "model")
        try:
            if chat:
                prompt_tokens = textgen.count_chat_tokens(payload.get("messages"))
                key = json.dumps(payload.get("messages"), sort_keys=True)
            else:
                prompt_tokens = textgen.count_prompt_tokens(payload.get("prompt"))
                key = json.dumps(payload.get("prompt"))
        except ValueError as exc:
            return self._reject(rid, 400, str(exc), "BadRequestError")
        max_len = cfg.effective_max_model_len
        raw_max = payload.get("max_completion_tokens", payload.get("max_tokens"))
        if raw_max is not None and (not isinstance(raw_max, int) or isinstance(raw_max, bool)
                                    or raw_max < 1):
            return self._reject(rid, 400, f"max_tokens must be at least 1, got {raw_max}.",
                                "BadRequestError", "max_tokens")
        problem = over_context_message(cfg.personality, prompt_tokens, raw_max, max_len)
        if problem is not None:
            return self._reject(rid, 400, problem, "BadRequestError")
        max_tokens = raw_max if raw_max is not None else max_len - prompt_tokens
        seed = textgen.request_seed(key, cfg.seed ^ int(payload.get("seed") or 0))
        natural = textgen.natural_length(seed)
        if payload.get("ignore_eos") or natural >= max_tokens:
            target, reason = max_tokens, "length"
        else:
            target, reason = natural, "stop"
        req = eng.submit(rid, prompt_tokens, target, reason, seed,
                         prompt=textgen.prompt_text(payload, chat=chat))
        leak: dict[str, int] = {}
        if cfg.leak_bytes_per_request > 0:
            self._leaked.append(b"\x01" * cfg.leak_bytes_per_request)
            leak = {"leaked_bytes": len(self._leaked) * cfg.leak_bytes_per_request}
        self.truth.emit("request_accepted", id=rid, prompt_tokens=prompt_tokens,
                        max_tokens=max_tokens, stream=bool(payload.get("stream")), **leak)
        opts = payload.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage", True)) if opts else False
        try:
            if payload.get("stream"):
                return await self._stream(request, req, resp_id, rid, chat, include_usage)
            return await self._whole(req, resp_id, rid, chat)
        except asyncio.CancelledError:  # aiohttp cancels the handler when the client leaves
            eng.abort(req, "client_disconnect")
            raise

    async def _whole(self, req: SimRequest, resp_id: str, rid: str, chat: bool) -> web.Response:
        sink = req.sink
        while not sink.done:
            await sink.event.wait()
            sink.event.clear()
        headers = {"X-Request-Id": rid}
        if sink.error is not None:
            return web.json_response({"error": sink.error}, status=500, headers=headers)
        text = textgen.text_of(sink.seed, sink.produced)
        usage = {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens
                 + sink.produced, "completion_tokens": sink.produced}
        choice: dict[str, Any] = {"index": 0, "logprobs": None,
                                  "finish_reason": sink.finish_reason, "stop_reason": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": text, "tool_calls": []}
            obj = "chat.completion"
        else:
            choice["text"] = text
            obj = "text_completion"
        body = {"id": resp_id, "object": obj, "created": int(time.time()),
                "model": self.cfg.model_name, "choices": [choice], "usage": usage}
        return web.json_response(body, headers=headers)

    async def _stream(self, request: web.Request, req: SimRequest, resp_id: str, rid: str,
                      chat: bool, include_usage: bool) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={**SSE_HEADERS, "X-Request-Id": rid})
        try:
            await self._pump(request, resp, req, resp_id, chat, include_usage)
        except ConnectionError:  # the client went away between two writes
            self.engine.abort(req, "client_disconnect")
        return resp

    async def _pump(self, request: web.Request, resp: web.StreamResponse, req: SimRequest,
                    resp_id: str, chat: bool, include_usage: bool) -> None:
        """Write the SSE stream of one request as its tokens appear."""
        await resp.prepare(request)
        obj = "chat.completion.chunk" if chat else "text_completion"
        head = (f'data: {{"id":"{resp_id}","object":"{obj}","created":{int(time.time())},'
                f'"model":{json.dumps(self.cfg.model_name)},"choices":[{{"index":0,')
        if chat:
            await resp.write((head + '"delta":{"role":"assistant","content":""},'
                              '"logprobs":null,"finish_reason":null}]}\n\n').encode())
            open_tok, close_tok = head + '"delta":{"content":', "},"
        else:
            open_tok, close_tok = head + '"text":', ","
        mid = '"logprobs":null,"finish_reason":null}]}\n\n'
        sink = req.sink
        sent = 0
        while True:
            await sink.event.wait()
            sink.event.clear()
            n = sink.produced
            parts = []
            last = n - 1 if sink.done and sink.error is None else n
            for i in range(sent, last):
                parts.append(open_tok + VOCAB_JSON[token_index(sink.seed, i)] + close_tok + mid)
            if last < n:
                parts.append(open_tok + VOCAB_JSON[token_index(sink.seed, last)] + close_tok
                             + f'"logprobs":null,"finish_reason":"{sink.finish_reason}",'
                             '"stop_reason":null}]}\n\n')
            sent = n
            if sink.error is not None:
                parts.append("data: " + json.dumps({"error": sink.error}) + "\n\n")
            elif sink.done and include_usage:
                usage = {"prompt_tokens": req.prompt_tokens,
                         "total_tokens": req.prompt_tokens + n, "completion_tokens": n}
                parts.append(head.replace('"choices":[{"index":0,', '"choices":[],')
                             + '"usage":' + json.dumps(usage) + "}\n\n")
            if parts:
                await resp.write("".join(parts).encode())
            if sink.done:
                await resp.write(DONE)
                break
        await resp.write_eof()
