"""Cross-node checks of an inventory: container clashes and gateway upstreams.

Both work on plain tuples, so the same check serves the validated models
(:class:`faultkit.inventory.models.Inventory`) and the raw YAML data, where each problem is
reported at its own line (:mod:`faultkit.inventory.loading`). One container on one Docker
host is one node; a gateway's upstreams are other engine nodes of the same inventory,
each listed once.
"""

from __future__ import annotations

#: (Docker host, container name) of a node; None for a node without Docker access
ContainerKey = tuple[str, str] | None


def normalise(host: str, container: str) -> tuple[str, str]:
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


def clash_message(first: str, second: str, key: ContainerKey) -> str:
    host, container = key or ("?", "?")
    return (
        f"node {second!r} names container {container!r} on {host}, which node {first!r} "
        "already names; one container must be one node (else a fault refused on one name "
        "could reach it through the other): remove one of them"
    )


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
