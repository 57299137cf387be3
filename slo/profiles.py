"""Engine metric profiles: the PromQL for each signal, per engine, in one place.

A metric an engine does not expose is ``None``; callers then fall back to client-side
measurement (llama.cpp has no latency histograms and no request counters). Names follow
ENGINES.md (vLLM v0.26, SGLang, llama.cpp ``--metrics``, TGI) and docs/gateway.md (the
LiteLLM gateway); a rename upstream is one edit here. Simulated nodes speak the metrics of
their ``personality`` (``Node.profile_engine``).

A node's series are picked by ``job="<node.prometheus.job>"`` plus the inventory's
``node.prometheus.selector`` (extra label matchers such as ``model_name="x"``).
"""

from __future__ import annotations

from dataclasses import dataclass

from faultkit.inventory import Node


@dataclass(frozen=True, slots=True)
class Metric:
    """A metric name plus the label matchers that narrow it (without the node selector)."""

    name: str
    matchers: str = ""


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """Which series carry which signal for one engine (``None`` = not exposed)."""

    engine: str
    running: Metric | None
    waiting: Metric | None
    kv_usage: Metric | None  # 0..1 gauge
    preemptions: Metric | None  # counter (vLLM preemptions, SGLang retractions)
    ttft_hist: str | None  # histogram base name (…_bucket / …_count)
    itl_hist: str | None
    e2e_hist: str | None
    requests_total: Metric | None  # counter of requests answered (any status)
    errors_total: Metric | None  # counter of requests answered with a server error
    prompt_tokens: Metric | None
    generation_tokens: Metric | None
    process_start: Metric | None  # gauge, epoch seconds of process start
    reset_counter: Metric | None  # a counter that always grows while alive (restart = reset)
    #: an info gauge whose labels size the KV cache (vLLM's ``cache_config_info``:
    #: ``kv_cache_size_tokens``, or ``num_gpu_blocks`` × ``block_size``)
    cache_config: Metric | None = None
    #: a gateway's attempts on each upstream, and the failed ones (counters with a label
    #: naming the upstream: ``upstream_label``); None for an engine
    upstream_attempts: Metric | None = None
    upstream_failures: Metric | None = None
    upstream_label: str = "model_id"


_HTTP = 'handler=~"/v1/(chat/)?completions"'
#: LiteLLM serves the OpenAI routes with and without the /v1 prefix.
_LITELLM_ROUTE = 'route=~"(/v1)?/(chat/)?completions"'

