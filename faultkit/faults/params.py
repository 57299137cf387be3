"""Fault parameters: declared types, defaults and allowed ranges, checked before anything acts.

A fault class lists its parameters in ``PARAMS`` (name → :class:`Param`, or the short form
``(type, default)``). :func:`check_param` converts a given value (strings from the CLI are
parsed) and checks it; a bad value raises :class:`FaultParamError` naming the fault, the
parameter, the value as given and what is allowed — the CLI turns that into one line and
exit 2 before anything is touched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from faultkit.errors import FaultParamError

__all__ = ["Param", "ParamSpec", "as_param", "check_param"]


@dataclass(frozen=True, slots=True)
class Param:
    """One fault parameter: its type, its default and the values it may take.

    Numbers are bounded by ``gt``/``ge`` (lower, exclusive/inclusive) and ``lt``/``le``
    (upper); floats must also be finite (NaN and ±inf are refused). ``choices`` lists the
    allowed strings. ``check`` accepts or refuses anything else (e.g. a memory size) and
    ``hint`` then says what is allowed. ``None`` is accepted only when ``default`` is None
    (the parameter is optional). ``unit`` is shown after the bounds (``"req/s"``, ``"s"``).
    """

    type: type
    default: Any = None
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    choices: tuple[str, ...] = ()
    unit: str = ""
    check: Callable[[Any], bool] | None = None
    hint: str = ""

    def allowed(self) -> str:
        """What the parameter may be, e.g. ``"> 0 and ≤ 2000 req/s"`` or ``"one of a, b"``."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.type is bool:
            return "true or false"
        if self.hint:
            return self.hint
        bounds = [f"{sign} {_number(limit)}" for sign, limit in (
            (">", self.gt), ("≥", self.ge), ("<", self.lt), ("≤", self.le)) if limit is not None]
        if not bounds:
            return {int: "an integer", float: "a number"}.get(self.type, f"a {self.type.__name__}")
        return " and ".join(bounds) + (f" {self.unit}" if self.unit else "")

    def type_problem(self) -> str:
        """What to say when a value is not of the param's type (or not a finite number)."""
        noun = {int: "an integer", float: "a finite number"}.get(self.type)
        allowed = self.allowed()
        if noun is None or allowed in ("an integer", "a number"):
            return f"must be {noun or allowed}"
        return f"must be {noun}, {allowed}"

    def problem(self, value: Any) -> str | None:
        """None when ``value`` (already converted to ``type``) is allowed, else what is wrong."""
        if value is None:
            return None if self.default is None else f"must be {self.allowed()} (not None)"
        if self.type is float and not math.isfinite(value):
            return self.type_problem()
        if self.choices and value not in self.choices:
            return f"must be {self.allowed()}"
        if self.check is not None and not self.check(value):
            return f"must be {self.allowed()}"
        too_low = (self.gt is not None and not value > self.gt) or (
            self.ge is not None and not value >= self.ge)
        too_high = (self.lt is not None and not value < self.lt) or (
            self.le is not None and not value <= self.le)
        return f"must be {self.allowed()}" if too_low or too_high else None


def _number(value: float) -> str:
    """``2000`` for 2000.0, ``0.5`` for 0.5, never an exponent for whole numbers."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


#: param name → :class:`Param`, or the short form ``(type, default)`` (any value of the
#: type; floats finite). Strings from the CLI are converted to ``type``.
ParamSpec = dict[str, Param | tuple[type, Any]]


def as_param(spec: Param | tuple[type, Any]) -> Param:
    """A ``PARAMS`` entry as a :class:`Param` (the ``(type, default)`` form has no bounds)."""
    return spec if isinstance(spec, Param) else Param(spec[0], spec[1])


def _shown(value: Any) -> str:
    """A given value as the user typed it (``rate=0``, ``mode=bogus``)."""
    return value if isinstance(value, str) else repr(value)


def _convert(kind: type, value: Any) -> Any:
    """``value`` as ``kind``; raises ValueError when it is not one (strings are parsed)."""
    if value is None or (isinstance(value, kind) and not (kind is int and isinstance(value, bool))):
        return value
    if isinstance(value, str):
        if kind is bool:
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        return kind(value.strip())
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    raise ValueError(value)


def check_param(fault_kind: str, name: str, spec: Param, given: Any) -> Any:
    """``given`` converted to the param's type and checked against its allowed values.

    Raises :class:`FaultParamError` naming the fault, the parameter, the value as given and
    what is allowed: ``flood rate=0: must be > 0 and ≤ 2000 req/s``.
    """
    problem: str | None
    try:
        value = _convert(spec.type, given)
    except (TypeError, ValueError):
        value, problem = None, spec.type_problem()
    else:
        problem = spec.problem(value)
    if problem is not None:
        raise FaultParamError(
            f"{fault_kind} {name}={_shown(given)}: {problem}",
            param=name, value=given, allowed=spec.allowed(),
        )
    return value


def parse_params(fault_kind: str, spec: Mapping[str, Param],
                 given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overridden by ``given``, each converted and checked (before anything acts).

    Raises :class:`FaultParamError` for an unknown name or a value outside what the param
    allows.
    """
    unknown = sorted(set(given) - set(spec))
    if unknown:
        known = ", ".join(f"{k} ({p.allowed()})" for k, p in spec.items()) or "none"
        raise FaultParamError(
            f"fault {fault_kind!r} has no param {unknown[0]!r} (params: {known})",
            param=unknown[0], value=given[unknown[0]], allowed=", ".join(spec) or "none",
        )
    values = {name: p.default for name, p in spec.items()}
    for name, value in given.items():
        values[name] = check_param(fault_kind, name, spec[name], value)
    return values
