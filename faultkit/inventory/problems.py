"""Where an inventory problem is, and how it is worded.

Every problem reads ``FILE:LINE FIELD.PATH: what is wrong (got VALUE; allowed: …)``. A
:data:`Loc` is a path into the YAML document (keys and list indices); a line index maps
each path to its 1-based line. :func:`format_errors` turns a pydantic ``ValidationError``
into such lines; which keys are allowed where comes from the caller's table of models by
key path (:data:`faultkit.inventory.models.MODELS_BY_PATH`), so this module depends on no
model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

Loc = tuple[str | int, ...]
#: the pydantic model that validates each key path (list indices and config names left out)
ModelsByPath = Mapping[tuple[str, ...], type[BaseModel]]


def format_errors(
    source: str, exc: ValidationError, lines: Mapping[Loc, int], models: ModelsByPath
) -> list[str]:
    """Each error of ``exc`` as ``FILE:LINE FIELD.PATH: message``, at the nearest line of
    ``lines`` (``source`` alone when none); an unknown key lists the keys ``models`` allows
    there."""
    problems = []
    for error in exc.errors(include_url=False):
        loc: Loc = tuple(error["loc"])
        line = nearest_line(loc, lines)
        where = f"{source}:{line}" if line else source
        field = dotted(loc) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            parent = _allowed_keys(loc[:-1], models)
            message = f"unknown key (allowed here: {parent})" if parent else "unknown key"
        elif error["type"] != "missing" and "input" in error and not isinstance(
            error["input"], Mapping | list
        ):  # a whole mapping (a cross-field check) says nothing the message does not
            message = f"{message} (got {_short(error['input'])})"
        problems.append(f"{where} {field}: {message}")
    return problems


def nearest_line(loc: Loc, lines: Mapping[Loc, int]) -> int | None:
    """The line of ``loc``, or of its nearest ancestor that has one; None for none."""
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return None


def dotted(loc: Loc) -> str:
    """``loc`` as a field path: ``nodes[0].docker.container``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _allowed_keys(parent: Loc, models: ModelsByPath) -> str:
    shape = tuple(p for p in parent if isinstance(p, str))
    if len(shape) == 2 and shape[0] == "serving_configs":
        shape = ("serving_configs",)
    model = models.get(shape)
    if model is None:
        return ""
    return ", ".join(name for name in model.model_fields if name != "source")
