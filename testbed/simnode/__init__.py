"""Simulated vLLM / SGLang inference node: a GPU-less digital twin with real failure behaviour.

Runs with the standard library and aiohttp ≥ 3.8 only (the testbed image has nothing else)::

    python3 -m testbed.simnode --personality vllm --port 8000 \
        --truth-file /var/lib/simnode/truth.jsonl

Modules (pure logic first, I/O last):

- ``config``     flags, the simulated VRAM budget, vLLM-style start-up validation
- ``blocks``     KV-cache block allocator
- ``scheduler``  continuous batching with preemption (vLLM recompute / SGLang retract)
- ``timing``     step duration model (``--speed``, ``--zero-latency``)
- ``buckets``    the engines' histogram buckets; ``metrics``/``promtext`` the /metrics text
- ``textgen``    token counting rule and deterministic pseudo-text
- ``engine``     the asyncio engine loop and the simulated CUDA OOM
- ``enginecore`` the engine core's own process, whose beats the engine steps on (a
                 SIGSTOP of it stalls the engine while the API answers; its death is fatal)
- ``api``        aiohttp routes (OpenAI API, health, metrics, admin); ``errors_body``
- ``node``       lifecycle: validation, load delay, serving, exit; ``truth`` ground truth

Ground truth (``--truth-file``), one JSON object per line, ``t`` in epoch seconds:
``started`` (pid, personality) · ``ready`` · ``oom`` (tried_bytes, free_bytes, in_flight) ·
``dead`` (reason: oom | engine_core_died | startup_validation | sigterm, exit_code) ·
``engine_core`` (pid) · ``engine_stalled`` (since: the core's last beat) ·
``engine_resumed`` · ``engine_core_died`` (exit_code) · ``request_accepted``
(id, prompt_tokens, max_tokens) · ``request_finished`` (id, finish_reason, output_tokens) ·
``request_dropped`` (id, reason: oom | engine_core_died | client_disconnect | shutdown) ·
``rejected`` (id, status, reason) · ``admin`` (action) · ``health_ok`` (the readiness
endpoint answered 200, dated as the answer is written). ``id`` is the client's
``X-Request-Id`` when sent.
"""

from testbed.simnode.config import MemoryBudget, SimConfig, StartupError, parse_args
from testbed.simnode.node import SimNode

__all__ = ["MemoryBudget", "SimConfig", "SimNode", "StartupError", "parse_args"]
