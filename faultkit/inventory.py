"""The inventory: which nodes exist, how to reach them, and what may be done to them.

Loaded from YAML with ``yaml.safe_load`` semantics and validated with pydantic. Every
problem is reported as ``FILE:LINE FIELD.PATH: what is wrong (got VALUE; allowed: …)``;
unknown keys are errors, so a typo is never silently ignored, and so is a key given twice
in one mapping (YAML would silently keep the last: ``protected: true`` then
``protected: false`` must not unprotect a node). One container on one Docker host is one
node: two nodes naming the same container are an error, or a protected node could be hit
through its alias.

A node is an engine (``kind: engine``, the default) or a gateway (``kind: gateway``,
``engine: litellm``) that routes one model alias to the engine nodes its ``upstreams``
names. An upstream must be another node of the same inventory, and not a gateway itself
(gateways are not chained); each broken ``upstreams`` entry is reported at its own line.

Example::

    prometheus:
      url: http://127.0.0.1:9090
    slo:                       # defaults for every node
      availability: 0.99
    nodes:
      - name: vllm-a
        engine: vllm
        base_url: http://127.0.0.1:8000
        model: my-model
        api_key_env: VLLM_API_KEY       # the *name* of an env var, never the key
        docker: {host: unix:///var/run/docker.sock, container: vllm-a}
        prometheus: {job: vllm-a}
        faults: [kill, pause, partition]
        accepted_findings:              # known failures that do not fail the run, until…
          - {scenario: bad_input, check: malformed_rejected_4xx,
             reason: "engine answers a message without role with 500", expires: 2027-06-30}
      - name: gw
        kind: gateway
        engine: litellm
        base_url: http://127.0.0.1:4000
        model: chat                     # the alias clients ask for
        health_path: /health/readiness
        upstreams: [vllm-a]
    serving_configs:
      vllm-a-good: {image: vllm/vllm-openai:v0.26.0, command: [...], memory: 24g}
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from faultkit.constants import LOCAL_DOCKER
from faultkit.errors import InventoryError
from faultkit.kinds import FAULT_KINDS

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
    slo: dict[str, Any] = Field(default_factory=dict)
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


def config_hash(config: ServingConfig | None, *extra: object) -> str:
    """The first 12 hex digits of the SHA-256 of ``config`` as JSON (keys sorted; ``null``
    for no config); ``extra`` values, when given, are hashed along with it.

    run.json's ``node_config_hash`` is ``config_hash(config)``; the testbed labels each
    container it creates with the hash of its config plus its volumes, env and URL
    (:data:`faultkit.constants.LABEL_CONFIG_HASH`) and recreates it when that changes.
    """
    data = None if config is None else config.model_dump(mode="json")
    blob = json.dumps([data, *extra] if extra else data, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


class PrometheusSettings(_Model):
    url: str = "http://127.0.0.1:9090"
    scrape_interval_s: float = Field(1.0, gt=0)
    slo_evaluation_interval_s: float = Field(
        30.0, gt=0, le=3600,
        description="how often the SLO recording and burn-rate rules are evaluated; the node "
        "alerts (down, restarted) use Prometheus' global interval, which detection rests on",
    )


class Inventory(_Model):
    """The whole inventory file."""

    prometheus: PrometheusSettings = Field(default_factory=lambda: PrometheusSettings())
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
            raise ValueError(_clash_message(self.nodes[first].name, self.nodes[second].name,
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
            raise InventoryError(self.source, _format_errors(self.source, exc, {})) from exc

    def serving_config(self, name: str) -> ServingConfig:
        try:
            return self.serving_configs[name]
        except KeyError:
            have = ", ".join(sorted(self.serving_configs)) or "none"
            raise InventoryError(
                self.source, [f"{self.source}: no serving config {name!r} (have: {have})"]
            ) from None


# --------------------------------------------------------------------------- loading


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory file; raise :class:`InventoryError` listing every problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(str(path), [f"{path}: no such inventory file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(str(path), [f"{path}: cannot read: {exc}"]) from None
    return parse_inventory(text, source=str(path))


def parse_inventory(text: str, *, source: str = "<string>") -> Inventory:
    """Validate inventory YAML text; errors name ``source``, the line and the field."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InventoryError(source, [f"{where}: not valid YAML: {problem}"]) from None
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise InventoryError(
            source,
            [f"{source}:1: the inventory must be a mapping with a 'nodes' list (got {kind})"],
        )
    lines = _line_index(root)
    problems = (
        _duplicate_keys(root, source)
        + _raw_container_clashes(data, source, lines)
        + _raw_upstream_problems(data, source, lines)
    )
    if problems:
        raise InventoryError(source, problems)
    try:
        inventory = Inventory.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise InventoryError(source, _format_errors(source, exc, lines)) from None
    except (TypeError, ValueError) as exc:  # e.g. unhashable keys deep inside the document
        raise InventoryError(source, [f"{source}: invalid inventory: {exc}"]) from None
    return inventory


