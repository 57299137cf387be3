"""The inventory's pydantic models: what a valid inventory is.

Every model forbids unknown keys and is frozen. Cross-field rules live in validators:
a gateway (``kind: gateway``) has an engine of :data:`GATEWAY_ENGINES` and upstreams, an
engine node has neither; :class:`Inventory` checks node names are unique, no two nodes
name one container (:mod:`.topology`), every named serving config exists, a ``sim`` node
has a personality and node ``slo`` overrides name known keys. The first broken rule is
raised as a ``ValueError`` (pydantic reports it); lookups that fail raise
:class:`~faultkit.errors.InventoryError`. A node's own models are in :mod:`.node`, the
settings in :mod:`.settings`.

:data:`MODELS_BY_PATH` says which model validates each key path (for "allowed here" in
error messages, :mod:`.problems`).
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    model_validator,
)

from faultkit.errors import InventoryError
from faultkit.inventory.node import (
    AcceptedFinding,
    DockerRef,
    Node,
    PrometheusRef,
)
from faultkit.inventory.problems import format_errors
from faultkit.inventory.settings import (
    AlertmanagerSettings,
    FrozenModel,
    PrometheusSettings,
    ServingConfig,
    SLOSettings,
)
from faultkit.inventory.topology import (
    ContainerKey,
    clash_message,
    container_clashes,
    normalise,
    upstream_problems,
)


class Inventory(FrozenModel):
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

    def speculation_change(self, node: Node, config: str) -> SpeculationChange | None:
        """What rolling serving config ``config`` onto ``node`` does to its speculative
        decoding: (the current config's, the candidate's) when they differ, else ``None``.
        A node without a current config reads as not speculating. Such a candidate is
        judged per workload class (docs/gate.md, "Speculative decoding";
        ``scenarios/test_speculative.py``)."""
        current = self.serving_configs.get(node.serving_config or "")
        before = current.speculative if current is not None else None
        after = self.serving_config(config).speculative
        return None if before == after else SpeculationChange(before, after)


class SpeculationChange(NamedTuple):
    """A node's speculative decoding before and after a rollout (``None``: off)."""

    current: str | None
    candidate: str | None


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
