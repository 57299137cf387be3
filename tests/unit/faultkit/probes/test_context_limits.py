"""The context-limit probe (faultkit.probes.limits, faultkit.probes.context): reading the limit from
each engine's own answer, fitting prompt tokens, planning the steps, judging the answers —
and the whole probe over real HTTP against an in-process simulated node, whose truth file
(the simulator's own account, not the probe's) says what it was sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from faultkit.inventory import Node
from faultkit.model.records import RequestRecord
from faultkit.probes.context import ProbeNotPossible, judge_step, prepare_probe, run_probe
from faultkit.probes.limits import (
    ContextLimit,
    ContextLimitUnknown,
    ProbeStep,
    PromptFit,
    fit_prompt_tokens,
    over_margin,
    plan_steps,
    read_context_limit,
    token_counter,
)
from tests.unit.simnode_helpers import events_named, running_node


def node(engine: str = "vllm", base_url: str = "http://127.0.0.1:9", **kw: Any) -> Node:
    extra = {"personality": "vllm"} if engine == "sim" else {}
    return Node(name="n1", engine=engine, base_url=base_url, model=kw.pop("model", "m"),
                **extra, **kw)


def serving(routes: dict[str, Any]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        body = routes.get(request.url.path)
        if body is None:
            return httpx.Response(404, json={"error": "not found"})
        return httpx.Response(200, content=json.dumps(body))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


# ---------------------------------------------------------------- reading the limit

async def test_vllm_limit_is_the_served_models_max_model_len() -> None:
    cards = {"data": [{"id": "other", "max_model_len": 99}, {"id": "m", "max_model_len": 1024}]}
    async with serving({"/v1/models": cards}) as client:
        limit = await read_context_limit(node("vllm"), client)
    assert limit == ContextLimit(1024, "/v1/models max_model_len", None)


async def test_llamacpp_limit_is_one_slots_context_and_its_slots() -> None:
    props = {"default_generation_settings": {"n_ctx": 256}, "total_slots": 2}
    async with serving({"/props": props}) as client:
        limit = await read_context_limit(node("llamacpp"), client)
    assert (limit.tokens, limit.slots) == (256, 2)
    assert "one slot" in limit.source


async def test_the_inventory_overrides_the_engine_without_asking_it() -> None:
    async with serving({}) as client:  # every route 404s: it must not be asked
        limit = await read_context_limit(node("vllm", context_limit=2048, max_concurrency=4),
                                         client)
    assert limit == ContextLimit(2048, "inventory context_limit", 4)


@pytest.mark.parametrize(("engine", "routes"), [
    ("vllm", {"/v1/models": {"data": [{"id": "m"}]}}),            # a card without the field
    ("vllm", {}),                                                 # 404
    ("llamacpp", {"/props": {"default_generation_settings": {}}}),
    ("tgi", {}),                                                  # an engine it cannot read
])
async def test_an_unknown_limit_names_the_inventory_field(engine: str, routes: dict[str, Any]
                                                           ) -> None:
    async with serving(routes) as client:
        with pytest.raises(ContextLimitUnknown, match="set context_limit"):
            await read_context_limit(node(engine), client)


# ---------------------------------------------------------------- fit and plan

def test_the_fit_recovers_a_tokenizers_line_and_its_spread() -> None:
    fit = fit_prompt_tokens([(8, 27), (8, 29), (128, 267), (128, 269)])
    assert fit.per_word == pytest.approx(2.0)
    assert fit.overhead == pytest.approx(12.0)
    assert fit.spread == pytest.approx(1.0)


@pytest.mark.parametrize("samples", [[(8, 10), (8, 11)], [(8, 30), (64, 20)]])
def test_a_fit_needs_two_lengths_and_growing_counts(samples: list[tuple[int, int]]) -> None:
    with pytest.raises(ValueError, match=r"two different prompt lengths|do not grow"):
        fit_prompt_tokens(samples)


def test_the_plan_fills_each_fraction_and_goes_just_over() -> None:
    limit, fit = ContextLimit(1024, "x"), PromptFit(per_word=1.0, overhead=10.0, spread=0.0)
    steps = plan_steps(limit, fit, output_tokens=8, concurrency=3)
    assert [s.name for s in steps] == ["50%", "90%", "100%", "over"]
    within, over = steps[:3], steps[3]
    # of 1024 - 8 output: each fraction less the 1 % floor of the margin (MARGIN_FLOOR),
    # which even an exact calibration gets — its slope is carried 8x beyond the prompts
    assert [s.planned_tokens for s in within] == [502, 904, 1005]
    assert all(s.requests == 3 and s.within for s in within)
    assert not over.within and over.requests == 1
    assert over.planned_tokens >= 1024 + over_margin(1024)


def test_the_plan_keeps_the_fits_spread_on_the_safe_side() -> None:
    limit, fit = ContextLimit(256, "x"), PromptFit(per_word=1.5, overhead=20.0, spread=2.4)
    full, over = plan_steps(limit, fit, output_tokens=8, concurrency=2)[2:]
    assert fit.tokens_for(full.words) + fit.spread <= 256 - 8
    assert fit.tokens_for(over.words) - fit.spread > 256


def test_the_labs_sglang_calibration_plans_every_prompt_inside_the_limit() -> None:
    """The lab's sim-sglang (no tokenizer endpoint; the simulator counts a word over 8
    letters as 2 tokens): the probe's own seeds gave a fit with a spread of 1 token, and
    with the spread alone its 100 % step held a 4,090-token prompt for a room of 4,088.
    Every prompt the plan makes must fit, counted by the simulator's rule."""
    from faultkit.load.prompts import synthetic_prompt
    from faultkit.probes.context import _CALIBRATION_REPEATS
    from testbed.simnode.textgen import count_chat_tokens

    def tokens(words: int, seed: int, index: int) -> int:
        prompt = synthetic_prompt(words, seed=seed, index=index)
        return count_chat_tokens([{"role": "user", "content": prompt}])

    limit = ContextLimit(4096, "x")
    samples = [(w, tokens(w, 900_001 + i, k)) for i, w in enumerate((8, 4096 // 8))
               for k in range(_CALIBRATION_REPEATS)]
    steps = plan_steps(limit, fit_prompt_tokens(samples), output_tokens=8, concurrency=2)
    for step in steps[:3]:
        counted = [tokens(step.words, step.seed, k) for k in range(step.requests)]
        assert max(counted) <= 4096 - 8, (step.name, counted)
        assert min(counted) >= (4096 - 8) * step.fraction * 0.97, (step.name, counted)
    assert tokens(steps[3].words, steps[3].seed, 0) > 4096


def test_an_output_that_fills_the_context_is_refused() -> None:
    with pytest.raises(ValueError, match="no room"):
        plan_steps(ContextLimit(16, "x"), PromptFit(1.0, 0.0, 0.0), output_tokens=15,
                   concurrency=1)


# ---------------------------------------------------------------- judging

def record(status: str = "ok", http: int | None = 200, error_class: str | None = None,
           body: bool = False) -> RequestRecord:
    return RequestRecord(id="r", node="n1", kind="chat", t_invoke=0.0, status=status,  # type: ignore[arg-type]
                         t_end=1.0, http_status=http, error_class=error_class,
                         error_body=body, prompt_tokens=100 if status == "ok" else None)


WITHIN = ProbeStep("100%", 1.0, 100, 1016, 2, within=True)
OVER = ProbeStep("over", 1.01, 1040, 1040, 1, within=False)
LIMIT = ContextLimit(1024, "x")


def test_a_4xx_inside_the_limit_is_a_finding() -> None:
    result = judge_step(WITHIN, [record(), record("fail", 400, "http_4xx", True)], LIMIT)
    assert not result.passed and "inside the limit" in result.problems[0]
    assert result.outcomes == {"ok": 1, "http_4xx": 1}


@pytest.mark.parametrize(("answer", "passed"), [
    (record("fail", 400, "http_4xx", body=True), True),
    (record("fail", 400, "http_4xx", body=False), False),   # no OpenAI-style body
    (record("fail", 500, "http_5xx", body=True), False),
    (record("fail", 503, "http_5xx", body=True), False),    # 503 is not "too long"
    (record(), False),                                      # served past its limit
    (record("fail", None, "reset"), False),
])
def test_the_prompt_over_the_limit_needs_a_clean_4xx(answer: RequestRecord, passed: bool) -> None:
    assert judge_step(OVER, [answer], LIMIT).passed is passed


def test_a_step_missing_a_request_is_a_finding() -> None:
    assert not judge_step(WITHIN, [record()], LIMIT).passed


# ---------------------------------------------------------------- the probe on a simulated node

async def test_the_probe_on_a_healthy_simulated_node(tmp_path: Path) -> None:
    async with running_node(tmp_path, max_model_len=2048, zero_latency=True) as sim:
        target = node("sim", base_url=sim.url, model="sim-model")
        plan = await prepare_probe(target)
        result = await run_probe(target, plan)
        truth = sim.truth_events()
    assert (plan.limit.tokens, plan.concurrency) == (2048, 2)
    assert result.problems == [], result.problems
    # the simulator's own account: what it accepted, and what it refused as over its context
    accepted = [e["prompt_tokens"] for e in events_named(truth, "request_accepted")]
    longest = max(accepted)
    assert 0.97 * (2048 - 8) <= longest <= 2048 - 8, accepted
    assert sum(1 for t in accepted if t > 0.97 * (2048 - 8)) == 2  # the 100 % step, both
    data = result.to_json()
    assert [s["name"] for s in data["steps"]] == ["50%", "90%", "100%", "over"]
    assert data["steps"][3]["http_statuses"] == {"400": 1}


async def test_the_probe_finds_the_oom_cliff_of_a_config_without_chunked_prefill(
    tmp_path: Path,
) -> None:
    """The testbed's KNOWN BAD sim-vllm-bad-oom: utilization 0.99, no chunked prefill — a
    prompt over ~1,500 tokens is prefilled in one step that does not fit (the engine dies)."""
    async with running_node(tmp_path, max_model_len=4096, gpu_memory_utilization=0.99,
                            enable_chunked_prefill=False, zero_latency=True) as sim:
        target = node("sim", base_url=sim.url, model="sim-model")
        result = await run_probe(target, await prepare_probe(target))
        ooms = events_named(sim.truth_events(), "oom")
    assert ooms, "the simulator's engine did not run out of memory"
    assert ooms[0]["step_tokens"] > 1500, ooms[0]
    problems = result.problems
    assert any("50% step" in p and "inside the limit" in p for p in problems), problems


async def test_a_node_that_reports_no_usage_cannot_be_probed() -> None:
    async with serving({"/v1/models": {"data": [{"id": "m", "max_model_len": 512}]}}) as client:
        assert (await read_context_limit(node(), client)).tokens == 512
    # nothing listens on port 9: the calibration prompts get no answer
    with pytest.raises(ProbeNotPossible, match="calibration prompt"):
        await prepare_probe(node(context_limit=512))


# ------------------------------------------------ exact words by the node's tokenizer

async def uneven_count(text: str) -> int:
    """A tokenizer whose words cost 1 to 3 tokens (as the lab's tiny models' do), + template."""
    return 10 + sum(len(word) % 3 + 1 for word in text.split())


@pytest.mark.parametrize("within", [True, False])
async def test_exact_words_sit_on_the_boundary_for_every_prompt_of_the_step(within: bool
                                                                           ) -> None:
    from faultkit.load.prompts import synthetic_prompt
    from faultkit.probes.context import exact_step

    fit = PromptFit(per_word=2.0, overhead=10.0, spread=2.0, longest=64)
    target = 1000
    plan = ProbeStep("100%" if within else "over", 1.0, fit.words_for(target) - 40, 0,
                     3 if within else 1, within=within, seed=7)
    step = await exact_step(plan, uneven_count, fit, target)

    async def counts(words: int) -> list[int]:
        return [await uneven_count(synthetic_prompt(words, seed=7, index=k))
                for k in range(plan.requests)]

    assert step.exact
    if within:
        assert max(await counts(step.words)) == step.planned_tokens <= target
        assert max(await counts(step.words + 1)) > target  # one word more: one is over
    else:
        assert min(await counts(step.words)) == step.planned_tokens >= target
        assert min(await counts(step.words - 1)) < target


async def test_a_simulated_vllm_node_counts_its_tokens_as_its_chat_completions_do(
    tmp_path: Path,
) -> None:
    async with running_node(tmp_path, zero_latency=True) as sim, httpx.AsyncClient() as client:
        counter = await token_counter(node("sim", base_url=sim.url, model="sim-model"), client)
        assert counter is not None
        text = "one two three four"
        r = await client.post(f"{sim.url}/v1/chat/completions", json={
            "model": "sim-model", "max_tokens": 1,
            "messages": [{"role": "user", "content": text}]})
        assert await counter(text) == r.json()["usage"]["prompt_tokens"]
    async with running_node(tmp_path, personality="sglang", zero_latency=True) as sim, \
            httpx.AsyncClient() as client:  # SGLang: no /tokenize the probe knows
        sglang = node("sim", base_url=sim.url, model="sim-model").model_copy(
            update={"personality": "sglang"})
        assert await token_counter(sglang, client) is None


# ------------------------------------------------- preemptions while the probe runs


class FakeProm:
    """``Prometheus.query_range`` answering one series, or raising like the wrapper does."""

    def __init__(self, values: list[tuple[float, float]] | None = None,
                 error: Exception | None = None) -> None:
        self.values, self.error = values or [], error
        self.queries: list[str] = []

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[Any]:
        from slo.prom import Series

        self.queries.append(promql)
        if self.error is not None:
            raise self.error
        return [Series({}, self.values)] if self.values else []


def count_preemptions(prom: FakeProm, engine: str = "vllm", t_from: float = 0.0,
                      t_to: float = 1.0) -> tuple[float | None, str]:
    from slo.prom import Prometheus
    from slo.soak import preemptions_during

    return preemptions_during(node(engine, prometheus={"job": "n1"}), cast(Prometheus, prom),
                              t_from, t_to)


def test_preemptions_are_counted_from_the_engines_counter_in_the_window() -> None:
    # a restart in the window: the counter started again from 0 and counted 2 more
    prom = FakeProm([(99.0, 7.0), (100.0, 7.0), (101.0, 9.0), (102.0, 1.0), (103.0, 2.0),
                     (120.0, 50.0)])
    assert count_preemptions(prom, t_from=100.0, t_to=110.0) == (4.0, "4 in the window")
    assert prom.queries == ['sum(vllm:num_preemptions_total{job="n1"})']


def test_no_counter_or_no_answer_leaves_the_preemptions_uncounted() -> None:
    from slo.errors import PrometheusError

    assert count_preemptions(FakeProm(), "llamacpp")[0] is None
    count, why = count_preemptions(FakeProm(error=PrometheusError("http://127.0.0.1:1", "down")))
    assert count is None and why.startswith("Prometheus:")
    count, why = count_preemptions(FakeProm([(0.5, 1.0)]))
    assert count is None and "fewer than 2 samples" in why


@pytest.mark.parametrize(("counted", "passed", "inconclusive"),
                         [([(0.0, "0 in the window")], True, False),
                          ([(3.0, "3 in the window")], False, False),
                          ([(None, "Prometheus: down")], False, True),
                          ([], False, True)])
def test_the_limits_probe_fails_a_kv_cache_that_preempts(
    counted: list[tuple[float | None, str]], passed: bool, inconclusive: bool
) -> None:
    from scenarios.test_limits import no_preemption
    from slo.types import Measurement

    m = Measurement(node="n1", t_effect=100.0, t_revert=105.0, t_window_end=160.0)
    (result,) = no_preemption(counted, 4)(m).checks
    assert (result.passed, result.inconclusive) == (passed, inconclusive)
    if counted and counted[0][0] == 3.0:
        assert "holds fewer than 4 sequences of the context limit" in result.why


# ------------------------------------------------- the KV cache the engine states


VLLM_032_LABELS = {"block_size": "128", "num_gpu_blocks": "16", "kv_cache_size_tokens": "2048",
                   "kv_cache_max_concurrency": "2.0", "num_cpu_blocks": "None"}


@pytest.mark.parametrize(("labels", "tokens"), [
    (VLLM_032_LABELS, 2048),                                   # vLLM 0.32 (vllm-small-kv)
    ({"block_size": "16", "num_gpu_blocks": "2355"}, 37_680),  # older vLLM, the simulator
    ({"block_size": "16", "num_gpu_blocks": "None"}, None),
    ({"gpu_memory_utilization": "0.9"}, None),
])
def test_the_kv_cache_size_is_read_from_the_engines_labels(
    labels: dict[str, str], tokens: int | None
) -> None:
    from slo.kvcache import kv_tokens_from_labels

    found = kv_tokens_from_labels("vllm:cache_config_info", labels)
    assert (found.tokens if found else None) == tokens


class FakeInstantProm:
    def __init__(self, *label_sets: dict[str, str]) -> None:
        self.label_sets = label_sets

    def query(self, promql: str, t: float | None = None) -> list[Any]:
        from slo.prom import Sample

        assert promql == 'vllm:cache_config_info{job="n1"}'
        return [Sample(labels, 0.0, 1.0) for labels in self.label_sets]


def test_the_kv_capacity_comes_from_one_series_and_says_where_from() -> None:
    from slo.kvcache import kv_capacity
    from slo.prom import Prometheus

    scraped = node("vllm", prometheus={"job": "n1"})
    capacity, why = kv_capacity(scraped, cast(Prometheus, FakeInstantProm(VLLM_032_LABELS)))
    assert capacity is not None and capacity.sequences(1024) == 2
    assert why == "vllm:cache_config_info kv_cache_size_tokens=2048"
    assert kv_capacity(scraped, cast(Prometheus, FakeInstantProm()))[0] is None
    assert kv_capacity(node("sglang", prometheus={"job": "n1"}),
                       cast(Prometheus, FakeInstantProm()))[1] == (
        "engine sglang states no KV cache size")


@pytest.mark.parametrize(("tokens", "passed"), [(2048, False), (4096, True), (16_384, True)])
def test_the_limits_probe_fails_a_kv_cache_smaller_than_the_concurrency(
    tokens: int, passed: bool
) -> None:
    from scenarios.test_limits import kv_cache_holds
    from slo.kvcache import KvCapacity
    from slo.types import Measurement

    m = Measurement(node="n1", t_effect=100.0, t_revert=105.0, t_window_end=160.0)
    stated: list[tuple[KvCapacity | None, str]] = [(KvCapacity(tokens, "labels"), "labels")]
    (result,) = kv_cache_holds(stated, 1024, 4)(m).checks
    assert result.passed is passed and not result.inconclusive
    if not passed:
        assert result.why.startswith("the KV cache holds 2048 tokens, 2 sequence(s) of the "
                                     "1024-token limit, fewer than the node's 4")
    (unread,) = kv_cache_holds([], 1024, 4)(m).checks
    assert unread.inconclusive and not unread.passed


# ------------------------------------------------- the current config's larger limit

@pytest.mark.parametrize("current", [None, 512, 1024])
def test_no_current_step_unless_the_current_limit_is_larger(current: int | None) -> None:
    limit, fit = ContextLimit(1024, "x"), PromptFit(per_word=1.0, overhead=10.0, spread=0.0)
    plain = plan_steps(limit, fit, output_tokens=8, concurrency=3)
    assert plan_steps(limit, fit, output_tokens=8, concurrency=3, current_limit=current) == plain


def test_a_larger_current_limit_adds_one_prompt_sized_as_the_100_step_last() -> None:
    limit, fit = ContextLimit(1024, "x"), PromptFit(per_word=1.0, overhead=10.0, spread=0.0)
    plain = plan_steps(limit, fit, output_tokens=8, concurrency=3)
    steps = plan_steps(limit, fit, output_tokens=8, concurrency=3, current_limit=2048)
    assert steps[:-1] == plain  # the node's own steps, the over step included, unchanged
    (current,) = steps[len(plain):]
    assert (current.name, current.requests, current.within, current.current_limit) == (
        "current", 1, True, 2048)
    # the 100 % step of a node whose own limit were 2048: same words, planned tokens
    full = plan_steps(ContextLimit(2048, "x"), fit, output_tokens=8, concurrency=3)[2]
    assert (current.words, current.planned_tokens) == (full.words, full.planned_tokens)
    assert 1024 < current.planned_tokens <= 2048 - 8
    assert current.seed not in {s.seed for s in plain}  # a prompt of its own
    assert current.to_json()["current_limit"] == 2048


CURRENT = ProbeStep("current", 1.0, 2000, 2040, 1, within=True, current_limit=2048)


@pytest.mark.parametrize(("answer", "passed", "reads"), [
    (record(), True, None),
    (record("fail", 400, "http_4xx", body=True), False, "was rejected (HTTP 400"),
    (record("fail", 500, "http_5xx", body=True), False, "was HTTP 500"),
    (record("fail", None, "reset"), False, "was no answer, reset"),
])
def test_the_prompt_at_the_current_limit_must_be_answered_in_full(
    answer: RequestRecord, passed: bool, reads: str | None
) -> None:
    result = judge_step(CURRENT, [answer], LIMIT)
    assert result.passed is passed
    if reads is not None:
        (problem,) = result.problems
        assert problem.startswith("current step (~2040 prompt tokens, the current config's "
                                  "limit 2048, the node's 1024): a prompt the current "
                                  "config answers "), problem
        assert reads in problem, problem
        assert ("rejected" in problem) is (answer.http_status == 400), problem


async def test_a_simulated_node_rejects_the_current_configs_prompt_with_a_4xx(
    tmp_path: Path,
) -> None:
    """The testbed's KNOWN BAD sim-vllm-small-ctx (2,048 tokens where sim-vllm-good serves
    4,096): its own steps pass, and the prompt at 4,096 is refused with a clean 400 — read
    as a rejection by the candidate, not a crash."""
    async with running_node(tmp_path, max_model_len=2048, zero_latency=True) as sim:
        target = node("sim", base_url=sim.url, model="sim-model")
        plan = await prepare_probe(target, current_limit=4096)
        result = await run_probe(target, plan)
        truth = sim.truth_events()
    assert [s.name for s in plan.steps] == ["50%", "90%", "100%", "over", "current"]
    current = plan.steps[-1]
    assert current.exact and 0.97 * (4096 - 8) <= current.planned_tokens <= 4096 - 8
    own, last = result.steps[:-1], result.steps[-1]
    assert [p for s in own for p in s.problems] == []  # over judged against 2,048: passed
    assert (last.outcomes, last.statuses) == ({"http_4xx": 1}, {"400": 1})
    (problem,) = last.problems
    assert "was rejected (HTTP 400" in problem, problem
    # the simulator's own account: it refused the prompt as over its context, and lived
    refused = events_named(truth, "rejected", lambda e: e["id"].startswith("limits-current-"))
    assert [e["status"] for e in refused] == [400], refused
    assert "maximum model length of 2048" in refused[0]["reason"]
    assert result.to_json()["current_context_limit"] == 4096


async def test_a_current_limit_no_larger_than_the_nodes_sends_nothing_more(
    tmp_path: Path,
) -> None:
    async with running_node(tmp_path, max_model_len=2048, zero_latency=True) as sim:
        target = node("sim", base_url=sim.url, model="sim-model")
        plan = await prepare_probe(target, current_limit=2048)
    assert [s.name for s in plan.steps] == ["50%", "90%", "100%", "over"]
    assert plan.current_limit == 2048
