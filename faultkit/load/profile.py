"""What load to send (:class:`LoadProfile`) and where to send it (:class:`Target`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from faultkit.inventory import Node
from faultkit.load.prompts import workload_of

__all__ = [
    "BACKGROUND_PROFILE",
    "ENGINES_WITH_IGNORE_EOS",
    "MAX_RATE_RPS",
    "RETRIES_HEADERS",
    "SERVED_BY_HEADERS",
    "LoadProfile",
    "Target",
]

Endpoint = Literal["chat", "completion"]

#: Engines whose OpenAI routes accept the non-standard ``ignore_eos`` sampling flag.
ENGINES_WITH_IGNORE_EOS: frozenset[str] = frozenset({"vllm", "sglang", "sim", "llamacpp"})

#: Gateway engines → the response header naming the upstream that answered a request
#: (LiteLLM 1.108: ``x-litellm-model-id``, the deployment id, which the lab's config sets
#: to the upstream node's name; docs/gateway.md). Recorded as ``RequestRecord.served_by``.
SERVED_BY_HEADERS: Mapping[str, str] = {"litellm": "x-litellm-model-id"}
#: Gateway engines → the response header saying how many times the gateway retried the
#: request before this answer (LiteLLM 1.108: ``x-litellm-attempted-retries``, on served
#: answers, streams included). Recorded as ``RequestRecord.gateway_retries``.
RETRIES_HEADERS: Mapping[str, str] = {"litellm": "x-litellm-attempted-retries"}

#: The highest open-loop rate (requests/s) a run may ask for. The generator is one asyncio
#: event loop on one client core; on that core it completes about 2,900 req/s with a new
#: connection per request against a zero-latency server (``bench/load_client.py``,
#: docs/load-client.md).
#: Above that it cannot keep the schedule, every arrival is sent late and the figures
#: measure the client, not the node; 2,000 req/s leaves a third of that core for parsing
#: the answers of a real server. A higher rate needs several client processes.
MAX_RATE_RPS = 2000.0

_ALIASES = {
    "duration": "duration_s",
    "timeout": "total_timeout_s",
    "connect_timeout": "connect_timeout_s",
    "first_token_timeout": "first_token_timeout_s",
    "total_timeout": "total_timeout_s",
    "kind": "endpoint",
    "endpoint_kind": "endpoint",
    "keepalive": "reuse_connections",
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True, slots=True)
class LoadProfile:
    """The shape of a load run. All durations are seconds.

    Closed loop: ``rate`` is None and ``concurrency`` workers each send the next request
    as soon as their previous one ended. Open loop: requests arrive at ``rate`` per second
    with gamma-distributed gaps (``burstiness`` 1.0 = Poisson; < 1 burstier, > 1 more
    regular; same convention as ``vllm bench serve``), capped at ``concurrency`` in
    flight when that is given (an arrival never waits for a free slot: over the cap it is
    recorded at once as ``fail``/``shed_client``; ``t_scheduled`` is its arrival,
    ``t_invoke`` when it was actually sent). The run stops after ``requests`` requests
    (open loop: arrivals, shed ones included) or ``duration_s`` seconds, whichever comes
    first, or when stopped from outside (neither given = run until stopped). ``warmup``
    requests are sent first and kept out of the ledger.

    Connections: a request reuses a pooled connection only when it is proven still open,
    and a server seen closing kept-alive connections behind the client's back gets a fresh
    connection per request from then on (:mod:`faultkit.load.connections`): fast, and no
    request is ever lost to the client's own reuse. ``reuse_connections=False`` opens one
    connection per request, as the fault experiments do (:data:`BACKGROUND_PROFILE`): every
    user then goes through connect, the path a restarted or partitioned node breaks first.

    Timeouts per request: ``connect_timeout_s`` for the TCP connect,
    ``first_token_timeout_s`` from invoke to the first content chunk (streaming only),
    ``total_timeout_s`` from invoke to the end of the response.
    """

    endpoint: Endpoint = "chat"
    stream: bool = True
    concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    requests: int | None = None
    duration_s: float | None = None
    input_tokens: int = 32
    output_tokens: int = 32
    ignore_eos: bool = True
    include_usage: bool = True
    connect_timeout_s: float = 5.0
    first_token_timeout_s: float = 60.0
    total_timeout_s: float = 300.0
    seed: int = 0
    warmup: int = 0
    reuse_connections: bool = True
    #: what the prompts ask for: a class of :data:`~faultkit.load.prompts.WORKLOADS`
    #: (``free``, ``extractive``) or ``mixed`` (alternating them); each request's class is
    #: in the ledger (docs/load.md, "Workload classes")
    workload: str = "free"
    #: extra JSON fields merged into every request body (e.g. ``{"temperature": 0}``)
    extra_body: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.endpoint not in ("chat", "completion"):
            raise ValueError(f"endpoint must be chat or completion (got {self.endpoint!r})")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1 (got {self.concurrency})")
        if self.rate is not None and not 0 < self.rate <= MAX_RATE_RPS:
            raise ValueError(
                f"rate must be > 0 and <= {MAX_RATE_RPS:g} requests/s, what one client core "
                f"can schedule (got {self.rate})"
            )
        if not 0 < self.burstiness < math.inf:
            raise ValueError(f"burstiness must be a finite number > 0 (got {self.burstiness})")
        if self.requests is not None and self.requests < 0:
            raise ValueError(f"requests must be >= 0 (got {self.requests})")
        if self.duration_s is not None and not 0 < self.duration_s < math.inf:
            raise ValueError(f"duration must be > 0 s and finite (got {self.duration_s})")
        for name in ("input_tokens", "output_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        for name in ("connect_timeout_s", "first_token_timeout_s", "total_timeout_s"):
            if not 0 < getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be > 0 s and finite (got {getattr(self, name)})")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0 requests (got {self.warmup})")
        workload_of(self.workload, 0)  # a class or mixed: raises naming the allowed ones

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    @property
    def workers(self) -> int:
        """Closed loop: the number of workers (default 1)."""
        return self.concurrency or 1

    def replace(self, **changes: Any) -> LoadProfile:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["extra_body"] = dict(self.extra_body)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoadProfile:
        """Build from a mapping; string values are converted to the field's type.

        Unknown keys raise ``ValueError`` naming the allowed ones. Aliases: ``duration``,
        ``timeout``/``total_timeout``, ``connect_timeout``, ``first_token_timeout``, ``kind``.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for raw_key, value in data.items():
            key = _ALIASES.get(raw_key.strip(), raw_key.strip())
            if key not in fields or (key == "extra_body" and not isinstance(value, Mapping)):
                allowed = ", ".join(n for n in fields if n != "extra_body")
                raise ValueError(f"unknown load profile key {raw_key!r} (allowed: {allowed})")
            values[key] = _convert(key, value) if isinstance(value, str) else value
        return cls(**values)

    @classmethod
    def from_string(cls, text: str, **defaults: Any) -> LoadProfile:
        """Parse ``"concurrency=4,output_tokens=32,stream=false"`` (empty string = defaults).

        ``defaults`` replace the class defaults for keys the text does not give.
        """
        data: dict[str, Any] = {}
        for part in text.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"load profile item {part.strip()!r} is not key=value")
            data[key.strip()] = value.strip()
        given = {_ALIASES.get(key, key) for key in data}
        return cls.from_dict({**{k: v for k, v in defaults.items() if k not in given}, **data})


