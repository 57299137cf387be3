"""A fake fault backend for unit tests: a dict "world" and an undo op that restores keys in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from faultkit.faults import undo
from faultkit.faults.base import Fault
from faultkit.faults.params import ParamSpec
from faultkit.inventory import Node

#: the fake system the fake fault breaks: key → value; "ok" means healthy
WORLD: dict[str, str] = {}


@undo.op("fake_restore")
def _fake_restore(step: Mapping[str, Any]) -> str:
    key = str(step["key"])
    if WORLD.get(key) == step["value"]:
        return f"{key} already {step['value']}"
    WORLD[key] = str(step["value"])
    return f"restored {key}"


class FakeFault(Fault):
    """Sets WORLD[key] = 'broken'; optionally fails halfway through apply."""

    kind: ClassVar[str] = "pause"  # reuse a real kind so the allowlist logic applies
    PARAMS: ClassVar[ParamSpec] = {"key": (str, "a"), "fail_apply": (bool, False)}
    acts_on_container: ClassVar[bool] = False  # it acts on WORLD, never on a container

    async def _prepare(self) -> list[dict[str, Any]]:
        key = self.params["key"]
        return [{"op": "fake_restore", "key": key, "value": WORLD.get(key, "ok")}]

    async def _apply(self) -> None:
        WORLD[self.params["key"]] = "broken"
        if self.params["fail_apply"]:
            raise RuntimeError("apply failed halfway")


def node(name: str = "n1", **kw: Any) -> Node:
    values: dict[str, Any] = {
        "name": name, "engine": "sim", "personality": "vllm",
        "base_url": "http://127.0.0.1:9", "model": "m", "faults": ["*"],
    }
    values.update(kw)
    return Node(**values)