Loc = tuple[str | int, ...]
#: (Docker host, container name) of a node; None for a node without Docker access
ContainerKey = tuple[str, str] | None


def _container_key(node: Node) -> ContainerKey:
    return None if node.docker is None else _normalise(node.docker.host, node.docker.container)


def _normalise(host: str, container: str) -> tuple[str, str]:
    """The same container however it is spelled: no trailing ``/`` on the host, no leading
    ``/`` on the name (Docker's own names start with one)."""
    return host.rstrip("/"), container.lstrip("/")


def container_clashes(keys: list[ContainerKey]) -> list[tuple[int, int]]:
    """Index pairs ``(first, later)`` of nodes naming the same container on the same host."""
    seen: dict[tuple[str, str], int] = {}
    clashes = []
    for i, key in enumerate(keys):
        if key is None:
            continue
        if key in seen:
            clashes.append((seen[key], i))
        else:
            seen[key] = i
    return clashes


def _clash_message(first: str, second: str, key: ContainerKey) -> str:
    host, container = key or ("?", "?")
    return (
        f"node {second!r} names container {container!r} on {host}, which node {first!r} "
        "already names; one container must be one node (else a fault refused on one name "
        "could reach it through the other): remove one of them"
    )


def _raw_container_clashes(data: Mapping[str, Any], source: str,
                           lines: Mapping[Loc, int]) -> list[str]:
    """Container clashes in the raw YAML data, each at the later node's ``container:`` line.

    Malformed entries are skipped: validation reports them.
    """
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        return []
    keys = [_raw_key(entry) for entry in nodes]
    names = [str(e.get("name", "?")) if isinstance(e, Mapping) else "?" for e in nodes]
    problems = []
    for first, later in container_clashes(keys):
        loc: Loc = ("nodes", later, "docker", "container")
        line = _nearest_line(loc, lines)
        where = f"{source}:{line}" if line else source
        problems.append(f"{where} {_dotted(loc)}: "
                        + _clash_message(names[first], names[later], keys[later]))
    return problems


#: (name, kind, upstreams) of a node, as far as the upstream checks need it
GatewayEntry = tuple[str, str, list[str]]


def upstream_problems(entries: list[GatewayEntry]) -> list[tuple[int, int, str]]:
    """``(node index, upstream index, message)`` for every gateway upstream that is not
    another engine node of the inventory: unknown, the gateway itself, a gateway, or
    listed twice. Entries of engine nodes are not looked at."""
    kinds = {name: kind for name, kind, _ in entries}
    have = ", ".join(name for name, kind, _ in entries if kind != "gateway") or "none"
    problems = []
    for i, (name, kind, upstreams) in enumerate(entries):
        if kind != "gateway":
            continue
        seen: set[str] = set()
        for j, upstream in enumerate(upstreams):
            if upstream == name:
                message = f"gateway {name!r} lists itself as an upstream; list engine nodes"
            elif upstream not in kinds:
                message = (
                    f"gateway {name!r} lists upstream {upstream!r}, which is not a node "
                    f"of this inventory (engine nodes: {have})"
                )
            elif kinds[upstream] == "gateway":
                message = (
                    f"gateway {name!r} lists upstream {upstream!r}, which is a gateway "
                    "itself; gateways are not chained: list its upstreams instead"
                )
            elif upstream in seen:
                message = f"gateway {name!r} lists upstream {upstream!r} twice; give it once"
            else:
                seen.add(upstream)
                continue
            problems.append((i, j, message))
    return problems


def _raw_upstream_problems(
    data: Mapping[str, Any], source: str, lines: Mapping[Loc, int]
) -> list[str]:
    """:func:`upstream_problems` in the raw YAML data, each at its ``upstreams`` entry's line.

    Malformed entries are skipped: validation reports them.
    """
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        return []
    entries = [_raw_gateway_entry(entry) for entry in nodes]
    problems = []
    for i, j, message in upstream_problems(entries):
        loc: Loc = ("nodes", i, "upstreams", j)
        line = _nearest_line(loc, lines)
        where = f"{source}:{line}" if line else source
        problems.append(f"{where} {_dotted(loc)}: {message}")
    return problems


