"""The inventory's node model: one inference server or gateway, how to reach it, what
observes it and what may be done to it (:class:`Node`, with its Docker and Prometheus
references and accepted findings)."""

from __future__ import annotations

import os
from datetime import date
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from faultkit.constants import FAULTKIT_ALERTS, LOCAL_DOCKER
from faultkit.inventory.settings import FrozenModel
from faultkit.model.durations import parse_model_duration
from faultkit.model.kinds import FAULT_KINDS

Engine = Literal["vllm", "sglang", "llamacpp", "tgi", "sim", "litellm"]
#: What a node is: an inference engine, or a gateway routing to engine nodes.
NodeKind = Literal["engine", "gateway"]
#: The engines that are gateways (``kind: gateway``), and only those.
GATEWAY_ENGINES = frozenset({"litellm"})


class DockerRef(FrozenModel):
    host: str = LOCAL_DOCKER
    container: str

    @field_validator("host")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(("unix://", "tcp://", "ssh://")):
            raise ValueError("must start with unix://, tcp:// or ssh://")
        return value


class PrometheusRef(FrozenModel):
    job: str
    selector: str = Field("", description='extra PromQL label matchers, e.g. model_name="x"')
    alert_for: dict[str, str] = Field(
        default_factory=dict,
        description="`for:` of this node's faultkit alerts, by name (FaultkitNodeDown: 1m), "
        "as your own rules set it; `faultkit rules` writes it")

    @field_validator("alert_for")
    @classmethod
    def _known_alerts(cls, value: dict[str, str]) -> dict[str, str]:
        for name, duration in value.items():
            if name not in FAULTKIT_ALERTS:
                raise ValueError(f"no faultkit alert {name!r} (have: {', '.join(FAULTKIT_ALERTS)})")
            try:
                parse_model_duration(duration)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return {name: duration.strip() for name, duration in value.items()}


class AcceptedFinding(FrozenModel):
    """A known, explained failure of one check in one scenario on this node: while it has
    not expired, a FAIL made only of accepted failures reads ACCEPTED (``slo.accepted``).

    ``scenario`` is the scenario name as in run.json (``bad_input``), optionally with a
    glob over the case id in brackets (``oom[*-long-prefill]``); ``check`` is a check name
    (``malformed_rejected_4xx``); ``expires`` is the last day it applies (ISO date).
    """

    scenario: str = Field(pattern=r"^[A-Za-z0-9_]+(\[[^\[\]]+\])?$")
    check: str = Field(min_length=1)
    reason: str = Field(min_length=1, description="why this failure is accepted")
    expires: date | None = Field(None, description="last day the finding applies")

    @field_validator("scenario", "check", "reason")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


#: Each engine's worker process, as its command line shows it inside the container: the
#: process whose death is the engine's death. vLLM (V1) names its engine core process
#: ``VLLM::EngineCore`` (setproctitle); SGLang its scheduler ``sglang::scheduler``; TGI's
#: launcher runs its model shards as ``text-generation-server``; llama.cpp serves from one
#: process; the simulator too. A gateway (LiteLLM) has no engine to kill.
ENGINE_PROCESSES: dict[str, str] = {
    "vllm": r"VLLM::EngineCore",
    "sglang": r"sglang::scheduler",
    "llamacpp": r"llama-server",
    "tgi": r"text-generation-server",
    "sim": r"simnode/enginecore\.py",  # testbed/simnode/enginecore.py
}


