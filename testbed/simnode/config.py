"""Simulator configuration: command-line flags, the simulated VRAM budget, startup checks.

Pure: no I/O. Memory flags are in GiB (2**30 bytes), like the numbers vLLM prints.

VRAM model (one simulated GPU of ``gpu_memory_gb``)::

    budget      = gpu_memory_utilization * gpu_memory_gb   what the engine may use
    kv_pool     = budget - weights_gb - activation_reserve_gb
                  (preallocated at startup, as vLLM does; split into blocks of block_size tokens)
    headroom    = gpu_memory_gb - weights_gb - kv_pool - cuda_context_gb
                  (= activation_reserve + (1 - utilization) * total - cuda_context)

A scheduler step that computes T tokens (prefill chunks + decodes) needs
``T * activation_bytes_per_token`` of transient activation memory; more than ``headroom``
is a simulated CUDA OOM that kills the engine. With chunked prefill T is capped by
``max_num_batched_tokens``; without it a long prompt is prefilled in one step, which is how
"high utilization + no chunked prefill" OOMs on long prompts.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass

GIB = 1 << 30
MIB = 1 << 20


class StartupError(Exception):
    """The configuration fails start-up validation; ``str()`` is the engine's message."""


@dataclass(frozen=True)
class SimConfig:
    """Every knob of one simulated node (see ``build_parser`` for meanings and defaults)."""

    personality: str = "vllm"
    host: str = "127.0.0.1"
    port: int = 8000
    model: str = "sim-model"
    served_model_name: str | None = None
    gpu_memory_gb: float = 24.0
    gpu_memory_utilization: float = 0.9
    weights_gb: float = 16.0
    activation_reserve_gb: float = 1.0
    cuda_context_gb: float = 0.5
    kv_bytes_per_token: int = 131072
    activation_bytes_per_token: int = 524288
    block_size: int = 16
    model_max_len: int = 8192
    max_model_len: int | None = None
    max_num_seqs: int = 64
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool = True
    load_seconds: float = 1.0
    speed: float = 1.0
    zero_latency: bool = False
    prefill_s_per_token: float = 0.000015
    step_overhead_s: float = 0.002
    decode_step_s: float = 0.020
    decode_s_per_seq: float = 0.0008
    decode_s_per_context_token: float = 0.0000005
    admin: bool = False
    truth_file: str | None = None
    oom_exit_delay_s: float = 0.5
    health_check_timeout_s: float = 20.0
    seed: int = 0
    #: host memory kept for every accepted request and never freed (a prompt cache without
    #: a bound, like llama.cpp's --cache-ram beyond its container): 0 = none
    leak_bytes_per_request: int = 0
    #: speculative decoding (:mod:`.speculation`): drafts per decode step, 0 = off
    num_speculative_tokens: int = 0
    #: the verifying pass's cost of one drafted token of one sequence
    spec_verify_s_per_token: float = 0.0006
    #: drafting's cost per decoding sequence and step (an n-gram lookup)
    spec_draft_s_per_seq: float = 0.001
    #: per-draft acceptance of a prompt nothing recurs in, and of a fully repetitive one
    spec_acceptance_floor: float = 0.05
    spec_acceptance_ceiling: float = 0.9

    @property
    def model_name(self) -> str:
        """The name clients use in ``model`` and metrics carry in ``model_name``."""
        return self.served_model_name or self.model

    @property
    def effective_max_model_len(self) -> int:
        return self.max_model_len if self.max_model_len is not None else self.model_max_len

    @property
    def effective_max_num_batched_tokens(self) -> int:
        """vLLM's default: 2048 with chunked prefill, else at least max_model_len."""
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        if self.enable_chunked_prefill:
            return 2048
        return max(self.effective_max_model_len, 2048)


