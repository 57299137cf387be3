"""Load figures computed from a ledger *file*, column by column, in bounded memory.

:func:`summarize_file` returns the same :class:`~faultkit.load.stats.LoadSummary` as
``stats.summarize(read_ledger(path), …)`` — same definitions (docs/definitions.md,
"Latency"), same numbers — without holding the records: it reads the columns it needs,
one record batch at a time, and computes each distribution with
:class:`~faultkit.load.quantiles.StreamingDistribution`. Counts, sums, min, max and every
percentile are exact; a ``mean`` may differ in the last bits (see ``quantiles``). The file
is read 1 to 4 times (2 or 3 for a soak-sized ledger); memory does not grow with its
length.

:func:`window_figures` gives, for arbitrary windows, the client-side SLIs that
``slo.measure.window_slis`` computes from records (requests belong to a window by their
arrival, ``t_scheduled`` else ``t_invoke``); :func:`fixed_windows` cuts a run into equal
windows for a soak. Windows are computed in groups of at most :data:`WINDOW_ROWS` requests,
one pass over the file per group.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from faultkit.load.ledgerfile import iter_batches
from faultkit.load.quantiles import StreamingDistribution, exact_percentiles
from faultkit.load.stats import LoadSummary
from faultkit.model.windows import WindowSLIs

__all__ = [
    "WINDOW_ROWS",
    "fixed_windows",
    "summarize_file",
    "window_figures",
]

F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]

#: Windows are computed this many requests at a time (~40 bytes each).
WINDOW_ROWS = 4_000_000

_DISTRIBUTIONS = ("ttft", "tpot", "itl", "e2e", "user_ttft", "user_e2e")
_SCALARS = ("t_invoke", "t_end", "t_first_token", "t_last_token", "t_scheduled")
_COLUMNS = ("status", *_SCALARS, "output_tokens")


def _f64(batch: pa.RecordBatch, name: str) -> F64:
    """A float column as float64 with NaN for null."""
    out: F64 = batch.column(name).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    return out


def _ints(batch: pa.RecordBatch, name: str) -> tuple[npt.NDArray[np.int64], B]:
    """An int column as int64 (null → 0) and its validity."""
    col = batch.column(name)
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    values = pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return values, valid


class _Rows:
    """The per-request quantities of one batch, each computed once when first asked for."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self.batch = batch
        self._cache: dict[str, Any] = {}

    @property
    def ok(self) -> B:
        """``status == "ok"`` per row."""
        if "ok" not in self._cache:
            status = self.batch.column("status")
            self._cache["ok"] = pc.equal(status, "ok").to_numpy(zero_copy_only=False)
        value: B = self._cache["ok"]
        return value

    def col(self, name: str) -> F64:
        if name not in self._cache:
            self._cache[name] = _f64(self.batch, name)
        value: F64 = self._cache[name]
        return value

    def arrival(self) -> F64:
        sched, invoke = self.col("t_scheduled"), self.col("t_invoke")
        out: F64 = np.where(np.isnan(sched), invoke, sched)
        return out

    def ttft(self) -> F64:
        """TTFT of every row (NaN without a first token)."""
        return self.col("t_first_token") - self.col("t_invoke")

    def user_ttft(self) -> F64:
        return self.col("t_first_token") - self.arrival()

    def e2e(self) -> F64:
        return self.col("t_end") - self.col("t_invoke")

    def user_e2e(self) -> F64:
        return self.col("t_end") - self.arrival()

    def tpot(self) -> F64:
        """TPOT of every row (NaN for ≤ 1 token or a missing token time)."""
        n, valid = _ints(self.batch, "output_tokens")
        span = self.col("t_last_token") - self.col("t_first_token")
        with np.errstate(divide="ignore", invalid="ignore"):
            out: F64 = np.where(valid & (n > 1), span / (n - 1).astype(np.float64), np.nan)
        return out

    def itl_ok(self) -> F64:
        """Every ITL gap of the ok rows, flattened (row order)."""
        itl = self.batch.column("itl_s")
        flat: F64 = itl.flatten().to_numpy(zero_copy_only=False)
        lengths = pc.list_value_length(itl).to_numpy(zero_copy_only=False)
        if not lengths[~self.ok].any():  # failed requests rarely carry gaps
            return flat
        keep: F64 = flat[np.repeat(self.ok, lengths)]
        return keep

    def metric(self, name: str) -> F64:
        """The named distribution's values in this batch (ok rows, defined values only)."""
        if name == "itl":
            return self.itl_ok()
        values: F64 = getattr(self, name)()[self.ok]
        defined: F64 = values[~np.isnan(values)]
        return defined


def _columns_for(names: Sequence[str]) -> list[str]:
    cols = {"status"}
    for name in names:
        if name == "itl":
            cols.add("itl_s")
        else:
            cols.update(_SCALARS)
            cols.add("output_tokens")
    return sorted(cols)