class Node(FrozenModel):
    """One inference server the harness may load, observe and (if allowed) break."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    kind: NodeKind = "engine"
    engine: Engine
    base_url: str
    model: str
    api_key_env: str | None = None
    health_path: str = "/health"
    docker: DockerRef | None = None
    prometheus: PrometheusRef | None = None
    serving_config: str | None = Field(None, description="name of the config it runs now")
    candidate_configs: list[str] = Field(
        default_factory=list,
        description="serving configs the rollout scenario and the gate may try on this node",
    )
    personality: Literal["vllm", "sglang"] | None = Field(
        None, description="for engine 'sim': which engine's metrics and health it imitates"
    )
    upstreams: list[str] = Field(
        default_factory=list,
        description="for kind 'gateway': the names of the engine nodes it routes to",
    )
    engine_process: str | None = Field(
        None,
        description="regular expression matching the command line of the engine's worker "
        "process inside the container (kill_process; default per engine: ENGINE_PROCESSES)",
    )
    pause_with: Literal["freezer", "sigstop"] = Field(
        "freezer",
        description="how test_pause freezes the container: Docker's cgroup freezer (docker "
        "pause), or SIGSTOP of every process of the container (the stall fault, whole=true) "
        "where the freezer cannot freeze it (cgroup v1: 'unable to freeze')",
    )
    slo: dict[str, Any] = Field(default_factory=dict)
    background_rate: float | None = Field(
        None, gt=0, le=2000, allow_inf_nan=False,
        description="req/s of the scenarios' background load on this node (default 10): "
        "keep it within what the node serves in steady state",
    )
    capacity_rps: float | None = Field(
        None, gt=0, le=2000, allow_inf_nan=False,
        description="req/s the node is declared to serve: test_soak's open-loop rate "
        "(default: background_rate, else 10)",
    )
    soak_horizon_h: float = Field(
        24.0, gt=0, le=24 * 365, allow_inf_nan=False,
        description="test_soak fails a memory trend that reaches the container's limit "
        "within this many hours",
    )
    context_limit: int | None = Field(
        None, ge=16, le=16_777_216,
        description="tokens one sequence may hold (prompt + output); default: read from the "
        "engine (faultkit.probes.limits: /v1/models max_model_len, llama.cpp /props n_ctx)",
    )
    workload: Literal["free", "extractive", "mixed"] = Field(
        "mixed",
        description="what this node's users ask for (docs/load.md, 'Workload classes'): the "
        "gate fails a candidate that changes speculative decoding and serves this workload "
        "slower (docs/gate.md, 'Speculative decoding')",
    )
    max_concurrency: int | None = Field(
        None, ge=1, le=1024,
        description="sequences the node serves at once (vLLM --max-num-seqs, llama.cpp -np): "
        "how many full-context prompts test_limits sends together; default: llama.cpp's "
        "total_slots, else 2",
    )
    faults: list[str] = Field(default_factory=list)
    protected: bool = False
    accepted_findings: list[AcceptedFinding] = Field(
        default_factory=list,
        description="known failures (scenario + check) that read ACCEPTED until they expire",
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("faults")
    @classmethod
    def _known_faults(cls, value: list[str]) -> list[str]:
        unknown = [f for f in value if f != "*" and f not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"unknown fault {unknown[0]!r} (allowed: *, {', '.join(FAULT_KINDS)})")
        return value

    @model_validator(mode="after")
    def _kind_fits(self) -> Node:
        if self.kind == "gateway":
            if self.engine not in GATEWAY_ENGINES:
                raise ValueError(
                    f"a gateway's engine must be {' or '.join(sorted(GATEWAY_ENGINES))} "
                    f"(got {self.engine!r})"
                )
            if not self.upstreams:
                raise ValueError("a gateway needs upstreams: the names of the nodes it routes to")
        else:
            if self.engine in GATEWAY_ENGINES:
                raise ValueError(f"engine {self.engine!r} is a gateway: set kind: gateway")
            if self.upstreams:
                raise ValueError("only a gateway (kind: gateway) has upstreams")
        return self

    @property
    def profile_engine(self) -> str:
        """The engine whose metric names this node exposes (a sim speaks its personality)."""
        return (self.personality or "vllm") if self.engine == "sim" else self.engine

    @property
    def host_key(self) -> str:
        """Which Docker host the node's container runs on (its engine's URL); a node without
        a container is a host of its own. ``per_docker_host`` scenarios and the lanes'
        host-wide restarts group nodes by it."""
        return self.docker.host if self.docker else self.name

    @property
    def engine_process_pattern(self) -> str | None:
        """What ``kill_process`` kills to make the engine die inside its container: the
        inventory's ``engine_process``, else the engine's worker (:data:`ENGINE_PROCESSES`)."""
        return self.engine_process or ENGINE_PROCESSES.get(self.engine)

    def allows(self, fault: str) -> bool:
        """True when the blast-radius policy lets ``fault`` run on this node."""
        return not self.protected and ("*" in self.faults or fault in self.faults)

    def api_key(self) -> str | None:
        """The API key from the environment variable the inventory names (never stored)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None