PROFILES: dict[str, EngineProfile] = {
    "vllm": EngineProfile(
        engine="vllm",
        running=Metric("vllm:num_requests_running"),
        waiting=Metric("vllm:num_requests_waiting"),
        kv_usage=Metric("vllm:kv_cache_usage_perc"),
        preemptions=Metric("vllm:num_preemptions_total"),
        ttft_hist="vllm:time_to_first_token_seconds",
        itl_hist="vllm:inter_token_latency_seconds",
        e2e_hist="vllm:e2e_request_latency_seconds",
        requests_total=Metric("http_requests_total", _HTTP),
        errors_total=Metric("http_requests_total", _HTTP + ',status=~"5.."'),
        prompt_tokens=Metric("vllm:prompt_tokens_total"),
        generation_tokens=Metric("vllm:generation_tokens_total"),
        process_start=Metric("process_start_time_seconds"),
        reset_counter=Metric("vllm:prompt_tokens_total"),
        cache_config=Metric("vllm:cache_config_info"),
    ),
    "sglang": EngineProfile(
        engine="sglang",
        running=Metric("sglang:num_running_reqs"),
        waiting=Metric("sglang:num_queue_reqs"),
        kv_usage=Metric("sglang:token_usage"),
        preemptions=Metric("sglang:num_retracted_requests_total"),
        ttft_hist="sglang:time_to_first_token_seconds",
        itl_hist="sglang:inter_token_latency_seconds",
        e2e_hist="sglang:e2e_request_latency_seconds",
        requests_total=Metric("sglang:num_requests_total"),
        errors_total=Metric("sglang:num_aborted_requests_total"),
        prompt_tokens=Metric("sglang:prompt_tokens_total"),
        generation_tokens=Metric("sglang:generation_tokens_total"),
        process_start=Metric("process_start_time_seconds"),
        reset_counter=Metric("sglang:num_requests_total"),
    ),
    "llamacpp": EngineProfile(
        engine="llamacpp",
        running=Metric("llamacpp:requests_processing"),
        waiting=Metric("llamacpp:requests_deferred"),
        kv_usage=None,  # current builds no longer emit kv_cache_usage_ratio
        preemptions=None,
        ttft_hist=None,  # no histograms at all: TTFT/ITL come from the client
        itl_hist=None,
        e2e_hist=None,
        requests_total=None,  # no request counter: availability falls back to `up`
        errors_total=None,
        prompt_tokens=Metric("llamacpp:prompt_tokens_total"),
        generation_tokens=Metric("llamacpp:tokens_predicted_total"),
        process_start=None,  # C++ server: no process_start_time_seconds
        reset_counter=Metric("llamacpp:n_decode_total"),
    ),
    "tgi": EngineProfile(
        engine="tgi",
        running=Metric("tgi_batch_current_size"),
        waiting=Metric("tgi_queue_size"),
        kv_usage=None,
        preemptions=None,
        ttft_hist=None,  # TGI has no TTFT histogram (queue + inference durations only)
        itl_hist="tgi_request_mean_time_per_token_duration",
        e2e_hist="tgi_request_duration",
        requests_total=Metric("tgi_request_count"),
        errors_total=Metric("tgi_request_failure"),
        prompt_tokens=None,
        generation_tokens=Metric("tgi_request_generated_tokens_sum"),
        process_start=None,
        reset_counter=Metric("tgi_request_count"),
    ),
    # LiteLLM's proxy (a gateway, kind: gateway), 1.108.7 with the `prometheus` callback:
    # names as scraped from its /metrics/ (docs/gateway.md). Series are per deployment
    # (`model_id` = the upstream node's name); the route matcher leaves out the proxy's own
    # health checks, which are counted too (route="None").
    "litellm": EngineProfile(
        engine="litellm",
        running=Metric("litellm_in_flight_requests"),  # HTTP requests on the worker, any route
        waiting=None,  # no queue gauge: the proxy queues nothing itself
        kv_usage=None,
        preemptions=None,
        # the upstream's TTFT as the gateway sees it (streams only), gateway overhead excluded
        ttft_hist="litellm_llm_api_time_to_first_token_metric",
        itl_hist=None,  # litellm_deployment_latency_per_output_token is E2E/tokens, not ITL
        e2e_hist="litellm_request_total_latency_metric",
        requests_total=Metric("litellm_proxy_total_requests_metric_total", _LITELLM_ROUTE),
        errors_total=Metric(
            "litellm_proxy_failed_requests_metric_total",
            _LITELLM_ROUTE + ',exception_status!~"4.."',
        ),
        prompt_tokens=Metric("litellm_input_tokens_metric_total"),
        generation_tokens=Metric("litellm_output_tokens_metric_total"),
        process_start=Metric("process_start_time_seconds"),
        reset_counter=Metric("litellm_proxy_total_requests_metric_total"),
        # every attempt the router made on a deployment (retries included), by model_id:
        # the upstream's side of a gateway run, which its users' answers cannot show
        upstream_attempts=Metric("litellm_deployment_total_requests_total"),
        upstream_failures=Metric("litellm_deployment_failure_responses_total"),
    ),
}


def profile_for(node: Node) -> EngineProfile:
    """The metric profile of the engine ``node`` exposes (a sim node: its personality)."""
    return PROFILES[node.profile_engine]


def node_selector(node: Node) -> str | None:
    """Label matchers selecting the node's series (``job="…",<selector>``), None if unscraped."""
    if node.prometheus is None:
        return None
    extra = node.prometheus.selector.strip().strip(",")
    return f'job="{node.prometheus.job}"' + (f",{extra}" if extra else "")