#: The scenarios' background load when no ``--load-profile`` is given (the pytest plugin's
#: ``load_profile`` fixture), and so the load ``faultkit gate`` measures its steady state
#: with. Open loop: users keep arriving at a steady rate whatever the node does, so "lost"
#: counts what users would have lost (a closed loop retries a dead node as fast as it
#: refuses and inflates the count). The in-flight cap only protects the client: 256 lets a
#: 20 s hang at 10 req/s queue every user (counted slow, not shed) instead of shedding
#: arrivals the node would have served once it was back. User patience: a background user
#: waits up to 30 s for a first token; slower answers count as slow (affected users, TTFT
#: SLIs), not lost; a shorter timeout would manufacture losses out of queueing (a 10 s
#: flood queues users ~10 s).
BACKGROUND_PROFILE = LoadProfile(
    rate=10.0,
    reuse_connections=False,
    concurrency=256,
    input_tokens=32,
    output_tokens=24,
    first_token_timeout_s=30.0,
    total_timeout_s=60.0,
    connect_timeout_s=2.0,
)



def within_node_rate(profile: LoadProfile, node_rate: float | None) -> LoadProfile:
    """``profile`` at no more than ``node_rate`` req/s (a node's ``background_rate``): the
    load a *neighbour* gets in ``test_contained_failure``. The victim's rate would flood a
    neighbour sized for less (the lab's LiteLLM gateway serves ≈ 8 req/s: at 10 its queue,
    not the fault, failed its users), and its users would then count as the fault's harm.
    A closed-loop profile, or one already within the rate, is returned as it is."""
    if node_rate is None or profile.rate is None or profile.rate <= node_rate:
        return profile
    return dataclasses.replace(profile, rate=node_rate)

