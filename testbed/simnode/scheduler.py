"""Continuous-batching scheduler with KV-block preemption (vLLM V1 style). Pure, no I/O.

Each step the scheduler picks work under a token budget (``max_num_batched_tokens``):
running requests first (a decode needs 1 token; a partial or recomputed prefill needs the
rest, chunked when chunked prefill is on), then waiting requests in arrival order while
``max_num_seqs`` and the KV pool allow. When a running request needs a block and none is
free, the lowest-priority (latest-admitted) running request is **preempted**: its blocks
are freed, its computed tokens are forgotten and it goes back to the front of the queue to
recompute prompt + output so far (vLLM "recompute"; SGLang calls the same move a
"retraction"). No new request is admitted in a step that preempted.

A step that finishes computing all of a request's known tokens produces one new token.
A request finishes when it has produced ``target_tokens``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from testbed.simnode.blocks import BlockAllocator
from testbed.simnode.config import blocks_for

WAITING, RUNNING, FINISHED, ABORTED = "waiting", "running", "finished", "aborted"


@dataclass(eq=False)
class SimRequest:
    """One generation request as the engine core sees it (token counts only)."""

    rid: str
    prompt_tokens: int
    target_tokens: int
    finish_reason: str = "length"
    num_computed: int = 0
    num_output: int = 0
    blocks: list[int] = field(default_factory=list)
    state: str = WAITING
    num_preemptions: int = 0
    sink: Any = None
    #: per-draft acceptance under speculation (:mod:`.speculation`), the request's own
    #: seeded draws, and its drafted and accepted tokens so far
    acceptance: float = 0.0
    draft_rng: Any = None
    drafted: int = 0
    accepted: int = 0

    @property
    def total_known(self) -> int:
        """Prompt plus tokens generated so far: what the KV cache must eventually hold."""
        return self.prompt_tokens + self.num_output


@dataclass
class StepPlan:
    """What one engine step computes."""

    scheduled: list[tuple[SimRequest, int]] = field(default_factory=list)
    preempted: list[SimRequest] = field(default_factory=list)
    prefill_tokens: int = 0
    decode_seqs: int = 0
    context_tokens: int = 0
    #: the requests this step decodes (one token each, plus accepted drafts under
    #: speculation)
    decoding: list[SimRequest] = field(default_factory=list)

    @property
    def step_tokens(self) -> int:
        return self.prefill_tokens + self.decode_seqs

    @property
    def empty(self) -> bool:
        return not self.scheduled


class Scheduler:
    def __init__(
        self,
        allocator: BlockAllocator,
        *,
        block_size: int,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        chunked_prefill: bool,
    ) -> None:
        self.allocator = allocator
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.chunked_prefill = chunked_prefill
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.num_preemptions = 0

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, req: SimRequest) -> None:
        if req.target_tokens < 1 or req.prompt_tokens < 1:
            raise ValueError("a request needs at least one prompt token and one output token")
        req.state = WAITING
        self.waiting.append(req)

    def abort(self, req: SimRequest) -> None:
        """Drop a request wherever it is and free its blocks (idempotent)."""
        if req.state == RUNNING:
            self.running.remove(req)
        elif req.state == WAITING:
            self.waiting.remove(req)
        else:
            return
        self._release(req)
        req.state = ABORTED

    def _release(self, req: SimRequest) -> None:
        self.allocator.free(req.blocks)
        req.blocks = []

    def _preempt(self, req: SimRequest) -> None:
        self.running.remove(req)
        self._release(req)
        req.num_computed = 0
        req.num_preemptions += 1
        req.state = WAITING
        self.waiting.appendleft(req)
        self.num_preemptions += 1

    def schedule(self) -> StepPlan:
        """Choose this step's work; may preempt running requests. Mutates block ownership."""
        plan = StepPlan()
        budget = self.max_num_batched_tokens
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            need = req.total_known - req.num_computed
            if not self.chunked_prefill and need > budget:
                i += 1
                continue
            n = min(need, budget)
            extra = blocks_for(req.num_computed + n, self.block_size) - len(req.blocks)
            got = self.allocator.allocate(extra) if extra > 0 else []
            while got is None:
                victim = self.running[-1]
                self._preempt(victim)
                plan.preempted.append(victim)
                if victim is req:
                    break
                got = self.allocator.allocate(extra)
            if got is None:
                break  # req itself was preempted; everything after it already was too
            req.blocks.extend(got)
            self._add_to_plan(plan, req, n)
            budget -= n
            i += 1
        if plan.preempted:
            return plan
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            need = req.total_known - req.num_computed
            if not self.chunked_prefill and need > budget:
                break
            n = min(need, budget)
            got = self.allocator.allocate(blocks_for(n, self.block_size))
            if got is None:
                break
            self.waiting.popleft()
            req.blocks = got
            req.state = RUNNING
            self.running.append(req)
            self._add_to_plan(plan, req, n)
            budget -= n
        return plan

    @staticmethod
    def _add_to_plan(plan: StepPlan, req: SimRequest, n: int) -> None:
        plan.scheduled.append((req, n))
        if n == 1 and req.num_output > 0 and req.num_computed == req.total_known - 1:
            plan.decode_seqs += 1
            plan.context_tokens += req.num_computed
            plan.decoding.append(req)
        else:
            plan.prefill_tokens += n

    def complete(self, plan: StepPlan) -> list[SimRequest]:
        """Apply a finished step; return requests that produced a token (in plan order).

        A returned request whose ``state`` is ``finished`` has produced its last token.
        Requests aborted while the step ran are skipped.
        """
        produced: list[SimRequest] = []
        for req, n in plan.scheduled:
            if req.state != RUNNING:
                continue
            req.num_computed += n
            if req.num_computed < req.total_known:
                continue
            req.num_output += 1
            produced.append(req)
            if req.num_output >= req.target_tokens:
                self.running.remove(req)
                self._release(req)
                req.state = FINISHED
        return produced

    def extend(self, req: SimRequest, tokens: int) -> int:
        """Accept up to ``tokens`` verified draft tokens of running ``req`` after its step:
        no more than it still wants, nor than the KV cache can hold (drafts beyond a full
        cache are rejected, as a real engine rejects what it cannot store). Their KV is
        computed (the verifying pass did it); returns how many were accepted.
        """
        if req.state != RUNNING or tokens <= 0:
            return 0
        n = min(tokens, req.target_tokens - req.num_output)
        extra = blocks_for(req.num_computed + n, self.block_size) - len(req.blocks)
        if extra > 0:
            got = self.allocator.allocate(extra)
            if got is None:
                n = len(req.blocks) * self.block_size - req.num_computed
            else:
                req.blocks.extend(got)
        if n <= 0:
            return 0
        req.num_computed += n
        req.num_output += n
        if req.num_output >= req.target_tokens:
            self.running.remove(req)
            self._release(req)
            req.state = FINISHED
        return n