def summarize_file(
    path: Path,
    *,
    duration_s: float | None = None,
    ttft_max_s: float | None = None,
    tpot_max_s: float | None = None,
    e2e_max_s: float | None = None,
    problems: list[str] | None = None,
) -> LoadSummary:
    """``stats.summarize`` of the ledger at ``path`` (file or run directory), from its columns.

    Arguments and result as :func:`faultkit.load.stats.summarize`. A torn last batch (a
    crash) is skipped and described in ``problems``.
    """
    limits = {
        name: value
        for name, value in (("ttft_s", ttft_max_s), ("tpot_s", tpot_max_s), ("e2e_s", e2e_max_s))
        if value is not None
    }
    dists = {name: StreamingDistribution() for name in _DISTRIBUTIONS}
    columns = [*_COLUMNS, "error_class", "prompt_tokens", "itl_s"]
    acc = _Totals()
    for dist in dists.values():
        dist.begin_pass()
    for batch in iter_batches(path, columns, problems=problems):
        rows = _Rows(batch)
        acc.add(rows, limits)
        for name, dist in dists.items():
            dist.feed(rows.metric(name))
    for dist in dists.values():
        dist.end_pass()
    while pending := [name for name, d in dists.items() if d.needs_pass]:
        for name in pending:
            dists[name].begin_pass()
        for batch in iter_batches(path, _columns_for(pending)):
            rows = _Rows(batch)
            for name in pending:
                dists[name].feed(rows.metric(name))
        for name in pending:
            dists[name].end_pass()
    return acc.summary(duration_s, limits, {name: d.result() for name, d in dists.items()})


class _Totals:
    """The counts and sums of :func:`summarize_file`'s first pass."""

    def __init__(self) -> None:
        self.requests = self.ok = self.failed = self.unknown = self.good = 0
        self.out_tokens = self.prompt_tokens = self.prompt_known = 0
        self.t_first = math.inf
        self.t_last = -math.inf
        self.errors: Counter[str] = Counter()

    def add(self, rows: _Rows, limits: dict[str, float]) -> None:
        batch, ok = rows.batch, rows.ok
        if batch.num_rows == 0:
            return
        self.requests += batch.num_rows
        self.ok += int(ok.sum())
        status = batch.column("status")
        self.failed += int(pc.sum(pc.equal(status, "fail")).as_py() or 0)
        self.unknown += int(pc.sum(pc.equal(status, "unknown")).as_py() or 0)
        failed = pc.fill_null(batch.column("error_class").filter(pa.array(~ok)), "other")
        failed = pc.if_else(pc.equal(failed, ""), "other", failed)  # `error_class or "other"`
        for item in pc.value_counts(failed).to_pylist():
            self.errors[item["values"]] += item["counts"]
        self.t_first = min(self.t_first, float(np.min(rows.col("t_invoke"))))
        self.t_last = max(self.t_last, float(np.max(rows.col("t_end"))))
        tokens, _ = _ints(batch, "output_tokens")
        self.out_tokens += int(tokens[ok].sum())
        prompt, known = _ints(batch, "prompt_tokens")
        self.prompt_tokens += int(prompt[ok & known].sum())
        self.prompt_known += int((ok & known).sum())
        self.good += int(_meets(rows, limits)[ok].sum())

    def summary(
        self, duration_s: float | None, limits: dict[str, float], dists: dict[str, Any]
    ) -> LoadSummary:
        n = self.requests
        if duration_s is None:
            duration_s = self.t_last - self.t_first if n else 0.0
        span = duration_s

        def per_s(count: int) -> float:
            return count / span if span > 0 else 0.0

        return LoadSummary(
            requests=n,
            ok=self.ok,
            failed=self.failed,
            unknown=self.unknown,
            duration_s=duration_s,
            ttft=dists["ttft"],
            tpot=dists["tpot"],
            itl=dists["itl"],
            e2e=dists["e2e"],
            request_rate_rps=per_s(self.ok),
            output_token_rate_tps=per_s(self.out_tokens),
            input_token_rate_tps=per_s(self.prompt_tokens) if self.prompt_known else None,
            total_output_tokens=self.out_tokens,
            error_rate=(self.failed + self.unknown) / n if n else 0.0,
            errors_by_class=dict(sorted(self.errors.items())),
            goodput_rps=per_s(self.good),
            goodput_ratio=self.good / n if n else 0.0,
            thresholds=limits,
            user_ttft=dists["user_ttft"],
            user_e2e=dists["user_e2e"],
            shed_client=self.errors.get("shed_client", 0),
            client_exhausted=self.errors.get("client_exhausted", 0),
        )


def _meets(rows: _Rows, limits: dict[str, float]) -> B:
    """``stats._meets`` per row: no token fails a TTFT limit; no TPOT passes a TPOT limit."""
    good: B = np.ones(rows.batch.num_rows, dtype=bool)
    if "ttft_s" in limits:
        ttft = rows.ttft()
        good &= ~np.isnan(ttft) & (ttft <= limits["ttft_s"])
    if "tpot_s" in limits:
        tpot = rows.tpot()
        good &= np.isnan(tpot) | (tpot <= limits["tpot_s"])
    if "e2e_s" in limits:
        good &= ~(rows.e2e() > limits["e2e_s"])
    return good


# ---------------------------------------------------------------------- windows


