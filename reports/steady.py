"""The gate's steady-state table for gate.md, from gate.json ``steady_state``.

``faultkit gate`` measures the node under the scenarios' background load, no fault, on the
current config and on the candidate, and compares them (``faultkit.gate.steady``).
This turns what it recorded into display cells. Figure cells are formatted here from the
numbers in the file, never copied from its text; text (config names, verdict summaries,
labels) is left for the template to escape.
"""

from __future__ import annotations

from typing import Any

from reports.numbers import is_number, pct

__all__ = ["capability_view", "change_cell", "figure_cell", "speculation_view",
           "steady_view"]


def figure_cell(value: object, unit: object, interval: object = None) -> str:
    """``0.204 s`` (latency), ``0.33 %`` (error ratio), ``240.0`` (tokens/s); ``—`` if absent;
    with its 95 % interval where the file has one: ``0.204 s (0.190–0.221)``."""
    if not is_number(value):
        return "—"
    if unit == "s":
        cell = f"{value:.3f} s"
    elif unit == "ratio":
        cell = pct(value)
    else:
        cell = f"{value:.1f}"
    if (span_of := _interval(interval)) is not None:
        low, high = span_of
        span = (f"{low:.3f}–{high:.3f}" if unit == "s" else f"{pct(low)}–{pct(high)}"
                if unit == "ratio" else f"{low:.1f}–{high:.1f}")
        cell += f" ({span})"
    return cell


def change_cell(current: object, candidate: object, unit: object,
                current_interval: object = None, candidate_interval: object = None) -> str:
    """Candidate − current: ``+0.216 s (+106 %)``, ``+0.33 points`` for the error ratio,
    ``-48.0 (-20 %)`` for tokens/s; ``not compared`` when either side is missing. The
    relative part is left out when the current figure is 0. Where both sides have a 95 %
    interval, the change's bounds follow (:func:`change_bounds`):
    ``+0.094 s (+12 %) [+0.054 to +0.122 s]``."""
    if not is_number(current) or not is_number(candidate):
        return "not compared"
    diff = candidate - current
    bounds = change_bounds(current_interval, candidate_interval)
    if unit == "ratio":
        cell = f"{diff * 100:+.2f} points"
        return cell + (f" [{bounds[0] * 100:+.2f} to {bounds[1] * 100:+.2f} points]"
                       if bounds else "")
    cell = f"{diff:+.3f} s" if unit == "s" else f"{diff:+.1f}"
    cell += f" ({diff / current * 100:+.0f} %)" if current else ""
    if bounds and unit == "s":
        cell += f" [{bounds[0]:+.3f} to {bounds[1]:+.3f} s]"
    return cell


def change_bounds(current_interval: object, candidate_interval: object
                  ) -> tuple[float, float] | None:
    """How far apart the two windows can be, from their 95 % intervals: the candidate's
    lowest minus the current's highest, to the candidate's highest minus the current's
    lowest (``None`` unless both intervals are there). Wider than a 95 % interval of the
    difference, so a rise whose lower bound is 0 or below is within the two windows'
    noise — the regression rule's own test (``faultkit.gate.steady_judge``)."""
    spans = [_interval(current_interval), _interval(candidate_interval)]
    if spans[0] is None or spans[1] is None:
        return None
    (cur_low, cur_high), (cand_low, cand_high) = spans[0], spans[1]
    return cand_low - cur_high, cand_high - cur_low


def _interval(value: object) -> tuple[float, float] | None:
    if (isinstance(value, list | tuple) and len(value) == 2
            and all(is_number(v) for v in value)):
        return float(value[0]), float(value[1])
    return None


def _side(data: object) -> dict[str, Any]:
    """One side (current or candidate): config, whether it was measured, its one-line
    result (the verdict's summary, or why it was not measured), and why it was measured
    twice (``rerun``: a borderline first window; ``None`` otherwise)."""
    side = data if isinstance(data, dict) else {}
    measured = side.get("measured") is True
    result = side.get("summary") if measured else side.get("why")
    rerun = side.get("rerun")
    why = rerun.get("why") if isinstance(rerun, dict) else None
    first = rerun.get("first_window") if isinstance(rerun, dict) else None
    slis = first.get("slis") if isinstance(first, dict) else None
    alone = slis.get("ttft_p95_s") if isinstance(slis, dict) else None
    return {
        "config": side.get("config"),
        "measured": measured,
        "result": result if isinstance(result, str) and result else "not recorded",
        #: a borderline first window measured again: why, and its TTFT p95 alone
        "rerun": (f"{why} (the first window alone: TTFT p95 "
                  f"{alone:.3f} s)" if is_number(alone) else why)
        if isinstance(why, str) and why else None,
    }


