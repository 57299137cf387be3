"""A tiny Prometheus registry writing text exposition format 0.0.4 (stdlib only).

Output matches prometheus_client's: ``# HELP``/``# TYPE`` per family, counters named with
their ``_total`` suffix, histograms as cumulative ``_bucket{le=…}`` lines ending in
``+Inf`` followed by ``_count`` and ``_sum``, floats formatted like ``floatToGoString``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

Labels = tuple[str, ...]


def fmt_float(value: float) -> str:
    """Format a sample value or ``le`` bound the way prometheus_client does."""
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class Family:
    """One metric family: a name, a type, a help text and labelled samples."""

    def __init__(self, name: str, kind: str, doc: str, labelnames: Sequence[str]) -> None:
        self.name = name
        self.kind = kind
        self.doc = doc
        self.labelnames = tuple(labelnames)

    def header(self) -> str:
        return f"# HELP {self.name} {self.doc}\n# TYPE {self.name} {self.kind}\n"

    def lines(self) -> list[str]:  # pragma: no cover - overridden
        raise NotImplementedError


class Scalar(Family):
    """A counter or gauge: one float per label set."""

    def __init__(self, name: str, kind: str, doc: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, kind, doc, labelnames)
        self.values: dict[Labels, float] = {}

    def set(self, labels: Labels, value: float) -> None:
        self.values[labels] = float(value)

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def get(self, labels: Labels) -> float:
        return self.values.get(labels, 0.0)

    def lines(self) -> list[str]:
        return [
            f"{self.name}{_label_text(self.labelnames, lv)} {fmt_float(v)}\n"
            for lv, v in self.values.items()
        ]


class Histogram(Family):
    """Fixed buckets; ``observe`` is O(log buckets)."""

    def __init__(
        self, name: str, doc: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> None:
        super().__init__(name, "histogram", doc, labelnames)
        self.bounds = tuple(float(b) for b in buckets)
        if list(self.bounds) != sorted(set(self.bounds)):
            raise ValueError(f"{name}: buckets must be strictly increasing")
        self.state: dict[Labels, list[float]] = {}  # per-bucket counts + [+Inf, sum]

    def touch(self, labels: Labels) -> None:
        """Create the label set with zero counts (so the series exists before traffic)."""
        if labels not in self.state:
            self.state[labels] = [0.0] * (len(self.bounds) + 2)

    def observe(self, labels: Labels, value: float, count: int = 1) -> None:
        st = self.state.get(labels)
        if st is None:
            self.touch(labels)
            st = self.state[labels]
        st[bisect.bisect_left(self.bounds, value)] += count
        st[-1] += value * count

    def count(self, labels: Labels) -> float:
        st = self.state.get(labels)
        return sum(st[:-1]) if st else 0.0

    def lines(self) -> list[str]:
        out: list[str] = []
        for lv, st in self.state.items():
            running = 0.0
            for bound, c in zip((*self.bounds, math.inf), st[:-1], strict=True):
                running += c
                le = _label_text(self.labelnames, lv, f'le="{fmt_float(bound)}"')
                out.append(f"{self.name}_bucket{le} {fmt_float(running)}\n")
            plain = _label_text(self.labelnames, lv)
            out.append(f"{self.name}_count{plain} {fmt_float(running)}\n")
            out.append(f"{self.name}_sum{plain} {fmt_float(st[-1])}\n")
        return out


class Registry:
    def __init__(self) -> None:
        self.families: dict[str, Family] = {}

    def add(self, family: Family) -> Family:
        if family.name in self.families:
            raise ValueError(f"duplicate metric {family.name}")
        self.families[family.name] = family
        return family

    def counter(self, name: str, doc: str, labelnames: Sequence[str] = ()) -> Scalar:
        if not name.endswith("_total"):
            raise ValueError(f"counter {name} must end in _total (prometheus_client adds it)")
        fam = Scalar(name, "counter", doc, labelnames)
        self.add(fam)
        return fam

    def gauge(self, name: str, doc: str, labelnames: Sequence[str] = ()) -> Scalar:
        fam = Scalar(name, "gauge", doc, labelnames)
        self.add(fam)
        return fam

    def histogram(
        self, name: str, doc: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> Histogram:
        fam = Histogram(name, doc, labelnames, buckets)
        self.add(fam)
        return fam

    def render(self) -> str:
        parts: list[str] = []
        for fam in self.families.values():
            parts.append(fam.header())
            parts.extend(fam.lines())
        return "".join(parts)
