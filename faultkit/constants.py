"""Facts that several packages share, each stated once: Docker labels, the local Docker
engine, and the faultkit home directory.

Labels mark what the harness created or changed (see the safety model in
docs/architecture.md): ``testbed down`` and the tests remove exactly what carries
:data:`LABEL_OWNER`, never anything found by name.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Every container and network the harness creates carries this label; its value says what
#: created it (``testbed``, ``tests``).
LABEL_OWNER = "faultkit.owner"
#: The inventory node a container serves.
LABEL_NODE = "faultkit.node"
#: The serving config (inventory name) a container runs; set by a rollout.
LABEL_SERVING_CONFIG = "faultkit.serving-config"
#: A hash of the config a container was created from (:func:`faultkit.inventory.config_hash`);
#: the testbed recreates the container when it changes, and a rollout drops it.
LABEL_CONFIG_HASH = "faultkit.config-hash"
#: A hash of what went into a testbed image (its package list).
LABEL_SPEC = "faultkit.spec"

#: The Docker engine on this machine: the default ``docker.host`` of an inventory node.
LOCAL_DOCKER = "unix:///var/run/docker.sock"

#: The environment variable naming faultkit's home directory (journal, testbed caches).
HOME_ENV = "FAULTKIT_HOME"


def faultkit_home() -> Path:
    """``$FAULTKIT_HOME``, or ``~/.cache/faultkit`` when it is unset or empty.

    Not created here: each user creates what it needs below it (the journal with its own
    permissions).
    """
    env = os.environ.get(HOME_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "faultkit"


#: The alerts ``faultkit rules`` writes for every scraped node (docs/slo.md): the names an
#: inventory's ``prometheus.alert_for`` and ``faultkit rules --for`` may set a ``for:`` on
FAULTKIT_ALERTS: tuple[str, ...] = (
    "FaultkitNodeDown", "FaultkitNodeRestarted", "FaultkitEngineStalled",
    "FaultkitMetricsAbsent", "FaultkitErrorRatioHigh", "FaultkitSLOBurn",
)

#: The Prometheus job of the generation probe (a blackbox exporter module that asks each
#: node for one token; docs/slo.md, "A stalled engine"): its series carry ``node=<name>``,
#: and ``FaultkitEngineStalled`` reads a probe that got no answer as a request left waiting
GENERATE_PROBE_JOB = "faultkit-generate-probe"
