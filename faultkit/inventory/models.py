"""The inventory's pydantic models: what a valid inventory is.

Every model forbids unknown keys and is frozen. Cross-field rules live in validators:
a gateway (``kind: gateway``) has an engine of :data:`GATEWAY_ENGINES` and upstreams, an
engine node has neither; :class:`Inventory` checks node names are unique, no two nodes
name one container (:mod:`.topology`), every named serving config exists, a ``sim`` node
has a personality and node ``slo`` overrides name known keys. The first broken rule is
raised as a ``ValueError`` (pydantic reports it); lookups that fail raise
:class:`~faultkit.errors.InventoryError`.

:data:`MODELS_BY_PATH` says which model validates each key path (for "allowed here" in
error messages, :mod:`.problems`).
"""

from __future__ import annotations

import os
import re
from datetime import date
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from faultkit.constants import FAULTKIT_ALERTS, LOCAL_DOCKER
from faultkit.errors import InventoryError
from faultkit.inventory.problems import format_errors
from faultkit.inventory.topology import (
    ContainerKey,
    clash_message,
    container_clashes,
    normalise,
    upstream_problems,
)
from faultkit.model.durations import parse_model_duration
from faultkit.model.kinds import FAULT_KINDS

Engine = Literal["vllm", "sglang", "llamacpp", "tgi", "sim", "litellm"]
#: What a node is: an inference engine, or a gateway routing to engine nodes.
NodeKind = Literal["engine", "gateway"]
#: The engines that are gateways (``kind: gateway``), and only those.
GATEWAY_ENGINES = frozenset({"litellm"})
RestartPolicy = Literal["no", "on-failure", "always", "unless-stopped"]

_MEMORY_RE = re.compile(r"^\d+(\.\d+)?[bkmg]?$", re.IGNORECASE)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SLOSettings(_Model):
    """Objectives a node is judged against. Defaults suit the testbed and small clusters.

    Latency thresholds should be histogram bucket boundaries of the engine (bucket-ratio
    SLIs are exact only there).
    """

    availability: float = Field(0.99, gt=0, lt=1, description="good/valid requests target")
    error_ratio_max: float = Field(0.01, ge=0, le=1)
    ttft_s: float = Field(2.5, gt=0, description="TTFT threshold (bucket boundary)")
    ttft_target: float = Field(0.95, gt=0, le=1, description="fraction under ttft_s")
    itl_s: float = Field(0.5, gt=0)
    itl_target: float = Field(0.95, gt=0, le=1)
    detection_s_max: float = Field(30.0, gt=0)
    recovery_s_max: float = Field(120.0, gt=0)
    lost_max: int | None = Field(None, ge=0, description="max lost requests; None = no limit")
    page_s_max: float | None = Field(
        None, gt=0, description="max seconds from the fault to a page reaching the pager "
        "(needs alertmanager.pager_url); None = not judged")
    recovery_hold_s: float = Field(5.0, gt=0)
    window_days: int = Field(30, ge=1, le=366)


class DockerRef(_Model):
    host: str = LOCAL_DOCKER
    container: str

    @field_validator("host")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(("unix://", "tcp://", "ssh://")):
            raise ValueError("must start with unix://, tcp:// or ssh://")
        return value


class PrometheusRef(_Model):
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


class AcceptedFinding(_Model):
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


class Node(_Model):
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


class ServingConfig(_Model):
    """A named way to run a node's container (used by the rollout fault and the gate)."""

    image: str
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    memory: str | None = Field(None, description="memory limit, e.g. 512m or 24g")
    shm_size: str | None = Field(
        None, description="size of /dev/shm, e.g. 1g (vLLM's shared-memory queues need ~400 MiB)"
    )
    cpu_shares: int | None = Field(
        None, ge=2, le=262144,
        description="relative CPU weight against the host's other containers (Docker's "
        "--cpu-shares; its default is 1024); only matters while the CPU is contended",
    )
    restart: RestartPolicy = "on-failure"
    restart_max_retries: int = Field(0, ge=0, description="for on-failure; 0 = unlimited")
    ready_timeout_s: float = Field(120.0, gt=0)
    description: str = ""
    apply: str | None = Field(None, description="shell command applying this config (compose)")
    rollback: str | None = Field(None, description="shell command restoring the previous one")

    @field_validator("memory", "shm_size")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is not None and not _MEMORY_RE.match(value):
            raise ValueError("must look like 512m, 2g or 1073741824")
        return value

    @model_validator(mode="after")
    def _apply_pairs(self) -> ServingConfig:
        if (self.apply is None) != (self.rollback is None):
            raise ValueError("'apply' and 'rollback' go together: give both or neither")
        return self