@dataclass(frozen=True)
class MemoryBudget:
    """The simulated GPU's memory split (bytes) derived from a :class:`SimConfig`."""

    total_bytes: int
    weights_bytes: int
    kv_pool_bytes: int
    cuda_context_bytes: int
    headroom_bytes: int
    num_blocks: int
    block_size: int

    @classmethod
    def from_config(cls, cfg: SimConfig) -> MemoryBudget:
        total = int(cfg.gpu_memory_gb * GIB)
        weights = int(cfg.weights_gb * GIB)
        budget = int(cfg.gpu_memory_utilization * total)
        kv_pool = budget - weights - int(cfg.activation_reserve_gb * GIB)
        ctx = int(cfg.cuda_context_gb * GIB)
        usable = max(kv_pool, 0)
        bytes_per_block = cfg.kv_bytes_per_token * cfg.block_size
        return cls(
            total_bytes=total,
            weights_bytes=weights,
            kv_pool_bytes=kv_pool,
            cuda_context_bytes=ctx,
            headroom_bytes=total - weights - usable - ctx,
            num_blocks=usable // bytes_per_block,
            block_size=cfg.block_size,
        )

    @property
    def kv_tokens(self) -> int:
        """How many tokens of KV cache the pool holds (whole blocks only)."""
        return self.num_blocks * self.block_size

    def used_bytes(self, activation_bytes: int = 0) -> int:
        """Framebuffer in use: context + weights + the whole preallocated KV pool + activations."""
        return self.cuda_context_bytes + self.weights_bytes + max(self.kv_pool_bytes, 0) + (
            activation_bytes
        )


def validate(cfg: SimConfig) -> None:
    """Checks done before "loading weights" (vLLM: config time). Raises :class:`StartupError`."""
    if cfg.max_model_len is not None and cfg.max_model_len > cfg.model_max_len:
        if cfg.personality == "sglang":
            raise StartupError(
                f"User-specified context_length ({cfg.max_model_len}) is greater than the "
                f"derived context_length ({cfg.model_max_len}). This may lead to incorrect "
                "model outputs or CUDA errors. Note that the derived context_length may differ "
                "from max_position_embeddings in the model's config. To allow overriding this "
                "maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
            )
        raise StartupError(
            f"User-specified max_model_len ({cfg.max_model_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={cfg.model_max_len} or "
            "model_max_length=None in model's config.json). To allow overriding this maximum, "
            "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN "
            "must be used with extreme caution. If the model uses relative position encoding "
            "(RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses "
            "absolute position encoding, positions exceeding derived_max_model_len will cause "
            "a CUDA array out-of-bounds error."
        )
    max_len = cfg.effective_max_model_len
    batched = cfg.effective_max_num_batched_tokens
    if not cfg.enable_chunked_prefill and batched < max_len:
        raise StartupError(
            f"max_num_batched_tokens ({batched}) is smaller than max_model_len ({max_len}). "
            "This effectively limits the maximum sequence length to max_num_batched_tokens and "
            "makes vLLM reject longer sequences. Please increase max_num_batched_tokens or "
            "decrease max_model_len."
        )
    if batched < cfg.max_num_seqs:
        raise StartupError(
            f"max_num_batched_tokens ({batched}) must be greater than or equal to "
            f"max_num_seqs ({cfg.max_num_seqs})."
        )


def validate_kv_cache(cfg: SimConfig, budget: MemoryBudget) -> None:
    """Checks done after "profiling" (vLLM: KV cache sizing). Raises :class:`StartupError`."""
    if budget.kv_pool_bytes <= 0:
        raise StartupError(
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )
    max_len = cfg.effective_max_model_len
    needed = max_len * cfg.kv_bytes_per_token
    available = budget.num_blocks * budget.block_size * cfg.kv_bytes_per_token
    if needed > available:
        estimated = budget.kv_tokens
        estimated_msg = (
            f"Based on the available memory, the estimated maximum model length is {estimated}."
            if estimated > 0
            else ""
        )
        raise StartupError(
            f"To serve at least one request with the models's max seq len ({max_len}), "
            f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({available / GIB:.2f} GiB). {estimated_msg} Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
        )