def le_matcher(le: float) -> str:
    """A ``le`` matcher that works on Prometheus 2 and 3 for bucket boundary ``le``.

    Prometheus 3 normalises ``le`` on ingestion (``le="1"`` is stored as ``"1.0"``),
    Prometheus 2 keeps what the exporter wrote (``"1"``, ``"1.0"`` or ``"2.50"``). A regex
    accepting the integer and any trailing-zero form covers both.
    """
    text = repr(float(le))  # "2.5", "1.0", "0.001"
    if text.endswith(".0"):
        pattern = text[:-2].replace(".", "\\\\.") + "(\\\\.0*)?"
    else:
        pattern = text.replace(".", "\\\\.") + "0*"
    return f'le=~"{pattern}"'


def _join(*parts: str) -> str:
    return ",".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class NodeQueries:
    """PromQL for one node's signals; methods return None where the engine lacks the metric."""

    node: Node
    profile: EngineProfile
    sel: str

    @classmethod
    def for_node(cls, node: Node) -> NodeQueries | None:
        sel = node_selector(node)
        return None if sel is None else cls(node, profile_for(node), sel)

    def series(self, metric: Metric | None, extra: str = "") -> str | None:
        if metric is None:
            return None
        return f"{metric.name}{{{_join(self.sel, metric.matchers, extra)}}}"

    def up(self) -> str:
        return f"up{{{self.sel}}}"

    def gauge(self, metric: Metric | None) -> str | None:
        s = self.series(metric)
        return None if s is None else f"sum({s})"

    def increase(self, metric: Metric | None, window: str) -> str | None:
        """Sum over the node's series of ``increase()`` (counter resets are handled by it)."""
        s = self.series(metric)
        return None if s is None else f"sum(increase({s}[{window}]))"

    def rate(self, metric: Metric | None, window: str) -> str | None:
        s = self.series(metric)
        return None if s is None else f"sum(rate({s}[{window}]))"

    def rate_by_upstream(self, metric: Metric | None, window: str) -> str | None:
        """Per-upstream ``rate()`` of a gateway counter (``by (upstream_label)``)."""
        s = self.series(metric)
        if s is None:
            return None
        return f"sum by ({self.profile.upstream_label}) (rate({s}[{window}]))"

    def bucket_ratio_bad(self, hist: str | None, le: float, window: str) -> str | None:
        """Fraction of observations *above* ``le`` (1 − good/total) over ``window``."""
        if hist is None:
            return None
        good = f"sum(rate({hist}_bucket{{{_join(self.sel, le_matcher(le))}}}[{window}]))"
        total = f"sum(rate({hist}_count{{{self.sel}}}[{window}]))"
        return f"(1 - ({good} / {total}))"

    def restarts(self, window: str) -> str:
        """How many times the process restarted in ``window`` (start-time changes or resets)."""
        if self.profile.process_start is not None:
            return f"sum(changes({self.series(self.profile.process_start)}[{window}]))"
        counter = self.series(self.profile.reset_counter)
        return f"sum(resets({counter}[{window}]))"

    def catalogue(self, window: str = "1m") -> dict[str, str]:
        """Every available signal's PromQL by name (what measurement captures for reports)."""
        p = self.profile
        items: dict[str, str | None] = {
            "up": self.up(),
            "running": self.gauge(p.running),
            "waiting": self.gauge(p.waiting),
            "kv_usage": self.gauge(p.kv_usage),
            "preemptions_rate": self.rate(p.preemptions, window),
            "requests_rate": self.rate(p.requests_total, window),
            "errors_rate": self.rate(p.errors_total, window),
            "generation_tokens_rate": self.rate(p.generation_tokens, window),
            "restarts": self.restarts(window),
            "upstream_attempts_rate": self.rate_by_upstream(p.upstream_attempts, window),
            "upstream_failures_rate": self.rate_by_upstream(p.upstream_failures, window),
        }
        return {k: v for k, v in items.items() if v is not None}