class PrometheusSettings(_Model):
    url: str = "http://127.0.0.1:9090"
    scrape_interval_s: float = Field(1.0, gt=0)
    slo_evaluation_interval_s: float = Field(
        30.0, gt=0, le=3600,
        description="how often the SLO recording and burn-rate rules are evaluated; the node "
        "alerts (down, restarted) use Prometheus' global interval, which detection rests on",
    )


class AlertmanagerSettings(_Model):
    """The Alertmanager the inventory's Prometheus sends its alerts to: read through its
    API v2 (alerts, silences), never reconfigured; ``pager_url``, a ``faultkit pager``
    its route delivers to (a webhook receiver), dates each page as it arrived."""

    url: str = Field(description="Alertmanager's base URL, e.g. http://127.0.0.1:9093")
    pager_url: str | None = Field(
        None, description="base URL of a `faultkit pager` that a route of this Alertmanager "
        "delivers to (webhook_configs); without one, no page can be dated, only its state")

    @field_validator("url", "pager_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/") if value is not None else None


class Inventory(_Model):
    """The whole inventory file."""

    prometheus: PrometheusSettings = Field(default_factory=lambda: PrometheusSettings())
    alertmanager: AlertmanagerSettings | None = None
    slo: SLOSettings = Field(default_factory=lambda: SLOSettings())
    nodes: list[Node] = Field(min_length=1)
    serving_configs: dict[str, ServingConfig] = Field(default_factory=dict)
    source: str = Field("<memory>", exclude=True, description="file it was loaded from")

    @model_validator(mode="after")
    def _consistent(self) -> Inventory:
        names = [n.name for n in self.nodes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"node names must be unique (repeated: {', '.join(dupes)})")
        clashes = container_clashes([_container_key(n) for n in self.nodes])
        if clashes:
            first, second = clashes[0]
            raise ValueError(clash_message(self.nodes[first].name, self.nodes[second].name,
                                            _container_key(self.nodes[second])))
        broken = upstream_problems([(n.name, n.kind, n.upstreams) for n in self.nodes])
        if broken:
            raise ValueError(broken[0][2])
        for node in self.nodes:
            if node.serving_config and node.serving_config not in self.serving_configs:
                raise ValueError(
                    f"node {node.name!r} names serving_config {node.serving_config!r}, "
                    f"which is not under serving_configs "
                    f"(have: {', '.join(sorted(self.serving_configs)) or 'none'})"
                )
            missing = [c for c in node.candidate_configs if c not in self.serving_configs]
            have = ", ".join(sorted(self.serving_configs)) or "none"
            if missing:
                raise ValueError(
                    f"node {node.name!r} lists candidate config {missing[0]!r}, which is not "
                    f"under serving_configs (have: {have})"
                )
            if node.engine == "sim" and node.personality is None:
                raise ValueError(f"node {node.name!r}: engine 'sim' needs personality vllm|sglang")
            unknown_slo = set(node.slo) - set(SLOSettings.model_fields)
            if unknown_slo:
                raise ValueError(
                    f"node {node.name!r}: unknown slo key {sorted(unknown_slo)[0]!r} "
                    f"(allowed: {', '.join(SLOSettings.model_fields)})"
                )
        return self

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise InventoryError(
            self.source,
            [f"{self.source}: no node named {name!r} (have: {', '.join(self.node_names)})"],
        )

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def slo_for(self, node: Node) -> SLOSettings:
        """The node's objectives: inventory defaults overridden by the node's ``slo``."""
        try:
            return SLOSettings.model_validate({**self.slo.model_dump(), **node.slo})
        except ValidationError as exc:
            problems = format_errors(self.source, exc, {}, MODELS_BY_PATH)
            raise InventoryError(self.source, problems) from exc

    def serving_config(self, name: str) -> ServingConfig:
        try:
            return self.serving_configs[name]
        except KeyError:
            have = ", ".join(sorted(self.serving_configs)) or "none"
            raise InventoryError(
                self.source, [f"{self.source}: no serving config {name!r} (have: {have})"]
            ) from None


def _container_key(node: Node) -> ContainerKey:
    """The node's (host, container), spelled as :func:`.topology.normalise` does."""
    return None if node.docker is None else normalise(node.docker.host, node.docker.container)


#: which model validates each key path (for "allowed here" in error messages)
MODELS_BY_PATH: dict[tuple[str, ...], type[BaseModel]] = {
    (): Inventory,
    ("prometheus",): PrometheusSettings,
    ("alertmanager",): AlertmanagerSettings,
    ("slo",): SLOSettings,
    ("nodes",): Node,
    ("nodes", "docker"): DockerRef,
    ("nodes", "prometheus"): PrometheusRef,
    ("nodes", "accepted_findings"): AcceptedFinding,
    ("serving_configs",): ServingConfig,
}
