"""The simulator's speculative decoding (``testbed.simnode.speculation``): acceptance from the
prompt, draft-and-verify per decode step, its cost, and the engines' spec-decode metrics —
read against the simulator's own truth file."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import httpx
import pytest

from faultkit.load.prompts import workload_prompt
from testbed.simnode.blocks import BlockAllocator
from testbed.simnode.config import SimConfig, parse_args
from testbed.simnode.scheduler import FINISHED, RUNNING, Scheduler, SimRequest
from testbed.simnode.speculation import Drafter, accepted_drafts, recurring_trigrams
from testbed.simnode.timing import TimingModel
from tests.unit.simnode_helpers import events_named, running_node

K = 4


def _metric(text: str, name: str, labels: str = "") -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_recurring_trigrams_counts_what_was_seen_before() -> None:
    assert recurring_trigrams("a b c a b c") == pytest.approx(1 / 4)  # abc bca cab *abc*
    assert recurring_trigrams("a b c a b c a b c") == pytest.approx(4 / 7)
    assert recurring_trigrams("a b") == 0.0
    assert recurring_trigrams("a b c d e f") == 0.0


@pytest.mark.parametrize("alpha", [0.05, 0.5, 0.9])
def test_accepted_drafts_follow_the_first_rejection_rule(alpha: float) -> None:
    rng = random.Random(7)
    draws = [accepted_drafts(rng, alpha, K) for _ in range(20_000)]
    assert min(draws) >= 0 and max(draws) <= K
    expected = sum(alpha ** i for i in range(1, K + 1))  # P(first i all accepted), summed
    assert statistics.fmean(draws) == pytest.approx(expected, abs=0.05)


def test_extractive_prompts_draft_near_the_ceiling_and_free_ones_near_the_floor() -> None:
    drafter = Drafter(K, floor=0.05, ceiling=0.9)
    extractive = drafter.acceptance_of(workload_prompt("extractive", 300, seed=0, index=3))
    free = drafter.acceptance_of(workload_prompt("free", 300, seed=0, index=3))
    assert extractive >= 0.85
    assert free <= 0.08
    with pytest.raises(ValueError, match="floor <= ceiling"):
        Drafter(K, floor=0.9, ceiling=0.1)


def test_extend_keeps_the_target_and_the_kv_cache() -> None:
    sched = Scheduler(BlockAllocator(3), block_size=4, max_num_seqs=4,
                      max_num_batched_tokens=64, chunked_prefill=True)
    req = SimRequest("r", prompt_tokens=4, target_tokens=6)
    sched.add(req)
    sched.complete(sched.schedule())  # prefill: the first token
    assert req.num_output == 1 and req.state == RUNNING
    assert sched.extend(req, 3) == 3  # 4 + 4 tokens known: two blocks
    assert (req.num_output, req.num_computed, len(req.blocks)) == (4, 7, 2)
    assert sched.extend(req, 5) == 2  # only two more wanted
    assert req.state == FINISHED and req.blocks == []


def test_extend_never_takes_more_kv_than_there_is() -> None:
    sched = Scheduler(BlockAllocator(2), block_size=4, max_num_seqs=4,
                      max_num_batched_tokens=64, chunked_prefill=True)
    req = SimRequest("r", prompt_tokens=3, target_tokens=50)
    sched.add(req)
    sched.complete(sched.schedule())  # 3 tokens computed in a block of 4
    assert sched.allocator.allocate(1) is not None  # someone else holds the last block
    assert sched.extend(req, 4) == 1  # only the free slot of its own block
    assert (req.num_output, req.num_computed, len(req.blocks)) == (2, 4, 1)


def test_each_decoding_sequence_pays_for_its_drafts() -> None:
    plain = TimingModel()
    spec = TimingModel(spec_tokens=K, spec_verify_s_per_token=0.0006,
                       spec_draft_s_per_seq=0.001)
    extra = spec.step_seconds(0, 3, 300) - plain.step_seconds(0, 3, 300)
    assert extra == pytest.approx(3 * (K * 0.0006 + 0.001))
    assert spec.step_seconds(100, 0, 0) == plain.step_seconds(100, 0, 0)  # prefill drafts nothing


def test_the_flags_set_speculation_and_refuse_nonsense() -> None:
    cfg = parse_args(["--num-speculative-tokens", "3", "--spec-acceptance-ceiling", "0.8"])
    assert (cfg.num_speculative_tokens, cfg.spec_acceptance_ceiling) == (3, 0.8)
    assert parse_args(["--speculative-num-draft-tokens", "2"]).num_speculative_tokens == 2
    assert SimConfig().num_speculative_tokens == 0
    with pytest.raises(SystemExit):
        parse_args(["--num-speculative-tokens", "-1"])


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_the_metrics_agree_with_the_truth_file(tmp_path: Path, personality: str) -> None:
    """Every token asked for is delivered; the engine's spec-decode metrics add up to what
    the truth file says each request drafted and kept; extractive requests keep far more."""
    async with running_node(tmp_path, personality=personality, speed=50.0,
                            num_speculative_tokens=K) as n, \
            httpx.AsyncClient(base_url=n.url, timeout=30) as c:
        for workload in ("extractive", "free"):
            for index in range(3):
                prompt = workload_prompt(workload, 200, seed=1, index=index)
                answer = await c.post("/v1/completions", json={
                    "prompt": prompt, "max_tokens": 120, "ignore_eos": True})
                assert answer.json()["usage"]["completion_tokens"] == 120
        metrics = (await c.get("/metrics")).text
    finished = events_named(n.truth_events(), "request_finished")
    assert len(finished) == 6
    drafted = sum(e["drafted_tokens"] for e in finished)
    accepted = sum(e["accepted_tokens"] for e in finished)
    by_acceptance = sorted(finished, key=lambda e: e["acceptance"])
    low = sum(e["accepted_tokens"] for e in by_acceptance[:3]) / sum(
        e["drafted_tokens"] for e in by_acceptance[:3])
    high = sum(e["accepted_tokens"] for e in by_acceptance[3:]) / sum(
        e["drafted_tokens"] for e in by_acceptance[3:])
    assert high > 0.6 > 0.15 > low
    if personality == "vllm":
        assert _metric(metrics, "vllm:spec_decode_num_draft_tokens_total") == drafted
        assert _metric(metrics, "vllm:spec_decode_num_accepted_tokens_total") == accepted
        assert _metric(metrics, "vllm:spec_decode_num_drafts_total") == drafted / K
        assert _metric(metrics, "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                       'position="0"') >= _metric(
            metrics, "vllm:spec_decode_num_accepted_tokens_per_pos_total", 'position="3"')
    else:
        rate = _metric(metrics, "sglang:spec_accept_rate")
        assert rate == pytest.approx(accepted / drafted)
        assert _metric(metrics, "sglang:spec_accept_length") == pytest.approx(
            1 + accepted / (drafted / K))


async def test_without_speculation_there_are_no_spec_families(tmp_path: Path) -> None:
    async with running_node(tmp_path) as n, httpx.AsyncClient(base_url=n.url) as c:
        assert "spec_decode" not in (await c.get("/metrics")).text
