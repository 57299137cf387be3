"""The engine core: an asyncio task that runs scheduler steps, sleeps the simulated time and
hands tokens to the HTTP layer; it also decides when the simulated GPU runs out of memory.

Durations are measured on the monotonic clock (``time.monotonic``); ground-truth events
carry epoch seconds (see :mod:`testbed.simnode.truth`).

States: ``loading`` → ``ready`` → (``dead`` after a simulated CUDA OOM, or the engine
core's death). ``hung`` (admin) and a stalled engine core (:mod:`.enginecore`: its process
SIGSTOPped) stop steps without changing the state, so ``/health`` keeps answering 200 on
vLLM; while the core is stalled the gauges freeze at their last values, as vLLM's do (its
engine core reports them).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from testbed.simnode.blocks import BlockAllocator
from testbed.simnode.config import GIB, MIB, MemoryBudget, SimConfig
from testbed.simnode.enginecore import CoreLink, cancelled
from testbed.simnode.metrics import EngineMetrics, Snapshot
from testbed.simnode.scheduler import ABORTED, FINISHED, Scheduler, SimRequest, StepPlan
from testbed.simnode.speculation import Drafter, accepted_drafts
from testbed.simnode.timing import TimingModel
from testbed.simnode.truth import TruthLog

log = logging.getLogger("testbed.simnode")

#: how long the loop waits for the engine core's next beat before looking again
WAIT_FOR_BEAT_S = 0.01
#: zero-latency mode: longest run of back-to-back steps before yielding to the event loop
ZERO_LATENCY_BURST_S = 0.002

ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."


@dataclass(eq=False)
class Sink:
    """Where the engine leaves a request's progress for its HTTP handler.

    ``produced`` is how many tokens exist so far; the handler renders tokens
    ``[sent, produced)`` (the text is a pure function of the seed and the index).
    ``error`` is an OpenAI-style error object when the engine died under the request.
    """

    seed: int
    t_arrival: float
    event: asyncio.Event = field(default_factory=asyncio.Event)
    produced: int = 0
    done: bool = False
    finish_reason: str | None = None
    error: dict[str, Any] | None = None
    t_scheduled: float | None = None
    t_first_token: float | None = None
    t_last_token: float | None = None


class Engine:
    def __init__(
        self,
        cfg: SimConfig,
        *,
        truth: TruthLog,
        metrics: EngineMetrics,
        on_fatal: Callable[[str], None],
    ) -> None:
        self.cfg = cfg
        self.truth = truth
        self.metrics = metrics
        self.on_fatal = on_fatal
        self.budget = MemoryBudget.from_config(cfg)
        self.allocator = BlockAllocator(self.budget.num_blocks)
        self.scheduler = Scheduler(
            self.allocator,
            block_size=cfg.block_size,
            max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=cfg.effective_max_num_batched_tokens,
            chunked_prefill=cfg.enable_chunked_prefill,
        )
        self.timing = TimingModel.from_config(cfg)
        self.drafter = Drafter(cfg.num_speculative_tokens, cfg.spec_acceptance_floor,
                               cfg.spec_acceptance_ceiling)
        self.state = "loading"
        self.hung = False
        self.core: CoreLink | None = None
        self._frozen: Snapshot | None = None
        self.slow_factor = 1.0
        self.activation_bytes = 0
        self.generated_total = 0
        self._wake = asyncio.Event()
        self._resume = asyncio.Event()
        self._resume.set()
        self._task: asyncio.Task[None] | None = None
        self._tp_mark = (time.monotonic(), 0)

    # ------------------------------------------------------------------ control
    def start(self, *, with_core: bool = True) -> None:
        """Start stepping; ``with_core``: behind an engine core process (:mod:`.enginecore`)."""
        self.state = "ready"
        if with_core:
            self.core = CoreLink(on_stall=self._core_stalled, on_resume=self._core_resumed,
                                 on_death=self._core_died)
            self.core.start()
            self.truth.emit("engine_core", pid=self.core.pid)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="simnode-engine")

    async def stop(self) -> None:
        await cancelled(self._task)
        self._task = None
        if self.core is not None:
            await self.core.stop()

    @property
    def stopped(self) -> bool:
        """No steps: hung by the admin API, or the engine core stalled."""
        return self.hung or (self.core is not None and self.core.stalled)

    def _core_stalled(self, since: float) -> None:
        self._frozen = self.snapshot()
        self._resume.clear()
        log.warning("engine core stopped beating (stalled; the API server still answers)")
        self.truth.emit("engine_stalled", since=since)

    def _core_resumed(self) -> None:
        self._frozen = None
        if not self.hung:
            self._resume.set()
        log.warning("engine core beating again (resumed)")
        self.truth.emit("engine_resumed")

    def _core_died(self, exit_code: int | None) -> None:
        if self.state == "dead":
            return
        log.error("Engine core process died (exit %s).", exit_code)
        log.error(ENGINE_DEAD_MESSAGE)
        self.truth.emit("engine_core_died", exit_code=exit_code)
        self._fail_all("engine_core_died")
        self.on_fatal("engine_core_died")

    def hang(self) -> None:
        self.hung = True
        self._resume.clear()
        log.warning("admin: engine hung (no more steps; /health unchanged)")

    def resume(self) -> None:
        self.hung = False
        self.slow_factor = 1.0
        if not self.stopped:  # a stalled core still holds the steps
            self._resume.set()
        log.warning("admin: engine resumed")

    def slow(self, factor: float) -> None:
        self.slow_factor = factor
        log.warning("admin: engine slowed by x%s", factor)

    async def wait_progress(self, timeout_s: float) -> bool:
        """True when the engine can make progress within ``timeout_s`` (SGLang's health probe)."""
        if self.state != "ready":
            return False
        try:
            await asyncio.wait_for(self._resume.wait(), timeout_s)
        except TimeoutError:
            return False
        return self.state == "ready"

    # ------------------------------------------------------------------ requests
    def submit(self, rid: str, prompt_tokens: int, target_tokens: int, finish_reason: str,
               seed: int, prompt: str = "") -> SimRequest:
        """Queue a request; ``prompt`` (its text) sets its acceptance under speculation."""
        sink = Sink(seed=seed, t_arrival=time.monotonic())
        req = SimRequest(rid, prompt_tokens, target_tokens, finish_reason, sink=sink)
        if self.drafter.enabled:
            req.acceptance = self.drafter.acceptance_of(prompt)
            req.draft_rng = random.Random(seed)
        self.scheduler.add(req)
        self._wake.set()
        return req

    def abort(self, req: SimRequest, reason: str) -> None:
        """The client went away: free the request's KV and record the drop."""
        if req.state in ("finished", "aborted") or self.state == "dead":
            return
        self.scheduler.abort(req)
        self._finish_metrics(req, "abort")
        self.truth.emit("request_dropped", id=req.rid, reason=reason,
                        output_tokens=req.num_output)

    def snapshot(self) -> Snapshot:
        if self._frozen is not None:
            return self._frozen
        now = time.monotonic()
        t0, n0 = self._tp_mark
        rate = (self.generated_total - n0) / (now - t0) if now > t0 else 0.0
        if now - t0 >= 1.0:
            self._tp_mark = (now, self.generated_total)
        used = self.budget.used_bytes(self.activation_bytes)
        return Snapshot(
            running=len(self.scheduler.running),
            waiting=len(self.scheduler.waiting),
            kv_usage=self.allocator.usage,
            kv_used_tokens=self.allocator.num_used * self.cfg.block_size,
            kv_total_tokens=self.budget.kv_tokens,
            fb_used_mib=used / MIB,
            fb_free_mib=max(self.budget.total_bytes - used, 0) / MIB,
            gen_throughput=rate,
        )

    # ------------------------------------------------------------------ the loop
    async def _run(self) -> None:
        sched = self.scheduler
        cfg = self.cfg
        burst_start = time.monotonic()
        while self.state == "ready":
            if self.hung or (self.core is not None and self.core.stalled):
                await self._resume.wait()
                continue
            if self.core is not None and not self.core.can_step():
                await asyncio.sleep(WAIT_FOR_BEAT_S)  # a beat late, or the core stopping
                continue
            if not sched.has_work:
                self._wake.clear()
                await self._wake.wait()
                burst_start = time.monotonic()
                continue
            plan = sched.schedule()
            if plan.preempted:
                self.metrics.on_preemptions(len(plan.preempted))
                word = "retracted" if cfg.personality == "sglang" else "preempted"
                log.warning("%d request(s) %s for lack of KV cache blocks",
                            len(plan.preempted), word)
            if plan.empty:
                await asyncio.sleep(0.001)
                continue
            activation = plan.step_tokens * cfg.activation_bytes_per_token
            if activation > self.budget.headroom_bytes:
                self._oom(activation, plan.step_tokens)
                return
            now = time.monotonic()
            for req, _ in plan.scheduled:
                if req.sink.t_scheduled is None:
                    req.sink.t_scheduled = now
            seconds = self.timing.step_seconds(
                plan.prefill_tokens, plan.decode_seqs, plan.context_tokens
            ) * self.slow_factor
            if seconds > 0:
                self.activation_bytes = activation
                await asyncio.sleep(seconds)
                self.activation_bytes = 0
                if self.state != "ready":
                    return
            produced = sched.complete(plan)
            self._deliver(produced, plan.step_tokens, self._speculate(plan))
            if seconds <= 0:
                # zero latency: run back-to-back steps for ~2 ms before yielding, so each
                # stream's handler wakes once per burst and writes its frames in one go
                now = time.monotonic()
                if now - burst_start >= ZERO_LATENCY_BURST_S:
                    await asyncio.sleep(0)
                    burst_start = time.monotonic()

    def _speculate(self, plan: StepPlan) -> int:
        """Each decoded request's drafts verified in this step (:mod:`.speculation`): the
        accepted ones join its output; how many tokens that added."""
        k = self.drafter.k
        added = 0
        for req in plan.decoding if k else ():
            if req.state == ABORTED:
                continue
            kept = self.scheduler.extend(req, accepted_drafts(req.draft_rng, req.acceptance, k))
            req.drafted += k
            req.accepted += kept
            self.metrics.on_drafts(k, kept)
            added += kept
        return added

    def _deliver(self, produced: list[SimRequest], step_tokens: int, drafted: int = 0) -> None:
        """Hand this step's tokens to the handlers: one per request in ``produced``, plus
        the ``drafted`` tokens speculation accepted (already in their requests' counts)."""
        m = self.metrics
        m.on_step(step_tokens)
        t = time.monotonic()
        for req in produced:
            sink: Sink = req.sink
            sink.produced = req.num_output
            if sink.t_first_token is None:
                sink.t_first_token = t
                m.on_first_token(t - sink.t_arrival, (sink.t_scheduled or t) - sink.t_arrival,
                                 req.prompt_tokens)
            else:
                m.on_token_gap(t - (sink.t_last_token or t))
            sink.t_last_token = t
            if req.state == FINISHED:
                sink.finish_reason = req.finish_reason
                sink.done = True
                self._finish_metrics(req, req.finish_reason)
                self.truth.emit("request_finished", id=req.rid, finish_reason=req.finish_reason,
                                prompt_tokens=req.prompt_tokens, output_tokens=req.num_output,
                                **self._draft_truth(req))
            sink.event.set()
        self.generated_total += len(produced) + drafted
        m.on_tokens(len(produced) + drafted)

    def _draft_truth(self, req: SimRequest) -> dict[str, Any]:
        """Speculation's ground truth for a finished request (none without it)."""
        if not self.drafter.enabled:
            return {}
        return {"drafted_tokens": req.drafted, "accepted_tokens": req.accepted,
                "acceptance": round(req.acceptance, 4)}

    def _finish_metrics(self, req: SimRequest, reason: str) -> None:
        s: Sink = req.sink
        t = time.monotonic()
        sched = s.t_scheduled or t
        first = s.t_first_token or t
        self.metrics.on_finished(
            reason=reason, e2e_s=t - s.t_arrival, queue_s=sched - s.t_arrival,
            prefill_s=first - sched, decode_s=t - first, prompt_tokens=req.prompt_tokens,
            output_tokens=req.num_output, preemptions=req.num_preemptions,
        )

    def _oom(self, tried_bytes: int, step_tokens: int) -> None:
        """Simulated ``torch.OutOfMemoryError``: fail every request, then ask to exit."""
        self.state = "dead"
        b = self.budget
        free = max(b.headroom_bytes, 0)
        in_use = b.total_bytes - free
        log.error(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has "
            "a total capacity of %.2f GiB of which %.2f GiB is free. Including non-PyTorch "
            "memory, this process has %.2f GiB memory in use. Of the allocated memory %.2f GiB "
            "is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If "
            "reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
            tried_bytes / GIB, b.total_bytes / GIB, free / GIB, in_use / GIB,
            (in_use - b.cuda_context_bytes) / GIB,
        )
        log.error("EngineCore encountered a fatal error.")
        victims = [*self.scheduler.running, *self.scheduler.waiting]
        self.truth.emit("oom", tried_bytes=tried_bytes, free_bytes=free, step_tokens=step_tokens,
                        in_flight=[r.rid for r in victims])
        self._fail_all("oom")
        self.on_fatal("oom")

    def _fail_all(self, reason: str) -> None:
        """The engine is dead: every request in flight gets the dead engine's error."""
        self.state = "dead"
        error = engine_dead_error(self.cfg.personality)
        for req in [*self.scheduler.running, *self.scheduler.waiting]:
            self.scheduler.abort(req)
            self._finish_metrics(req, "error")
            req.sink.error = error
            req.sink.done = True
            req.sink.event.set()
            self.truth.emit("request_dropped", id=req.rid, reason=reason,
                            output_tokens=req.num_output)
        self._resume.set()


def engine_dead_error(personality: str) -> dict[str, Any]:
    """The error object a dead engine returns (inside ``{"error": …}``)."""
    body: dict[str, Any] = {"message": ENGINE_DEAD_MESSAGE, "type": "InternalServerError",
                            "param": None, "code": 500}
    if personality == "sglang":
        body = {"object": "error", **body}
    return body
