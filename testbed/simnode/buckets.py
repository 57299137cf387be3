"""Histogram bucket boundaries of the real engines, in one place (seconds unless noted).

Sources (see ../shared/ENGINES.md §2.1, §2.2): vLLM ``vllm/v1/metrics/buckets.py``, SGLang
``python/sglang/srt/metrics/collector.py``. A unit test compares these lists with ENGINES.md,
so a change in an engine version is one edit here.
"""

from __future__ import annotations

# --- vLLM
VLLM_TTFT: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
VLLM_ITL: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)
#: e2e, queue, inference, prefill and decode time share this family; the smallest bucket is 0.3 s.
VLLM_REQUEST_LATENCY: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)
#: tokens per engine step
VLLM_ITERATION_TOKENS: tuple[float, ...] = (
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
)
VLLM_NUM_PREEMPTIONS: tuple[float, ...] = (1, 2, 3, 4, 5, 10, 20)
#: prometheus_fastapi_instrumentator's default for http_request_duration_seconds
HTTP_DURATION: tuple[float, ...] = (0.1, 0.5, 1.0)


def one_two_five(max_value: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 series capped at ``max_value`` (request token-count histograms)."""
    out: list[float] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exponent
            if v > max_value:
                return tuple(out)
            out.append(v)
        exponent += 1


# --- SGLang
SGLANG_TTFT: tuple[float, ...] = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
)
SGLANG_ITL: tuple[float, ...] = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
    0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8,
)
SGLANG_E2E: tuple[float, ...] = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200,
    1800, 2400,
)
SGLANG_QUEUE_TIME: tuple[float, ...] = (
    0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200,
    300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
)