def _raw_gateway_entry(entry: object) -> GatewayEntry:
    """A raw ``nodes[i]`` entry's (name, kind, upstreams); ``?``, ``engine`` or no upstreams
    where malformed (a list with a non-string item included: indices must match lines)."""
    if not isinstance(entry, Mapping):
        return "?", "engine", []
    name, kind, upstreams = entry.get("name"), entry.get("kind", "engine"), entry.get("upstreams")
    listed: list[str] = []
    if isinstance(upstreams, list) and all(isinstance(u, str) for u in upstreams):
        listed = list(upstreams)
    return (
        name if isinstance(name, str) else "?",
        kind if isinstance(kind, str) else "engine",
        listed,
    )


def _raw_key(entry: object) -> ContainerKey:
    """A raw ``nodes[i]`` entry's container key, or None when it has no well-formed one."""
    docker = entry.get("docker") if isinstance(entry, Mapping) else None
    if not isinstance(docker, Mapping) or not isinstance(docker.get("container"), str):
        return None
    host = docker.get("host", DockerRef.model_fields["host"].default)
    return _normalise(str(host), docker["container"])


def _duplicate_keys(node: yaml.Node | None, source: str, loc: Loc = (),
                    seen: set[int] | None = None) -> list[str]:
    """Every key given twice in one mapping, as ``FILE:LINE PATH: duplicate key …``.

    YAML's loader keeps the last value silently; here the second occurrence is an error
    naming the line of the first. Merge keys (``<<``) are not counted.
    """
    seen = set() if seen is None else seen
    if node is None or id(node) in seen:
        return []
    seen.add(id(node))
    problems: list[str] = []
    if isinstance(node, yaml.MappingNode):
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            line = key_node.start_mark.line + 1
            if key == "<<" and key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if key in first_line:
                problems.append(
                    f"{source}:{line} {_dotted((*loc, key))}: duplicate key {key!r} (first "
                    f"given at line {first_line[key]}); give each key once"
                )
            else:
                first_line[key] = line
            problems += _duplicate_keys(value_node, source, (*loc, key), seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            problems += _duplicate_keys(item, source, (*loc, i), seen)
    return problems


def _line_index(node: yaml.Node | None, loc: Loc = ()) -> dict[Loc, int]:
    """Map every key path in the YAML document to its 1-based line number."""
    index: dict[Loc, int] = {}
    if node is None:
        return index
    index[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            index.update(_line_index(value_node, (*loc, key)))
            index[(*loc, key)] = key_node.start_mark.line + 1  # the key's line, not the value's
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            index.update(_line_index(item, (*loc, i)))
    return index


def _format_errors(source: str, exc: ValidationError, lines: Mapping[Loc, int]) -> list[str]:
    problems = []
    for error in exc.errors(include_url=False):
        loc: Loc = tuple(error["loc"])
        line = _nearest_line(loc, lines)
        where = f"{source}:{line}" if line else source
        field = _dotted(loc) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            parent = _allowed_keys(loc[:-1])
            message = f"unknown key (allowed here: {parent})" if parent else "unknown key"
        elif error["type"] != "missing" and "input" in error and not isinstance(
            error["input"], Mapping | list
        ):  # a whole mapping (a cross-field check) says nothing the message does not
            message = f"{message} (got {_short(error['input'])})"
        problems.append(f"{where} {field}: {message}")
    return problems


def _nearest_line(loc: Loc, lines: Mapping[Loc, int]) -> int | None:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return None


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_MODELS_BY_PATH: dict[tuple[str, ...], type[BaseModel]] = {
    (): Inventory,
    ("prometheus",): PrometheusSettings,
    ("slo",): SLOSettings,
    ("nodes",): Node,
    ("nodes", "docker"): DockerRef,
    ("nodes", "prometheus"): PrometheusRef,
    ("nodes", "accepted_findings"): AcceptedFinding,
    ("serving_configs",): ServingConfig,
}


def _allowed_keys(parent: Loc) -> str:
    shape = tuple(p for p in parent if isinstance(p, str))
    if len(shape) == 2 and shape[0] == "serving_configs":
        shape = ("serving_configs",)
    model = _MODELS_BY_PATH.get(shape)
    if model is None:
        return ""
    return ", ".join(name for name in model.model_fields if name != "source")