_INT = {"concurrency", "requests", "input_tokens", "output_tokens", "seed", "warmup"}
_FLOAT = {
    "rate",
    "burstiness",
    "duration_s",
    "connect_timeout_s",
    "first_token_timeout_s",
    "total_timeout_s",
}
_BOOL = {"stream", "ignore_eos", "include_usage", "reuse_connections"}


def _convert(key: str, value: str) -> Any:
    text = value.strip()
    if key in _INT | _FLOAT and text.lower() in ("", "none"):
        return None
    try:
        if key in _INT:
            return int(text)
        if key in _FLOAT:
            return float(text.removesuffix("s")) if key != "rate" else float(text)
    except ValueError:
        kind = "an integer" if key in _INT else "a number"
        raise ValueError(f"load profile {key}={value!r}: must be {kind}") from None
    if key in _BOOL:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(f"load profile {key}={value!r}: must be true or false")
    if key == "endpoint":
        return "completion" if text in ("completion", "completions") else text
    return text


@dataclass(frozen=True, slots=True)
class Target:
    """An OpenAI-compatible server to load. ``api_key`` is kept in memory only.

    ``served_by_header``: the response header whose value is recorded as
    ``RequestRecord.served_by`` (which upstream answered, behind a gateway); None = none.
    ``retries_header``: the one whose integer value is ``RequestRecord.gateway_retries``.
    """

    name: str
    base_url: str
    model: str
    engine: str | None = None
    api_key: str | None = field(default=None, repr=False)
    served_by_header: str | None = None
    retries_header: str | None = None

    @classmethod
    def from_node(cls, node: Node) -> Target:
        """The node's endpoint; the API key is read now from the env var it names. A
        gateway node records which upstream served each request (:data:`SERVED_BY_HEADERS`)."""
        gateway = node.kind == "gateway"
        header = SERVED_BY_HEADERS.get(node.engine) if gateway else None
        retries = RETRIES_HEADERS.get(node.engine) if gateway else None
        return cls(node.name, node.base_url, node.model, node.engine, node.api_key(), header,
                   retries)

    @property
    def api_root(self) -> str:
        """``base_url`` ending in ``/v1`` (added unless already there)."""
        base = self.base_url.rstrip("/")
        return base if base.endswith("/v1") else base + "/v1"

    @property
    def supports_ignore_eos(self) -> bool:
        """Known engines that accept ``ignore_eos``; an unknown engine is assumed to."""
        return self.engine is None or self.engine in ENGINES_WITH_IGNORE_EOS
