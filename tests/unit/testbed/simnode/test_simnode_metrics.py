"""/metrics of the simulated node: names, types, labels and buckets of the real engines."""

from __future__ import annotations

import math
import re
from pathlib import Path

import httpx
import pytest

from testbed.simnode import buckets as B
from testbed.simnode.promtext import Registry, fmt_float
from tests.fixtures import engine_facts as facts
from tests.unit.simnode_helpers import running_node

VLLM_REQUIRED = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:num_preemptions_total": "counter",
    "vllm:request_success_total": "counter",
    "vllm:prompt_tokens_total": "counter",
    "vllm:generation_tokens_total": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "http_requests_total": "counter",
    "http_request_duration_seconds": "histogram",
}
SGLANG_REQUIRED = {
    "sglang:num_running_reqs": "gauge",
    "sglang:num_queue_reqs": "gauge",
    "sglang:token_usage": "gauge",
    "sglang:num_retracted_requests_total": "counter",
    "sglang:prompt_tokens_total": "counter",
    "sglang:generation_tokens_total": "counter",
    "sglang:time_to_first_token_seconds": "histogram",
    "sglang:inter_token_latency_seconds": "histogram",
    "sglang:e2e_request_latency_seconds": "histogram",
    "sglang:queue_time_seconds": "histogram",
}
COMMON_REQUIRED = {
    "DCGM_FI_DEV_FB_USED": "gauge",
    "DCGM_FI_DEV_FB_FREE": "gauge",
    "process_start_time_seconds": "gauge",
}


def parse_exposition(text: str) -> tuple[dict[str, str], dict[str, list[float]], list[str]]:
    """(family → type, histogram → le bounds of its first series, sample lines)."""
    types: dict[str, str] = {}
    les: dict[str, list[float]] = {}
    samples: list[str] = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            samples.append(line)
            m = re.match(r'^(\S+)_bucket\{(.*)le="([^"]+)"\} ', line)
            if m:
                bounds = les.setdefault(m.group(1), [])
                if m.group(3) == "+Inf":
                    bounds.append(math.inf)
                elif not bounds or bounds[-1] != math.inf:
                    bounds.append(float(m.group(3)))
    return types, les, samples


@pytest.mark.parametrize(("metric", "ours"), [
    ("vllm:time_to_first_token_seconds", B.VLLM_TTFT),
    ("vllm:inter_token_latency_seconds", B.VLLM_ITL),
    ("vllm:e2e_request_latency_seconds", B.VLLM_REQUEST_LATENCY),
    ("sglang:time_to_first_token_seconds", B.SGLANG_TTFT),
    ("sglang:inter_token_latency_seconds", B.SGLANG_ITL),
])
def test_bucket_lists_match_the_engines(metric: str, ours: tuple[float, ...]) -> None:
    assert [float(b) for b in ours] == [float(b) for b in facts.BUCKETS[metric]]


@pytest.mark.parametrize(("metric", "ours"), [
    ("vllm:iteration_tokens_total", B.VLLM_ITERATION_TOKENS),
    ("sglang:e2e_request_latency_seconds", B.SGLANG_E2E),
    ("sglang:queue_time_seconds", B.SGLANG_QUEUE_TIME),
])
def test_bucket_ranges_match_the_engines(metric: str, ours: tuple[float, ...]) -> None:
    first, last, count = facts.BUCKET_RANGES[metric]
    assert (float(ours[0]), float(ours[-1])) == (first, last)
    if count is not None:
        assert len(ours) == count
    assert list(ours) == sorted(ours), "bucket bounds must increase"


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_scrape_has_every_metric_with_type_labels_and_buckets(
        tmp_path: Path, personality: str) -> None:
    required = {**(VLLM_REQUIRED if personality == "vllm" else SGLANG_REQUIRED),
                **COMMON_REQUIRED}
    async with running_node(tmp_path, personality=personality, speed=50.0) as n, \
            httpx.AsyncClient(base_url=n.url) as c:
        r = await c.post("/v1/completions", json={"prompt": "hello there", "max_tokens": 4,
                                                  "ignore_eos": True})
        assert r.status_code == 200
        resp = await c.get("/metrics")
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    types, les, samples = parse_exposition(resp.text)
    for name, kind in required.items():
        assert types.get(name) == kind, f"{name}: TYPE {types.get(name)} != {kind}"
        assert any(s.startswith(name) for s in samples), f"{name} has no sample"
    expected_buckets = {
        "vllm:time_to_first_token_seconds": B.VLLM_TTFT,
        "vllm:inter_token_latency_seconds": B.VLLM_ITL,
        "vllm:e2e_request_latency_seconds": B.VLLM_REQUEST_LATENCY,
        "sglang:time_to_first_token_seconds": B.SGLANG_TTFT,
        "sglang:inter_token_latency_seconds": B.SGLANG_ITL,
        "sglang:e2e_request_latency_seconds": B.SGLANG_E2E,
    }
    for name, bounds in expected_buckets.items():
        if name in required:
            assert les[name] == [*map(float, bounds), math.inf], name
    label = 'model_name="sim-model",engine="0"' if personality == "vllm" \
        else 'model_name="sim-model"'
    prefix = "vllm:generation_tokens_total" if personality == "vllm" \
        else "sglang:generation_tokens_total"
    gen = next(s for s in samples if s.startswith(prefix + "{"))
    assert label in gen
    assert float(gen.split()[-1]) == 4.0
    if personality == "vllm":
        assert 'vllm:request_success_total{model_name="sim-model",engine="0",' \
            'finished_reason="length"} 1.0' in samples
        assert 'http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 1.0' \
            in samples
        ttft_count = next(s for s in samples
                          if s.startswith("vllm:time_to_first_token_seconds_count"))
        assert ttft_count.endswith(" 1.0")
    used = next(s for s in samples if s.startswith("DCGM_FI_DEV_FB_USED"))
    free = next(s for s in samples if s.startswith("DCGM_FI_DEV_FB_FREE"))
    assert float(used.split()[-1]) + float(free.split()[-1]) == pytest.approx(24 * 1024)


def test_promtext_histogram_is_cumulative_and_formats_like_prometheus_client() -> None:
    reg = Registry()
    h = reg.histogram("x_seconds", "doc", ("a",), (0.1, 1.0))
    h.observe(("q",), 0.05)
    h.observe(("q",), 0.1)  # le is inclusive
    h.observe(("q",), 5.0)
    c = reg.counter("y_total", "doc")
    c.inc((), 2)
    text = reg.render()
    assert 'x_seconds_bucket{a="q",le="0.1"} 2.0' in text
    assert 'x_seconds_bucket{a="q",le="1.0"} 2.0' in text
    assert 'x_seconds_bucket{a="q",le="+Inf"} 3.0' in text
    assert 'x_seconds_count{a="q"} 3.0' in text
    assert 'x_seconds_sum{a="q"} 5.15' in text
    assert "# TYPE y_total counter\ny_total 2.0\n" in text
    assert fmt_float(10) == "10.0"
    assert fmt_float(math.inf) == "+Inf"
    with pytest.raises(ValueError, match="_total"):
        reg.counter("bad", "doc")
