"""Pure simnode logic: block allocator, scheduler, timing model, VRAM budget, validation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from faultkit.inventory import load_inventory
from testbed.simnode import textgen
from testbed.simnode.blocks import BlockAllocator
from testbed.simnode.config import (
    MemoryBudget,
    SimConfig,
    StartupError,
    blocks_for,
    parse_args,
    validate,
    validate_kv_cache,
)
from testbed.simnode.scheduler import FINISHED, RUNNING, Scheduler, SimRequest
from testbed.simnode.timing import TimingModel
from tests.paths import REPO

INVENTORY = REPO / "testbed" / "inventory.yaml"

# ---------------------------------------------------------------- block allocator


def test_allocator_all_or_nothing_and_double_free_raises() -> None:
    a = BlockAllocator(4)
    got = a.allocate(3)
    assert got is not None
    assert len(set(got)) == 3
    assert a.allocate(2) is None
    assert a.num_free == 1  # the failed allocation took nothing
    a.free(got)
    assert a.num_free == 4
    assert a.usage == 0.0
    with pytest.raises(ValueError, match="double free"):
        a.free([got[0]])


class AllocatorMachine(RuleBasedStateMachine):
    """Random allocate/free sequences: no block is ever owned twice or lost."""

    @initialize(n=st.integers(0, 40))
    def setup(self, n: int) -> None:
        self.alloc = BlockAllocator(n)
        self.owned: list[list[int]] = []

    @rule(k=st.integers(0, 12))
    def allocate(self, k: int) -> None:
        free_before = self.alloc.num_free
        got = self.alloc.allocate(k)
        if k > free_before:
            assert got is None
            assert self.alloc.num_free == free_before
        else:
            assert got is not None
            assert len(got) == k
            self.owned.append(got)

    @precondition(lambda self: bool(self.owned))
    @rule(i=st.integers(0, 100))
    def free(self, i: int) -> None:
        self.alloc.free(self.owned.pop(i % len(self.owned)))

    @invariant()
    def no_double_allocation_no_leak(self) -> None:
        held = [b for group in self.owned for b in group]
        assert len(held) == len(set(held))
        assert all(0 <= b < self.alloc.num_blocks for b in held)
        assert self.alloc.num_used == len(held)
        assert self.alloc.num_free + len(held) == self.alloc.num_blocks


TestAllocatorMachine = AllocatorMachine.TestCase
TestAllocatorMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)

# ---------------------------------------------------------------- scheduler


def make_scheduler(num_blocks: int, *, block_size: int = 4, seqs: int = 8, batched: int = 32,
                   chunked: bool = True) -> Scheduler:
    return Scheduler(BlockAllocator(num_blocks), block_size=block_size, max_num_seqs=seqs,
                     max_num_batched_tokens=batched, chunked_prefill=chunked)


def run_to_completion(s: Scheduler, max_steps: int = 10_000) -> int:
    steps = 0
    while s.has_work:
        s.complete(s.schedule())
        steps += 1
        assert steps < max_steps, "scheduler made no progress (deadlock)"
    return steps


def test_first_token_after_chunked_prefill_then_one_token_per_step() -> None:
    s = make_scheduler(100, batched=32)
    r = SimRequest("a", prompt_tokens=100, target_tokens=3)
    s.add(r)
    produced_at = []
    for step in range(1, 20):
        if s.complete(s.schedule()):
            produced_at.append(step)
        if r.state == FINISHED:
            break
    # 100 prompt tokens in chunks of 32 → 4 steps to the first token, then one per step
    assert produced_at == [4, 5, 6]
    assert r.num_output == 3
    assert s.allocator.num_free == 100


def test_without_chunked_prefill_a_long_prompt_is_one_step() -> None:
    s = make_scheduler(100, batched=128, chunked=False)
    s.add(SimRequest("a", prompt_tokens=100, target_tokens=2))
    plan = s.schedule()
    assert plan.prefill_tokens == 100
    assert plan.step_tokens == 100


def test_kv_pressure_preempts_latest_and_everyone_still_finishes() -> None:
    s = make_scheduler(10, block_size=4, seqs=8, batched=64)  # 40 tokens of KV
    reqs = [SimRequest(str(i), prompt_tokens=10, target_tokens=20) for i in range(3)]
    for r in reqs:
        s.add(r)
    run_to_completion(s)
    assert s.num_preemptions > 0
    assert all(r.state == FINISHED and r.num_output == 20 for r in reqs)
    assert reqs[0].num_preemptions == 0  # the oldest request is never the victim while others run
    assert s.allocator.num_free == 10


def test_max_num_seqs_caps_the_batch() -> None:
    s = make_scheduler(1000, seqs=2, batched=1000)
    for i in range(5):
        s.add(SimRequest(str(i), prompt_tokens=4, target_tokens=5))
    s.schedule()
    assert len(s.running) == 2
    assert len(s.waiting) == 3


def test_abort_frees_blocks_even_mid_step() -> None:
    s = make_scheduler(50)
    r = SimRequest("a", prompt_tokens=30, target_tokens=10)
    s.add(r)
    plan = s.schedule()
    assert s.allocator.num_used > 0
    s.abort(r)
    assert s.complete(plan) == []  # the step that was running for it produces nothing
    assert s.allocator.num_used == 0
    assert not s.has_work


class SchedulerMachine(RuleBasedStateMachine):
    """Random add / step / abort sequences never double-allocate, leak, or deadlock."""

    @initialize(num_blocks=st.integers(4, 40), block_size=st.sampled_from([1, 4, 16]),
                 seqs=st.integers(1, 6), batched=st.integers(8, 64), chunked=st.booleans())
    def setup(self, num_blocks: int, block_size: int, seqs: int, batched: int,
              chunked: bool) -> None:
        self.capacity = num_blocks * block_size
        self.max_len = min(self.capacity, batched) if not chunked else self.capacity
        self.s = make_scheduler(num_blocks, block_size=block_size, seqs=seqs, batched=batched,
                                chunked=chunked)
        self.reqs: list[SimRequest] = []

    @rule(prompt=st.integers(1, 200), out=st.integers(1, 40))
    def add(self, prompt: int, out: int) -> None:
        # the API rejects anything over max_model_len, and start-up validation guarantees
        # the KV pool holds one max-length sequence; mirror both here
        prompt = min(prompt, self.max_len - 1) if self.max_len > 1 else 1
        target = max(1, min(out, self.max_len - prompt))
        if prompt < 1 or prompt + target > self.max_len:
            return
        r = SimRequest(str(len(self.reqs)), prompt, target)
        self.s.add(r)
        self.reqs.append(r)

    @rule()
    def step(self) -> None:
        self.s.complete(self.s.schedule())

    @precondition(lambda self: bool(self.reqs))
    @rule(i=st.integers(0, 1000))
    def abort(self, i: int) -> None:
        self.s.abort(self.reqs[i % len(self.reqs)])

    @invariant()
    def blocks_consistent(self) -> None:
        s = self.s
        held = [b for r in (*s.running, *s.waiting) for b in r.blocks]
        assert len(held) == len(set(held)), "a block is owned twice"
        assert s.allocator.num_used == len(held), "a block leaked"
        assert len(s.running) <= s.max_num_seqs
        for r in s.running:
            assert r.state == RUNNING
            assert len(r.blocks) >= blocks_for(r.num_computed, s.block_size)
        for r in self.reqs:
            if r.state in ("finished", "aborted"):
                assert r.blocks == []

    def teardown(self) -> None:
        if hasattr(self, "s"):
            run_to_completion(self.s)
            assert self.s.allocator.num_used == 0
            for r in self.reqs:
                assert r.state in ("finished", "aborted")
                if r.state == "finished":
                    assert r.num_output == r.target_tokens


TestSchedulerMachine = SchedulerMachine.TestCase
TestSchedulerMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)

# ---------------------------------------------------------------- timing


def test_timing_grows_with_batch_and_prompt_and_scales_with_speed() -> None:
    t = TimingModel()
    one = t.step_seconds(0, 1, 100)
    many = t.step_seconds(0, 32, 3200)
    assert 0.015 < one < 0.05  # a small GPU model: ~20-50 ms per decode step
    assert many > one
    assert t.step_seconds(2000, 0, 0) > t.step_seconds(100, 0, 0)
    assert TimingModel(speed=2.0).step_seconds(0, 32, 3200) == pytest.approx(many / 2)
    assert TimingModel(zero_latency=True).step_seconds(2000, 32, 3200) == 0.0
    assert t.step_seconds(0, 0, 0) == 0.0


@given(batch=st.integers(1, 256), extra=st.integers(1, 64))
def test_timing_monotonic_in_batch(batch: int, extra: int) -> None:
    t = TimingModel()
    assert t.step_seconds(0, batch + extra, 0) > t.step_seconds(0, batch, 0)


# ---------------------------------------------------------------- budget and validation


def test_budget_split_adds_up() -> None:
    cfg = SimConfig()
    b = MemoryBudget.from_config(cfg)
    assert b.weights_bytes + b.kv_pool_bytes + b.cuda_context_bytes + b.headroom_bytes == (
        b.total_bytes
    )
    assert b.num_blocks * cfg.block_size * cfg.kv_bytes_per_token <= b.kv_pool_bytes


def test_max_model_len_above_model_max_fails_with_vllm_message() -> None:
    with pytest.raises(StartupError, match=r"User-specified max_model_len \(16384\) is greater"):
        validate(SimConfig(max_model_len=16384, model_max_len=8192))
    with pytest.raises(StartupError, match=r"User-specified context_length \(16384\)"):
        validate(SimConfig(personality="sglang", max_model_len=16384))


def test_too_little_kv_for_one_sequence_fails_with_vllm_message() -> None:
    cfg = SimConfig(gpu_memory_utilization=0.72, max_model_len=4096)
    with pytest.raises(StartupError, match=r"To serve at least one request with the models's "
                                           r"max seq len \(4096\)"):
        validate_kv_cache(cfg, MemoryBudget.from_config(cfg))
    cfg = SimConfig(gpu_memory_utilization=0.5)
    with pytest.raises(StartupError, match="No available memory for the cache blocks"):
        validate_kv_cache(cfg, MemoryBudget.from_config(cfg))


def test_no_chunked_prefill_needs_batched_tokens_over_max_len() -> None:
    with pytest.raises(StartupError, match="max_num_batched_tokens"):
        validate(SimConfig(enable_chunked_prefill=False, max_num_batched_tokens=1024))
    validate(SimConfig(enable_chunked_prefill=False))  # default grows to max_model_len


def _sim_configs() -> dict[str, SimConfig]:
    inv = load_inventory(INVENTORY)
    out = {}
    for name, sc in inv.serving_configs.items():
        if name.startswith("sim-"):
            assert sc.command[:3] == ["python3", "-m", "testbed.simnode"]
            assert "--admin" in sc.command
            assert "--truth-file" in sc.command
            assert sc.restart == "on-failure"
            assert sc.env.get("PYTHONPATH") == "/opt/faultkit"
            out[name] = parse_args(sc.command[3:])
    return out


def _max_step_tokens(cfg: SimConfig, prompt: int) -> int:
    return min(prompt, cfg.effective_max_num_batched_tokens) if cfg.enable_chunked_prefill \
        else prompt


def test_testbed_serving_configs_behave_as_named() -> None:
    cfgs = _sim_configs()
    assert {"sim-vllm-good", "sim-vllm-good-util85", "sim-vllm-bad-oom",
            "sim-vllm-bad-maxlen", "sim-vllm-small-ctx", "sim-vllm-low-peak",
            "sim-sglang-good"} <= set(cfgs)
    for name, cfg in cfgs.items():
        assert cfg.load_seconds <= 3, name
        budget = MemoryBudget.from_config(cfg)
        fits = budget.headroom_bytes // cfg.activation_bytes_per_token
        if "-good" in name:
            validate(cfg)
            validate_kv_cache(cfg, budget)
            assert _max_step_tokens(cfg, 3000) + cfg.max_num_seqs <= fits, name
        elif name == "sim-vllm-bad-oom":
            validate(cfg)
            validate_kv_cache(cfg, budget)
            assert _max_step_tokens(cfg, 2000) > fits  # ~2,000-token prompt → OOM
            assert _max_step_tokens(cfg, 500) + cfg.max_num_seqs <= fits  # short ones are fine
        elif name == "sim-vllm-bad-maxlen":
            with pytest.raises(StartupError):
                validate(cfg)
        elif name == "sim-vllm-bad-kvcache":
            validate(cfg)
            with pytest.raises(StartupError):
                validate_kv_cache(cfg, budget)
        elif name == "sim-vllm-small-ctx":  # starts and serves, half sim-vllm-good's context
            validate(cfg)
            validate_kv_cache(cfg, budget)
            assert cfg.effective_max_model_len == 2048
            assert cfgs["sim-vllm-good"].effective_max_model_len == 4096
        elif name == "sim-vllm-low-peak":  # starts and serves, an eighth of the batch
            validate(cfg)
            validate_kv_cache(cfg, budget)
            assert cfg.max_num_seqs * 8 == cfgs["sim-vllm-good"].max_num_seqs


# ---------------------------------------------------------------- text


def test_token_counting_rule_and_deterministic_text() -> None:
    assert textgen.count_text_tokens("hello world") == 2
    assert textgen.count_text_tokens("word " * 3000) == 3000
    assert textgen.count_prompt_tokens([1, 2, 3]) == 3
    assert textgen.count_chat_tokens([{"role": "user", "content": "hi there"}]) == 3 + 4 + 2
    with pytest.raises(ValueError, match="messages"):
        textgen.count_chat_tokens([])
    seed = textgen.request_seed("abc", 0)
    assert textgen.text_of(seed, 10) == textgen.text_of(seed, 10)
    assert textgen.text_of(seed, 10) != textgen.text_of(textgen.request_seed("abd", 0), 10)
