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

The package's modules: :mod:`.models` (:class:`Inventory`, the whole file), :mod:`.node`
(a node's models), :mod:`.settings` (objectives, serving configs, Prometheus,
Alertmanager), :mod:`.loading` (:func:`load_inventory`, :func:`parse_inventory`),
:mod:`.problems` (where a problem is and how it is worded), :mod:`.topology` (container
clashes, gateway upstreams) and :mod:`.hashing` (:func:`config_hash`). Import from
``faultkit.inventory``.
"""

from __future__ import annotations

from faultkit.inventory.hashing import config_hash
from faultkit.inventory.loading import load_inventory, parse_inventory
from faultkit.inventory.models import Inventory
from faultkit.inventory.node import (
    GATEWAY_ENGINES,
    AcceptedFinding,
    DockerRef,
    Engine,
    Node,
    NodeKind,
    PrometheusRef,
)
from faultkit.inventory.settings import (
    AlertmanagerSettings,
    PrometheusSettings,
    RestartPolicy,
    ServingConfig,
    SLOSettings,
)
from faultkit.inventory.topology import (
    ContainerKey,
    GatewayEntry,
    container_clashes,
    upstream_problems,
)

__all__ = [
    "GATEWAY_ENGINES",
    "AcceptedFinding",
    "AlertmanagerSettings",
    "ContainerKey",
    "DockerRef",
    "Engine",
    "GatewayEntry",
    "Inventory",
    "Node",
    "NodeKind",
    "PrometheusRef",
    "PrometheusSettings",
    "RestartPolicy",
    "SLOSettings",
    "ServingConfig",
    "config_hash",
    "container_clashes",
    "load_inventory",
    "parse_inventory",
    "upstream_problems",
]
