"""Read an inventory file and validate it, reporting every problem at its line.

YAML is read with ``yaml.safe_load`` semantics. Before pydantic validates the data, the
raw document is checked for what YAML or pydantic would hide or report at the wrong
place: a key given twice in one mapping (the second is an error naming the first's line),
two nodes naming one container, and broken gateway ``upstreams`` (each at its own line).
Any problem raises :class:`~faultkit.errors.InventoryError` listing all of them, each as
``FILE:LINE FIELD.PATH: what is wrong`` (:mod:`.problems`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from faultkit.errors import InventoryError
from faultkit.inventory.models import MODELS_BY_PATH, Inventory
from faultkit.inventory.node import DockerRef
from faultkit.inventory.problems import Loc, dotted, format_errors, nearest_line
from faultkit.inventory.topology import (
    ContainerKey,
    GatewayEntry,
    clash_message,
    container_clashes,
    normalise,
    upstream_problems,
)


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory file; raise :class:`InventoryError` listing every problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(str(path), [
            f"{path}: no such inventory file (name one with --inventory or "
            "$FAULTKIT_INVENTORY, or keep one as ./inventory.yaml: docs/inventory.md)"]) from None
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
        raise InventoryError(source, format_errors(source, exc, lines, MODELS_BY_PATH)) from None
    except (TypeError, ValueError) as exc:  # e.g. unhashable keys deep inside the document
        raise InventoryError(source, [f"{source}: invalid inventory: {exc}"]) from None
    return inventory


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
        line = nearest_line(loc, lines)
        where = f"{source}:{line}" if line else source
        problems.append(f"{where} {dotted(loc)}: "
                        + clash_message(names[first], names[later], keys[later]))
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
        line = nearest_line(loc, lines)
        where = f"{source}:{line}" if line else source
        problems.append(f"{where} {dotted(loc)}: {message}")
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
    return normalise(str(host), docker["container"])


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
                    f"{source}:{line} {dotted((*loc, key))}: duplicate key {key!r} (first "
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
