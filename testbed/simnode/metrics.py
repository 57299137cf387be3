"""The node's ``/metrics``: vLLM or SGLang metric families plus DCGM-style GPU memory gauges.

Names, types, labels and buckets follow ../shared/ENGINES.md §2.1 (vLLM: labels
``model_name`` and ``engine="0"``) and §2.2 (SGLang: ``model_name``; scheduler gauges also
``tp_rank``/``pp_rank``). Every node also exposes ``DCGM_FI_DEV_FB_USED`` /
``DCGM_FI_DEV_FB_FREE`` (MiB, like dcgm-exporter) and ``process_start_time_seconds``.
Latencies are observed in seconds from the engine's monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.simnode import buckets as B
from testbed.simnode.promtext import Registry

VLLM_FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


@dataclass(frozen=True)
class Snapshot:
    """Instantaneous engine state read at scrape time."""

    running: int
    waiting: int
    kv_usage: float  # 0–1
    kv_used_tokens: int
    kv_total_tokens: int
    fb_used_mib: float
    fb_free_mib: float
    gen_throughput: float  # tokens/s, recent


class EngineMetrics:
    """Counters and histograms the engine and HTTP layer feed; ``render`` writes the text."""

    def __init__(
        self,
        personality: str,
        model_name: str,
        *,
        max_model_len: int,
        block_size: int,
        num_blocks: int,
        gpu_memory_utilization: float,
        process_start_time: float,
        speculative: bool = False,
    ) -> None:
        self.personality = personality
        self.speculative = speculative
        #: drafting steps, drafted tokens and accepted tokens so far (SGLang's gauges)
        self.spec_totals = [0, 0, 0]
        r = self.registry = Registry()
        if personality == "vllm":
            names: tuple[str, ...] = ("model_name", "engine")
            self.lv: tuple[str, ...] = (model_name, "0")
            self._build_vllm(r, names, max_model_len, block_size, num_blocks,
                             gpu_memory_utilization)
        else:
            names = ("model_name",)
            self.lv = (model_name,)
            self._build_sglang(r, names)
        if speculative:
            self._build_speculative(r, names)
        gpu = ("gpu", "UUID", "device", "modelName", "Hostname")
        self.gpu_lv = ("0", "GPU-00000000-0000-0000-0000-5157e0000000", "nvidia0",
                       "Simulated GPU", "simnode")
        self.fb_used = r.gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", gpu)
        self.fb_free = r.gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", gpu)
        start = r.gauge("process_start_time_seconds",
                        "Start time of the process since unix epoch in seconds.")
        start.set((), process_start_time)

    # ------------------------------------------------------------------ families
    def _build_vllm(self, r: Registry, names: tuple[str, ...], max_model_len: int,
                    block_size: int, num_blocks: int, util: float) -> None:
        lv = self.lv
        self.running = r.gauge("vllm:num_requests_running",
                               "Number of requests in model execution batches.", names)
        self.waiting = r.gauge("vllm:num_requests_waiting", "Number of requests waiting.", names)
        self.kv_usage = r.gauge("vllm:kv_cache_usage_perc",
                                "KV-cache usage. 1 means 100 percent usage.", names)
        info = r.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                       ("block_size", "gpu_memory_utilization", "num_gpu_blocks", "engine"))
        info.set((str(block_size), str(util), str(num_blocks), "0"), 1.0)
        self.preemptions = r.counter("vllm:num_preemptions_total",
                                     "Cumulative number of preemption from the engine.", names)
        self.success = r.counter("vllm:request_success_total",
                                 "Count of successfully processed requests.",
                                 (*names, "finished_reason"))
        for reason in VLLM_FINISH_REASONS:
            self.success.inc((*lv, reason), 0.0)
        self.prompt_tokens = r.counter("vllm:prompt_tokens_total",
                                       "Number of prefill tokens processed.", names)
        self.gen_tokens = r.counter("vllm:generation_tokens_total",
                                    "Number of generation tokens processed.", names)
        self.preemptions.inc(lv, 0.0)
        self.prompt_tokens.inc(lv, 0.0)
        self.gen_tokens.inc(lv, 0.0)
        h = r.histogram
        self.iteration = h("vllm:iteration_tokens_total",
                           "Histogram of number of tokens per engine_step.", names,
                           B.VLLM_ITERATION_TOKENS)
        self.ttft = h("vllm:time_to_first_token_seconds",
                      "Histogram of time to first token in seconds.", names, B.VLLM_TTFT)
        self.itl = h("vllm:inter_token_latency_seconds",
                     "Histogram of inter-token latency in seconds.", names, B.VLLM_ITL)
        self.tpot = h("vllm:request_time_per_output_token_seconds",
                      "Histogram of time_per_output_token_seconds per request.", names,
                      B.VLLM_ITL)
        self.e2e = h("vllm:e2e_request_latency_seconds",
                     "Histogram of e2e request latency in seconds.", names,
                     B.VLLM_REQUEST_LATENCY)
        self.queue = h("vllm:request_queue_time_seconds",
                       "Histogram of time spent in WAITING phase for request.", names,
                       B.VLLM_REQUEST_LATENCY)
        self.inference = h("vllm:request_inference_time_seconds",
                           "Histogram of time spent in RUNNING phase for request.", names,
                           B.VLLM_REQUEST_LATENCY)
        self.prefill = h("vllm:request_prefill_time_seconds",
                         "Histogram of time spent in PREFILL phase for request.", names,
                         B.VLLM_REQUEST_LATENCY)
        self.decode = h("vllm:request_decode_time_seconds",
                        "Histogram of time spent in DECODE phase for request.", names,
                        B.VLLM_REQUEST_LATENCY)
        self.req_prompt = h("vllm:request_prompt_tokens",
                            "Number of prefill tokens processed.", names,
                            B.one_two_five(max_model_len))
        self.req_gen = h("vllm:request_generation_tokens",
                         "Number of generation tokens processed.", names,
                         B.one_two_five(max_model_len))
        self.req_preempt = h("vllm:request_num_preemptions",
                             "Number of preemptions per request.", names,
                             B.VLLM_NUM_PREEMPTIONS)
        for fam in (self.iteration, self.ttft, self.itl, self.tpot, self.e2e, self.queue,
                    self.inference, self.prefill, self.decode, self.req_prompt, self.req_gen,
                    self.req_preempt):
            fam.touch(lv)
        self.http_total = r.counter("http_requests_total", "Total number of requests by method, "
                                    "status and handler.", ("handler", "method", "status"))
        self.http_duration = h("http_request_duration_seconds", "Latency with only few buckets "
                               "by handler. Made to be only used if aggregation by handler is "
                               "important.", ("handler", "method"), B.HTTP_DURATION)

    def _build_sglang(self, r: Registry, names: tuple[str, ...]) -> None:
        lv = self.lv
        sched = (*names, "tp_rank", "pp_rank")
        self.slv = (*lv, "0", "0")
        g = r.gauge
        self.running = g("sglang:num_running_reqs", "The number of running requests.", sched)
        self.waiting = g("sglang:num_queue_reqs",
                         "The number of requests in the waiting queue.", sched)
        self.used_tokens = g("sglang:num_used_tokens", "The number of used tokens.", sched)
        self.kv_usage = g("sglang:token_usage", "The token usage.", sched)
        self.max_tokens = g("sglang:max_total_num_tokens",
                            "Maximum total number of tokens in the KV cache pool.", sched)
        self.gen_throughput = g("sglang:gen_throughput",
                                "The generation throughput (token/s).", sched)
        self.cache_hit = g("sglang:cache_hit_rate", "The prefix cache hit rate.", sched)
        self.retracted_now = g("sglang:num_retracted_reqs",
                               "The number of retracted requests.", sched)
        c = r.counter
        self.preemptions = c("sglang:num_retracted_requests_total",
                             "Number of retracted requests.", sched)
        self.prompt_tokens = c("sglang:prompt_tokens_total", "Number of prefill tokens processed.",
                               names)
        self.gen_tokens = c("sglang:generation_tokens_total",
                            "Number of generation tokens processed.", names)
        self.cached_tokens = c("sglang:cached_tokens_total",
                               "Number of cached prompt tokens.", names)
        self.num_requests = c("sglang:num_requests_total", "Number of requests processed.", names)
        self.aborted = c("sglang:num_aborted_requests_total", "Number of requests aborted.",
                         names)
        for fam in (self.prompt_tokens, self.gen_tokens, self.cached_tokens,
                    self.num_requests, self.aborted):
            fam.inc(lv, 0.0)
        self.preemptions.inc(self.slv, 0.0)
        h = r.histogram
        self.ttft = h("sglang:time_to_first_token_seconds",
                      "Histogram of time to first token in seconds.", names, B.SGLANG_TTFT)
        self.itl = h("sglang:inter_token_latency_seconds",
                     "Histogram of inter-token latency in seconds.", names, B.SGLANG_ITL)
        self.e2e = h("sglang:e2e_request_latency_seconds",
                     "Histogram of End-to-end request latency in seconds", names, B.SGLANG_E2E)
        self.queue = h("sglang:queue_time_seconds",
                       "Histogram of queueing time in seconds.", names, B.SGLANG_QUEUE_TIME)
        for hist in (self.ttft, self.itl, self.e2e, self.queue):
            hist.touch(lv)

    def _build_speculative(self, r: Registry, names: tuple[str, ...]) -> None:
        """The engine's speculative-decoding families, present only when it speculates:
        vLLM's counters (V1), SGLang's cumulative gauges."""
        if self.personality == "vllm":
            self.spec_drafts = r.counter("vllm:spec_decode_num_drafts_total",
                                         "Number of spec decoding drafts.", names)
            self.spec_draft_tokens = r.counter("vllm:spec_decode_num_draft_tokens_total",
                                               "Number of draft tokens.", names)
            self.spec_accepted = r.counter("vllm:spec_decode_num_accepted_tokens_total",
                                           "Number of accepted tokens.", names)
            self.spec_per_pos = r.counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                "Accepted tokens per draft position.", (*names, "position"))
            for fam in (self.spec_drafts, self.spec_draft_tokens, self.spec_accepted):
                fam.inc(self.lv, 0.0)
        else:
            sched = (*names, "tp_rank", "pp_rank")
            self.spec_accept_length = r.gauge("sglang:spec_accept_length",
                                              "The average acceptance length of speculative "
                                              "decoding.", sched)
            self.spec_accept_rate = r.gauge("sglang:spec_accept_rate",
                                            "The average acceptance rate of speculative "
                                            "decoding.", sched)

    # ------------------------------------------------------------------ events
    def on_drafts(self, k: int, accepted: int) -> None:
        """One sequence's drafting step: ``k`` tokens drafted, ``accepted`` of them kept."""
        totals = self.spec_totals
        totals[0] += 1
        totals[1] += k
        totals[2] += accepted
        if not self.speculative or self.personality != "vllm":
            return
        self.spec_drafts.inc(self.lv)
        self.spec_draft_tokens.inc(self.lv, k)
        self.spec_accepted.inc(self.lv, accepted)
        for position in range(accepted):
            self.spec_per_pos.inc((*self.lv, str(position)))

    def _preempt_lv(self) -> tuple[str, ...]:
        return self.lv if self.personality == "vllm" else self.slv

    def on_preemptions(self, n: int) -> None:
        self.preemptions.inc(self._preempt_lv(), n)

    def on_step(self, step_tokens: int) -> None:
        if self.personality == "vllm":
            self.iteration.observe(self.lv, step_tokens)

    def on_first_token(self, ttft_s: float, queue_s: float, prompt_tokens: int) -> None:
        self.ttft.observe(self.lv, ttft_s)
        self.prompt_tokens.inc(self.lv, prompt_tokens)
        if self.personality == "sglang":
            self.queue.observe(self.lv, queue_s)

    def on_tokens(self, n: int) -> None:
        self.gen_tokens.inc(self.lv, n)

    def on_token_gap(self, gap_s: float) -> None:
        self.itl.observe(self.lv, gap_s)

    def on_finished(self, *, reason: str, e2e_s: float, queue_s: float, prefill_s: float,
                    decode_s: float, prompt_tokens: int, output_tokens: int,
                    preemptions: int) -> None:
        """A request ended (reason ``stop|length|abort|error``)."""
        lv = self.lv
        if self.personality == "sglang":
            self.num_requests.inc(lv)
            if reason in ("abort", "error"):
                self.aborted.inc(lv)
            else:
                self.e2e.observe(lv, e2e_s)
            return
        self.success.inc((*lv, reason))
        if reason in ("abort", "error"):
            return
        self.e2e.observe(lv, e2e_s)
        self.queue.observe(lv, queue_s)
        self.inference.observe(lv, prefill_s + decode_s)
        self.prefill.observe(lv, prefill_s)
        self.decode.observe(lv, decode_s)
        self.req_prompt.observe(lv, prompt_tokens)
        self.req_gen.observe(lv, output_tokens)
        if output_tokens > 1:
            self.tpot.observe(lv, decode_s / (output_tokens - 1))
        if preemptions:
            self.req_preempt.observe(lv, preemptions)

    def on_http(self, handler: str, method: str, status: int, duration_s: float) -> None:
        """prometheus_fastapi_instrumentator's pair (vLLM only; SGLang has no such metric)."""
        if self.personality != "vllm":
            return
        self.http_total.inc((handler, method, f"{status // 100}xx"))
        self.http_duration.observe((handler, method), duration_s)

    # ------------------------------------------------------------------ scrape
    def render(self, snap: Snapshot) -> str:
        if self.personality == "vllm":
            self.running.set(self.lv, snap.running)
            self.waiting.set(self.lv, snap.waiting)
            self.kv_usage.set(self.lv, snap.kv_usage)
        else:
            s = self.slv
            self.running.set(s, snap.running)
            self.waiting.set(s, snap.waiting)
            self.kv_usage.set(s, snap.kv_usage)
            self.used_tokens.set(s, snap.kv_used_tokens)
            self.max_tokens.set(s, snap.kv_total_tokens)
            self.gen_throughput.set(s, snap.gen_throughput)
            self.cache_hit.set(s, 0.0)
            self.retracted_now.set(s, 0.0)
            if self.speculative:
                drafts, drafted, accepted = self.spec_totals
                self.spec_accept_length.set(s, 1.0 + accepted / drafts if drafts else 0.0)
                self.spec_accept_rate.set(s, accepted / drafted if drafted else 0.0)
        self.fb_used.set(self.gpu_lv, snap.fb_used_mib)
        self.fb_free.set(self.gpu_lv, snap.fb_free_mib)
        return self.registry.render()
