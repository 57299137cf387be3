"""The inventory the CLI-level unit tests write to a file: one llama.cpp node ``n`` on
container ``faultkit-test-n`` (nothing real answers at its base_url), every fault allowed,
serving config ``good``."""

from __future__ import annotations

_ONE_NODE = """\
nodes:
  - name: n
    engine: llamacpp
    base_url: http://127.0.0.1:9
    model: m
    docker: {container: faultkit-test-n}
    serving_config: good
    faults: ["*"]
serving_configs:
  good: {image: img}
"""


def one_node_inventory(**more_configs: str) -> str:
    """The YAML text; ``more_configs`` adds serving configs by name → image."""
    return _ONE_NODE + "".join(f"  {name}: {{image: {image}}}\n"
                               for name, image in more_configs.items())
