"""Lifecycle of one simulated node: start-up checks, the model-load delay, serving, dying.

Start-up, as vLLM does it: config checks (``--max-model-len`` vs the model's maximum) fail
at once; the KV-cache check ("can one max-length sequence fit?") fails after the load
delay. Either way the process logs ``ValueError: <vLLM's message>`` and exits 1.

Load delay: the vLLM personality binds its port only after loading (connection refused
meanwhile); the SGLang personality binds at once and answers 503 until loaded.

After a simulated CUDA OOM the node answers ``/health`` 503 and exits with code 1
``oom_exit_delay_s`` later, so Docker's ``on-failure`` restart policy brings it back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
from aiohttp import web

from testbed.simnode.api import Api
from testbed.simnode.config import (
    GIB,
    MemoryBudget,
    SimConfig,
    StartupError,
    parse_args,
    validate,
    validate_kv_cache,
)
from testbed.simnode.engine import Engine
from testbed.simnode.metrics import EngineMetrics
from testbed.simnode.truth import TruthLog

log = logging.getLogger("testbed.simnode")

_AIOHTTP_39 = tuple(int(x) for x in aiohttp.__version__.split(".")[:2]) >= (3, 9)


class SimNode:
    """One node. ``await start()`` returns once it is ready (raises :class:`StartupError`)."""

    def __init__(self, cfg: SimConfig, *, exit_fn: Callable[[int], None] = os._exit) -> None:
        self.cfg = cfg
        self.exit_fn = exit_fn
        self.truth = TruthLog(cfg.truth_file)
        self.start_time = time.time()
        self.budget = MemoryBudget.from_config(cfg)
        self.metrics = EngineMetrics(
            cfg.personality, cfg.model_name,
            max_model_len=cfg.effective_max_model_len, block_size=cfg.block_size,
            num_blocks=self.budget.num_blocks,
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            process_start_time=self.start_time,
            speculative=cfg.num_speculative_tokens > 0,
        )
        self.engine: Engine | None = None
        self.runner: web.AppRunner | None = None
        self.port: int | None = None
        self.exit_code: int | None = None

    async def start(self) -> None:
        cfg = self.cfg
        self.truth.emit("started", pid=os.getpid(), personality=cfg.personality,
                        port=cfg.port, model=cfg.model_name)
        log.info("simnode %s personality, model %s, max_model_len %d, chunked prefill %s",
                 cfg.personality, cfg.model_name, cfg.effective_max_model_len,
                 cfg.enable_chunked_prefill)
        try:
            validate(cfg)
        except StartupError as exc:
            self._startup_failed(exc)
            raise
        self.engine = Engine(cfg, truth=self.truth, metrics=self.metrics,
                             on_fatal=self._fatal)
        api = Api(self.engine)
        if cfg.personality == "sglang":
            await self._bind(api)
        await asyncio.sleep(cfg.load_seconds)
        # printed once the weights are in, as vLLM prints it: the recovery phases date the
        # end of weight loading by this line
        log.info("Loading model weights took %.2f GiB (simulated %.1f s)",
                 cfg.weights_gb, cfg.load_seconds)
        try:
            validate_kv_cache(cfg, self.budget)
        except StartupError as exc:
            self._startup_failed(exc)
            await self._unbind()
            raise
        b = self.budget
        log.info("Available KV cache memory: %.2f GiB", b.kv_pool_bytes / GIB)
        log.info("GPU KV cache size: %d tokens (%d blocks)", b.kv_tokens, b.num_blocks)
        self.engine.start()
        if cfg.personality == "vllm":
            await self._bind(api)
        self.truth.emit("ready", port=self.port)
        if cfg.personality == "vllm":
            log.info("Starting vLLM API server on http://%s:%s", cfg.host, self.port)
        else:
            log.info("The server is fired up and ready to roll!")

    async def _bind(self, api: Api) -> None:
        # 3.9+ no longer cancels handlers when the client goes away; 3.8 always did
        kwargs: dict[str, Any] = {"handler_cancellation": True} if _AIOHTTP_39 else {}
        self.runner = web.AppRunner(api.app(), access_log=None, **kwargs)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.cfg.host, self.cfg.port)
        await site.start()
        server = site._server  # the asyncio server; aiohttp 3.8 has no public accessor
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.cfg.port

    async def _unbind(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    def _startup_failed(self, exc: StartupError) -> None:
        log.error("EngineCore failed to start.")
        print(f"Traceback (most recent call last):\n  (simulated)\nValueError: {exc}",
              file=sys.stderr, flush=True)
        self.truth.emit("dead", reason="startup_validation", exit_code=1, message=str(exc))
        self.exit_code = 1

    def _fatal(self, reason: str) -> None:
        asyncio.get_running_loop().call_later(self.cfg.oom_exit_delay_s, self._die, 1, reason)

    def _die(self, code: int, reason: str) -> None:
        log.error("Engine is dead (%s); exiting with code %d", reason, code)
        self.truth.emit("dead", reason=reason, exit_code=code)
        self.truth.close()
        self.exit_code = code
        for h in logging.getLogger().handlers:
            h.flush()
        sys.stderr.flush()
        sys.stdout.flush()
        self.exit_fn(code)

    async def stop(self) -> None:
        """Graceful stop (SIGTERM): in-flight requests are dropped, exit code 0."""
        if self.engine is not None:
            for req in [*self.engine.scheduler.running, *self.engine.scheduler.waiting]:
                self.engine.abort(req, "shutdown")
            await self.engine.stop()
        await self._unbind()
        self.truth.emit("dead", reason="sigterm", exit_code=0)
        self.truth.close()


def setup_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format="%(levelname)s %(asctime)s [%(module)s.py:%(lineno)d] %(message)s",
        datefmt="%m-%d %H:%M:%S",
    )


async def _amain(cfg: SimConfig) -> int:
    node = SimNode(cfg)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    starting = asyncio.create_task(node.start())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if starting.done() and starting.exception() is not None:
        stopping.cancel()
        exc = starting.exception()
        if isinstance(exc, StartupError):
            return 1
        raise exc  # type: ignore[misc]  # a bug: show the traceback
    await stopping
    starting.cancel()
    await node.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m testbed.simnode …``; returns the process exit code."""
    cfg = parse_args(argv)
    setup_logging()
    return asyncio.run(_amain(cfg))