def build_parser() -> argparse.ArgumentParser:
    d = SimConfig()
    p = argparse.ArgumentParser(
        prog="python -m testbed.simnode",
        description="Simulated vLLM/SGLang inference node (no GPU; stdlib + aiohttp only).",
    )
    a = p.add_argument
    a("--personality", choices=["vllm", "sglang"], default=d.personality)
    a("--host", default=None, help="bind address (default 127.0.0.1)")
    a("--port", type=int, default=None, help="default 8000 (vllm) / 30000 (sglang)")
    a("--model", "--model-path", default=d.model)
    a("--served-model-name", default=None)
    a("--gpu-memory-gb", type=float, default=d.gpu_memory_gb, help="simulated GPU size, GiB")
    a("--gpu-memory-utilization", "--mem-fraction-static", type=float,
      default=d.gpu_memory_utilization)
    a("--weights-gb", type=float, default=d.weights_gb, help="model weights, GiB")
    a("--activation-reserve-gb", type=float, default=d.activation_reserve_gb,
      help="activation memory the profiling run reserved inside the budget, GiB")
    a("--cuda-context-gb", type=float, default=d.cuda_context_gb)
    a("--kv-bytes-per-token", type=int, default=d.kv_bytes_per_token)
    a("--activation-bytes-per-token", type=int, default=d.activation_bytes_per_token)
    a("--block-size", type=int, default=d.block_size)
    a("--model-max-len", type=int, default=d.model_max_len,
      help="the model's own maximum (max_position_embeddings)")
    a("--max-model-len", "--context-length", type=int, default=None)
    a("--max-num-seqs", "--max-running-requests", type=int, default=d.max_num_seqs)
    a("--max-num-batched-tokens", type=int, default=None)
    a("--enable-chunked-prefill", action=argparse.BooleanOptionalAction,
      default=d.enable_chunked_prefill)
    a("--load-seconds", type=float, default=d.load_seconds,
      help="model-load delay: port closed (vllm) or /health 503 (sglang)")
    a("--speed", type=float, default=d.speed, help="divides every simulated duration")
    a("--zero-latency", action="store_true", help="no simulated compute time (benchmarks)")
    a("--prefill-s-per-token", type=float, default=d.prefill_s_per_token)
    a("--step-overhead-s", type=float, default=d.step_overhead_s)
    a("--decode-step-s", type=float, default=d.decode_step_s)
    a("--decode-s-per-seq", type=float, default=d.decode_s_per_seq)
    a("--decode-s-per-context-token", type=float, default=d.decode_s_per_context_token)
    a("--admin", action="store_true", help="enable POST /admin/{hang,slow,resume}")
    a("--truth-file", default=None, help="append ground-truth JSON lines here")
    a("--oom-exit-delay-s", type=float, default=d.oom_exit_delay_s)
    a("--health-check-timeout-s", type=float, default=d.health_check_timeout_s,
      help="sglang: /health gives 503 when no token is produced within this time")
    a("--seed", type=int, default=d.seed, help="varies the pseudo-text")
    a("--leak-bytes-per-request", type=int, default=d.leak_bytes_per_request,
      help="host memory kept for every accepted request and never freed (a leak)")
    a("--num-speculative-tokens", "--speculative-num-draft-tokens", type=int,
      default=d.num_speculative_tokens,
      help="n-gram speculative decoding: tokens drafted per decode step (0 = off)")
    a("--spec-verify-s-per-token", type=float, default=d.spec_verify_s_per_token)
    a("--spec-draft-s-per-seq", type=float, default=d.spec_draft_s_per_seq)
    a("--spec-acceptance-floor", type=float, default=d.spec_acceptance_floor)
    a("--spec-acceptance-ceiling", type=float, default=d.spec_acceptance_ceiling)
    return p


def parse_args(argv: Sequence[str] | None = None) -> SimConfig:
    """Flags → :class:`SimConfig` (argparse exits 2 on malformed flags)."""
    ns = build_parser().parse_args(argv)
    values = vars(ns)
    if values["host"] is None:
        values["host"] = "127.0.0.1"
    if values["port"] is None:
        values["port"] = 8000 if ns.personality == "vllm" else 30000
    cfg = SimConfig(**values)
    if cfg.speed <= 0 or cfg.block_size <= 0 or cfg.max_num_seqs <= 0:
        build_parser().error("--speed, --block-size and --max-num-seqs must be positive")
    if cfg.num_speculative_tokens < 0 or not (
            0 <= cfg.spec_acceptance_floor <= cfg.spec_acceptance_ceiling <= 1):
        build_parser().error("--num-speculative-tokens must be >= 0 and "
                             "0 <= --spec-acceptance-floor <= --spec-acceptance-ceiling <= 1")
    return cfg


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks needed to hold ``tokens`` tokens of KV."""
    return math.ceil(tokens / block_size) if tokens > 0 else 0