_WINDOW_FIELDS = ("arrival", "ok", "ttft", "user_ttft", "tpot", "e2e", "tokens")


def _window_columns(batch: pa.RecordBatch) -> dict[str, npt.NDArray[Any]]:
    rows = _Rows(batch)
    tokens, _ = _ints(batch, "output_tokens")
    return {
        "arrival": rows.arrival(),
        "ok": rows.ok,
        "ttft": rows.ttft(),
        "user_ttft": rows.user_ttft(),
        "tpot": rows.tpot(),
        "e2e": rows.e2e(),
        "tokens": tokens,
    }


def _arrivals(path: Path) -> Iterator[F64]:
    for batch in iter_batches(path, ["t_scheduled", "t_invoke"]):
        yield _Rows(batch).arrival()


def window_figures(path: Path, bounds: Sequence[tuple[float, float]]) -> list[WindowSLIs]:
    """The SLIs of each ``(start, end)`` window of the ledger at ``path``, in order given."""
    if not bounds:
        return []
    starts = np.array([b[0] for b in bounds], dtype=np.float64)
    ends = np.array([b[1] for b in bounds], dtype=np.float64)
    counts = np.zeros(len(bounds), dtype=np.int64)
    for arrival in _arrivals(path):
        ordered = np.sort(arrival)
        counts += np.searchsorted(ordered, ends, "left") - np.searchsorted(ordered, starts, "left")
    out: dict[int, WindowSLIs] = {}
    for group in _groups(np.argsort(starts, kind="stable"), counts):
        lo, hi = float(starts[group].min()), float(ends[group].max())
        parts: dict[str, list[npt.NDArray[Any]]] = {k: [] for k in _WINDOW_FIELDS}
        for batch in iter_batches(path, list(_COLUMNS)):
            cols = _window_columns(batch)
            keep = (cols["arrival"] >= lo) & (cols["arrival"] < hi)
            for key in _WINDOW_FIELDS:
                parts[key].append(cols[key][keep])
        data = {k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}
        order = np.argsort(data["arrival"], kind="stable")
        data = {k: v[order] for k, v in data.items()}
        for i in group:
            lo_i, hi_i = np.searchsorted(data["arrival"], [starts[i], ends[i]], "left")
            rows = {k: v[lo_i:hi_i] for k, v in data.items()}
            out[int(i)] = _one_window(rows, float(starts[i]), float(ends[i]))
    return [out[i] for i in range(len(bounds))]


def _groups(order: npt.NDArray[np.intp], counts: npt.NDArray[np.int64]) -> Iterator[list[int]]:
    """Consecutive windows (by start) in groups of at most WINDOW_ROWS requests (≥ 1 each)."""
    group: list[int] = []
    size = 0
    for i in order:
        if group and size + counts[i] > WINDOW_ROWS:
            yield group
            group, size = [], 0
        group.append(int(i))
        size += int(counts[i])
    if group:
        yield group


def _one_window(data: dict[str, npt.NDArray[Any]], start: float, end: float) -> WindowSLIs:
    """One window's SLIs from its requests' columns (every row arrived in the window)."""
    good = data["ok"]
    requests, ok = len(good), int(good.sum())

    def pcts(name: str, qs: Sequence[float]) -> list[float | None]:
        values = data[name][good]
        return exact_percentiles(values[~np.isnan(values)], qs)

    ttft, user, e2e = (pcts(n, (50, 95, 99)) for n in ("ttft", "user_ttft", "e2e"))
    tpot = pcts("tpot", (50, 95))
    span = end - start
    tokens = int(data["tokens"][good].sum())
    return WindowSLIs(
        start=start,
        end=end,
        requests=requests,
        ok=ok,
        failed=requests - ok,
        error_ratio=(requests - ok) / requests if requests else None,
        ttft_p50_s=ttft[0],
        ttft_p95_s=ttft[1],
        ttft_p99_s=ttft[2],
        user_ttft_p50_s=user[0],
        user_ttft_p95_s=user[1],
        user_ttft_p99_s=user[2],
        tpot_p50_s=tpot[0],
        tpot_p95_s=tpot[1],
        e2e_p50_s=e2e[0],
        e2e_p95_s=e2e[1],
        e2e_p99_s=e2e[2],
        output_tokens_per_s=tokens / span if span > 0 and ok else None,
    )


def fixed_windows(
    path: Path, width_s: float, *, origin: float | None = None
) -> list[WindowSLIs]:
    """Equal windows of ``width_s`` seconds from ``origin`` (default: the first arrival)
    to past the last arrival: a soak's SLIs over time."""
    if not width_s > 0:
        raise ValueError(f"window width must be > 0 s (got {width_s})")
    first, last = math.inf, -math.inf
    for arrival in _arrivals(path):
        if len(arrival):
            first, last = min(first, float(arrival.min())), max(last, float(arrival.max()))
    if first == math.inf:
        return []
    t0 = first if origin is None else origin
    n = max(1, math.floor((last - t0) / width_s) + 1)
    bounds = [(t0 + k * width_s, t0 + (k + 1) * width_s) for k in range(n)]
    return window_figures(path, bounds)
