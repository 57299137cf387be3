"""LiteLLM's proxy config for one gateway node, built from typed inputs (a pure function).

:func:`litellm_config` returns the mapping LiteLLM reads from ``--config FILE`` (YAML;
:func:`render_yaml` writes it). One model alias (the gateway node's ``model``) is put on
every upstream, one *deployment* each:

* ``litellm_params.model`` is ``openai/<upstream's served model>`` with ``api_base``
  ``<upstream base_url>/v1``: LiteLLM then speaks plain OpenAI to it and forwards the
  model name unchanged (the upstreams are OpenAI-compatible engines);
* ``model_info.id`` is the upstream's *node name*, so the deployment id LiteLLM reports in
  the ``x-litellm-model-id`` response header and in its metrics' ``model_id`` label names
  the inventory node (docs/gateway.md says how this was checked);
* ``api_key`` comes from the environment variable the upstream names
  (``os.environ/NAME``, LiteLLM's own indirection), else a dummy: the key never enters
  the file.

``router_settings`` carries :class:`RouterPolicy` (its docstring says what each knob does,
as measured). With ``metrics`` the ``prometheus`` callback is enabled: the open-source
build then serves ``/metrics/`` (``/metrics`` redirects there; it needs
``prometheus_client``, which the ``proxy`` extra does not install), without a key when
``metrics_public`` (``require_auth_for_metrics_endpoint: false``) so that Prometheus can
scrape it.

Authentication: LiteLLM 1.108 refuses to start without a master key. With ``require_key``
(the default) the key comes from the proxy's environment (``LITELLM_MASTER_KEY``) and never
enters the file; clients send it as ``Authorization: Bearer …``. ``require_key=False``
sets ``dangerously_permit_weak_or_unset_master_key``: an open gateway, for a lab on
loopback only.

Telemetry, the spend log and the database stay off; nothing here makes LiteLLM reach
beyond the upstreams (the cost map is read locally when ``LITELLM_LOCAL_MODEL_COST_MAP``
is set: :func:`testbed.litellm_node.litellm_container_env`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from faultkit.inventory import Inventory, Node

#: LiteLLM's routing strategies that need no Redis and no cost data.
RoutingStrategy = Literal["simple-shuffle", "least-busy", "latency-based-routing"]

#: ``litellm.allowed_fails``: a router whose allowed_fails equals it ignores the setting.
LITELLM_DEFAULT_ALLOWED_FAILS = 3
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: What LiteLLM sends as the key to an upstream that needs none (openai's client wants one).
NO_KEY = "none"


@dataclass(frozen=True, slots=True)
class Upstream:
    """One engine behind the gateway, as the gateway reaches it.

    ``name``: the inventory node name (becomes the deployment id); ``base_url``: the
    engine's URL *as seen from the gateway* (``http://host:port``, without ``/v1``);
    ``model``: the name the engine serves; ``api_key_env``: the environment variable
    holding its key, in the gateway's environment, or None.
    """

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("an upstream needs a name")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"upstream {self.name!r}: base_url must be an http:// or https:// URL "
                f"(got {self.base_url!r})"
            )
        if not self.model.strip():
            raise ValueError(f"upstream {self.name!r}: model must not be empty")
        if self.api_key_env is not None and not _ENV_NAME.match(self.api_key_env):
            raise ValueError(
                f"upstream {self.name!r}: api_key_env must be an environment variable name "
                f"(got {self.api_key_env!r})"
            )


@dataclass(frozen=True, slots=True)
class RouterPolicy:
    """How LiteLLM's router retries and cools down upstreams (``router_settings``).

    * ``num_retries``: attempts after the first (0 = none). Each attempt picks a deployment
      anew, so a retry may land on the upstream that just failed (measured: a request lost
      after three attempts on the dead upstream). A stream that has sent its first byte is
      never retried.
    * ``allowed_fails``: a deployment is cooled down at its ``allowed_fails + 1``-th failure
      (LiteLLM keeps the count for ``cooldown_s``). **3 is LiteLLM's default and
      reads as "not set"**: the router then cools down only above 50 % failures with at
      least 5 requests in the minute, so 3 is refused here.
    * ``cooldown_s``: seconds a cooled-down deployment gets no traffic; then it is sent live
      requests again (no probe of its own), and cooled down again if they fail.
    * ``timeout_s``: seconds one attempt may take.
    * ``routing_strategy``: how a deployment is picked among those not cooled down.
    """

    num_retries: int = 2
    allowed_fails: int = 1
    cooldown_s: float = 10.0
    timeout_s: float = 30.0
    routing_strategy: RoutingStrategy = "simple-shuffle"

    def __post_init__(self) -> None:
        if self.num_retries < 0:
            raise ValueError(f"num_retries must be ≥ 0 (got {self.num_retries})")
        if self.allowed_fails < 0:
            raise ValueError(f"allowed_fails must be ≥ 0 (got {self.allowed_fails})")
        if self.allowed_fails == LITELLM_DEFAULT_ALLOWED_FAILS:
            raise ValueError(
                f"allowed_fails {LITELLM_DEFAULT_ALLOWED_FAILS} is LiteLLM's default, which its "
                "router reads as unset (it then cools down by failure rate instead): choose "
                "another value"
            )
        for name in ("cooldown_s", "timeout_s"):
            value = getattr(self, name)
            if not value > 0 or value == float("inf"):
                raise ValueError(f"{name} must be a finite number > 0 (got {value})")


@dataclass(frozen=True, slots=True)
class GatewayVariant:
    """One named way to configure a gateway over the same upstreams (a serving config of
    the gateway node): its router ``policy``, and ``upstream_urls``, upstream node name →
    the URL the config names for it instead of its real address (a known-bad config's
    wrong URL)."""

    policy: RouterPolicy = field(default_factory=RouterPolicy)
    upstream_urls: Mapping[str, str] = field(default_factory=dict)

    def address(self, default: Callable[[Node], str]) -> Callable[[Node], str]:
        """``default`` with this variant's ``upstream_urls`` put first."""
        return lambda node: self.upstream_urls.get(node.name) or default(node)