def steady_view(steady: object) -> dict[str, Any] | None:
    """What gate.md shows of ``steady_state``: ``None`` for a gate.json without one (older
    files); else ``checked``, ``why`` (when not checked), ``seconds``, ``load`` (how the
    load was shaped), each side and the comparison rows (``label``, ``current``,
    ``candidate``, ``change``, ``regression``, ``why``) and the tolerance's numbers."""
    if not isinstance(steady, dict):
        return None
    if steady.get("checked") is not True:
        why = steady.get("why")
        return {"checked": False, "why": why if isinstance(why, str) else "not checked"}
    profile = steady.get("profile")
    profile = profile if isinstance(profile, dict) else {}
    rate, workers = profile.get("rate"), profile.get("concurrency") or 1
    load = (f"open loop {rate:g} req/s" if is_number(rate)
            else f"closed loop, {workers} worker{'s' * (workers != 1)}" if is_number(workers)
            else "load not recorded")
    rows = []
    for row in steady.get("comparison") or ():
        if not isinstance(row, dict):
            continue
        unit = row.get("unit")
        rows.append({
            "label": row.get("label") or row.get("key") or "?",
            "current": figure_cell(row.get("current"), unit, row.get("current_interval")),
            "candidate": figure_cell(row.get("candidate"), unit,
                                     row.get("candidate_interval")),
            "change": change_cell(row.get("current"), row.get("candidate"), unit,
                                  row.get("current_interval"), row.get("candidate_interval")),
            "regression": row.get("regression") is True,
            "why": row.get("why") if isinstance(row.get("why"), str) else "",
        })
    tolerance = steady.get("tolerance")
    seconds = steady.get("seconds")
    intervals = any(row.get("current_interval") or row.get("candidate_interval")
                    for row in steady.get("comparison") or () if isinstance(row, dict))
    return {
        "checked": True,
        "seconds": f"{seconds:g}" if is_number(seconds) else "?",
        "load": load,
        "current": _side(steady.get("current")),
        "candidate": _side(steady.get("candidate")),
        "rows": rows,
        "intervals": intervals,
        "tolerance": {k: v for k, v in tolerance.items() if is_number(v)}
        if isinstance(tolerance, dict) else {},
        "speculation": speculation_view(steady.get("speculation")),
        "capabilities": capability_view(steady.get("capabilities")),
    }


def capability_view(data: object) -> dict[str, Any] | None:
    """What gate.md shows of ``steady_state.capabilities``: ``None`` when they were not
    compared; else one row per capability (each side's figure, or why it was not read)
    and the regressions found."""
    if not isinstance(data, dict):
        return None

    def cell(side: object, figure: str, source: str, unit: str) -> str:
        values = side if isinstance(side, dict) else {}
        value = values.get(figure)
        if is_number(value):
            return f"{value:,.0f}{unit}"
        why = values.get(source)
        return why if isinstance(why, str) and why else "not read"

    rows = [{"label": label,
             "current": cell(data.get("current"), figure, source, unit),
             "candidate": cell(data.get("candidate"), figure, source, unit)}
            for label, figure, source, unit in (
                ("context limit per request", "context_tokens", "context_source", " tokens"),
                ("KV cache", "kv_cache_tokens", "kv_source", " tokens"),
                ("sequences at once", "sequences", "sequences_source", ""))]
    regressions = [r for r in data.get("regressions") or () if isinstance(r, str)]
    ratio = data.get("kv_ratio_min")
    return {"rows": rows, "regressions": regressions,
            "kv_ratio_min": f"{ratio:g}" if is_number(ratio) else "?"}


def speculation_view(data: object) -> dict[str, Any] | None:
    """What gate.md shows of ``steady_state.speculation`` (a candidate that changes
    speculative decoding): ``None`` when there is none; else the two settings, the declared
    workload, how each class was loaded, and per class (and the mix) each side's TPOT p50,
    output tokens/s and acceptance (— without drafted-token counts) and the verdict."""
    if not isinstance(data, dict):
        return None

    def side(figures: object) -> dict[str, str]:
        f = figures if isinstance(figures, dict) else {}
        tpot, rate = f.get("tpot_p50_s"), f.get("acceptance_rate")
        rate_out = f.get("output_tokens_per_s")
        return {"tpot": f"{tpot * 1000:.1f} ms" if is_number(tpot) else "—",
                "tokens_per_s": f"{rate_out:.1f}" if is_number(rate_out) else "—",
                "acceptance": pct(rate) if is_number(rate) else "—"}

    rows = []
    for row in data.get("classes") or ():
        if not isinstance(row, dict):
            continue
        found = row.get("verdict")
        verdict: dict[str, Any] = found if isinstance(found, dict) else {}
        outcome = verdict.get("outcome")
        rows.append({"workload": str(row.get("workload") or "?"),
                     "current": side(row.get("current")),
                     "candidate": side(row.get("candidate")),
                     "outcome": {"wins": "faster", "loses": "slower",
                                 "no difference": "no difference"}.get(str(outcome),
                                                                      "not judged"),
                     "why": verdict.get("why") if isinstance(verdict.get("why"), str) else ""})
    seconds, users = data.get("seconds"), data.get("users")
    return {"current": data.get("current") or "off", "candidate": data.get("candidate") or "off",
            "workload": str(data.get("workload") or "mixed"),
            "load": (f"{users} users in a closed loop, {seconds:g} s per class and config"
                     if is_number(seconds) and is_number(users) else "load not recorded"),
            "rows": rows, "failure": data.get("failure")}