@dataclass(frozen=True, slots=True)
class GatewaySpec:
    """One gateway: the model ``alias`` clients ask for, the upstreams it is put on, the
    router policy, whether ``/metrics/`` is served (and without a key), and whether
    clients need the master key."""

    alias: str
    upstreams: tuple[Upstream, ...]
    policy: RouterPolicy = field(default_factory=RouterPolicy)
    metrics: bool = True
    metrics_public: bool = True
    require_key: bool = True

    def __post_init__(self) -> None:
        if not self.alias.strip():
            raise ValueError("the gateway's model alias must not be empty")
        if not self.upstreams:
            raise ValueError("a gateway needs at least one upstream")
        names = [u.name for u in self.upstreams]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"upstream names must be unique (repeated: {', '.join(repeated)})")


def litellm_config(spec: GatewaySpec) -> dict[str, Any]:
    """LiteLLM's proxy config for ``spec`` (the mapping ``--config`` reads)."""
    model_list = [
        {
            "model_name": spec.alias,
            "litellm_params": {
                "model": f"openai/{upstream.model}",
                "api_base": upstream.base_url.rstrip("/") + "/v1",
                "api_key": (
                    f"os.environ/{upstream.api_key_env}" if upstream.api_key_env else NO_KEY
                ),
            },
            "model_info": {"id": upstream.name},
        }
        for upstream in spec.upstreams
    ]
    policy = spec.policy
    litellm_settings: dict[str, Any] = {
        "telemetry": False,
        "drop_params": False,  # a parameter the upstream rejects is its 400, not dropped
    }
    if spec.metrics:
        litellm_settings["callbacks"] = ["prometheus"]
        litellm_settings["require_auth_for_metrics_endpoint"] = not spec.metrics_public
    general_settings: dict[str, Any] = {"disable_spend_logs": True}
    if not spec.require_key:
        general_settings["dangerously_permit_weak_or_unset_master_key"] = True
    return {
        "model_list": model_list,
        "router_settings": {
            "routing_strategy": policy.routing_strategy,
            "num_retries": policy.num_retries,
            "allowed_fails": policy.allowed_fails,
            "cooldown_time": policy.cooldown_s,
            "timeout": policy.timeout_s,
        },
        "litellm_settings": litellm_settings,
        "general_settings": general_settings,
    }


def render_yaml(config: dict[str, Any]) -> str:
    """``config`` as the YAML text LiteLLM reads (keys in the order built)."""
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def gateway_spec(
    inventory: Inventory,
    gateway: Node,
    *,
    policy: RouterPolicy | None = None,
    address: Callable[[Node], str] | None = None,
    metrics: bool = True,
    require_key: bool = True,
) -> GatewaySpec:
    """The :class:`GatewaySpec` of an inventory's gateway node.

    The alias is the gateway's ``model``; each upstream is the node its ``upstreams``
    names, with that node's ``model`` and ``api_key_env``. ``address(node)`` gives the URL
    at which the gateway reaches an upstream (default: the node's ``base_url``, right when
    the gateway runs on the host; a container on the lab network needs the upstream's
    container address instead). Raises ValueError for a node that is not a gateway.
    """
    if gateway.kind != "gateway":
        raise ValueError(f"node {gateway.name!r} is not a gateway (kind: {gateway.kind})")
    reach = address or (lambda node: node.base_url)
    upstreams = tuple(
        Upstream(
            name=node.name, base_url=reach(node), model=node.model, api_key_env=node.api_key_env
        )
        for node in _nodes(inventory, gateway.upstreams)
    )
    return GatewaySpec(
        alias=gateway.model,
        upstreams=upstreams,
        policy=policy or RouterPolicy(),
        metrics=metrics,
        require_key=require_key,
    )


def _nodes(inventory: Inventory, names: Iterable[str]) -> list[Node]:
    return [inventory.node(name) for name in names]
