"""Prometheus access: the only module that talks HTTP to Prometheus or catches its errors.

Built on ``prometheus_api_client.PrometheusConnect`` (its requests session, retry policy
and auth handling), but every call goes through that session directly: the library's
``custom_query_range`` rounds start/end to whole seconds and ``custom_query`` drops the
result type, and neither covers ``/api/v1/alerts``, ``/rules``, ``/targets`` or ``/-/ready``.

Contract:

- Timestamps are Unix epoch seconds (float), sent and returned with sub-second precision.
- Sample values are parsed with ``float()`` — Prometheus sends strings, including
  ``"NaN"``, ``"+Inf"`` and ``"-Inf"``, which become the matching floats.
- An unreachable Prometheus raises :class:`PrometheusUnavailable` naming the URL; a bad
  query raises :class:`PrometheusQueryError`. An empty result is only ever returned when
  Prometheus itself answered "no series" — never as a stand-in for "could not ask".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from faultkit.model.durations import parse_model_duration
from faultkit.model.timestamps import parse_rfc3339 as parse_rfc3339  # this module's name for it
from slo.errors import PrometheusError, PrometheusQueryError, PrometheusUnavailable


@dataclass(frozen=True, slots=True)
class Sample:
    """One instant-vector element: labels, epoch time ``t`` and float ``value``."""

    labels: dict[str, str]
    t: float
    value: float


@dataclass(frozen=True, slots=True)
class Series:
    """One range-query series: labels and ``[(t, value), ...]`` sorted by time."""

    labels: dict[str, str]
    values: list[tuple[float, float]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Alert:
    """One active alert from ``/api/v1/alerts`` (pending or firing; resolved ones are absent)."""

    name: str
    state: str  # "pending" | "firing"
    labels: dict[str, str]
    annotations: dict[str, str]
    active_at: float | None  # epoch seconds; Prometheus gives RFC 3339
    value: float | None


def parse_value(raw: Any) -> float:
    """A Prometheus sample value ("1e+00", "NaN", "+Inf", …) as a float."""
    return float(raw)


def parse_vector(result: list[Mapping[str, Any]]) -> list[Sample]:
    return [
        Sample(dict(item.get("metric", {})), float(item["value"][0]), parse_value(item["value"][1]))
        for item in result
    ]


def parse_matrix(result: list[Mapping[str, Any]]) -> list[Series]:
    return [
        Series(
            dict(item.get("metric", {})),
            [(float(t), parse_value(v)) for t, v in item.get("values", [])],
        )
        for item in result
    ]


def parse_retention(text: str) -> float | None:
    """The time part of Prometheus' ``storageRetention`` in seconds: ``15d`` and
    ``15d or 10GiB`` → 15 days; ``10GiB`` (by size only), ``0s`` or anything else → None."""
    for part in text.split(" or "):
        try:
            seconds = parse_model_duration(part)
        except ValueError:
            continue
        return seconds if seconds > 0 else None
    return None


def parse_alerts(data: Mapping[str, Any]) -> list[Alert]:
    alerts = []
    for item in data.get("alerts", []):
        labels = dict(item.get("labels", {}))
        raw_value = item.get("value")
        alerts.append(
            Alert(
                name=labels.get("alertname", ""),
                state=str(item.get("state", "")),
                labels=labels,
                annotations=dict(item.get("annotations", {})),
                active_at=parse_rfc3339(item.get("activeAt")),
                value=parse_value(raw_value) if raw_value is not None else None,
            )
        )
    return alerts


class Prometheus:
    """A Prometheus server at ``url``; ``timeout`` (s) bounds every HTTP call.

    Connection failures are not retried (an observer polling every 0.5 s must learn
    quickly that Prometheus is gone); 502/503/504 are retried once.
    """

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        retry = Retry(total=1, connect=0, read=0, backoff_factor=0.1,
                      status_forcelist=(502, 503, 504))
        self._conn = PrometheusConnect(url=self.url, retry=retry, timeout=timeout)
        self._session: requests.Session = self._conn._session

    # ------------------------------------------------------------------ raw access
    def _get(self, path: str, params: Mapping[str, Any] | None = None) -> requests.Response:
        try:
            return self._session.get(self.url + path, params=params, timeout=self.timeout)
        except requests.exceptions.Timeout:
            raise PrometheusUnavailable(self.url, f"no answer within {self.timeout} s") from None
        except requests.exceptions.RequestException as exc:
            reason = "connection refused" if "refused" in str(exc).lower() else str(exc)
            raise PrometheusUnavailable(self.url, reason) from None

    def _api(self, path: str, params: Mapping[str, Any] | None = None, *, query: str = "") -> Any:
        response = self._get(path, params)
        try:
            body = response.json()
        except (ValueError, json.JSONDecodeError):
            if response.status_code >= 500 or response.status_code == 404:
                raise PrometheusUnavailable(
                    self.url, f"HTTP {response.status_code} from {path} (is this Prometheus?)"
                ) from None
            raise PrometheusError(
                self.url, f"Prometheus at {self.url}: non-JSON answer from {path}"
            ) from None
        if body.get("status") != "success":
            raise PrometheusQueryError(
                self.url, query or path, str(body.get("errorType", response.status_code)),
                str(body.get("error", "unknown error")),
            )
        return body.get("data")

    # ------------------------------------------------------------------ queries
    def query(self, promql: str, t: float | None = None) -> list[Sample]:
        """Instant query at epoch ``t`` (default: server now) → samples (maybe empty).

        A scalar result comes back as one sample with no labels.
        """
        params: dict[str, Any] = {"query": promql}
        if t is not None:
            params["time"] = f"{t:.3f}"
        data = self._api("/api/v1/query", params, query=promql)
        kind, result = data.get("resultType"), data.get("result")
        if kind == "vector":
            return parse_vector(result)
        if kind == "scalar":
            return [Sample({}, float(result[0]), parse_value(result[1]))]
        raise PrometheusQueryError(self.url, promql, "bad_result", f"result type {kind!r}")

    def query_value(self, promql: str, t: float | None = None) -> float | None:
        """Instant query expected to give at most one number; None when empty."""
        samples = self.query(promql, t)
        if len(samples) > 1:
            raise PrometheusQueryError(
                self.url, promql, "ambiguous", f"{len(samples)} series; aggregate with sum()"
            )
        return samples[0].value if samples else None

    def query_samples(self, promql: str, t: float | None = None) -> list[Series]:
        """Instant query of a range selector (``up{job="x"}[10s]``) → the raw stored samples.

        Sample timestamps are the scrape times Prometheus stored, not evaluation steps.
        """
        params: dict[str, Any] = {"query": promql}
        if t is not None:
            params["time"] = f"{t:.3f}"
        data = self._api("/api/v1/query", params, query=promql)
        if data.get("resultType") != "matrix":
            raise PrometheusQueryError(
                self.url, promql, "bad_result", "expected a range selector (matrix result)"
            )
        return parse_matrix(data.get("result", []))

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[Series]:
        """Range query over [start, end] epoch seconds every ``step`` seconds (sub-second ok)."""
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step}
        data = self._api("/api/v1/query_range", params, query=promql)
        return parse_matrix(data.get("result", []))

    def alerts(self) -> list[Alert]:
        """Active (pending and firing) alerts; resolved alerts are not listed by Prometheus."""
        return parse_alerts(self._api("/api/v1/alerts"))

    def rules(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Rule groups from ``/api/v1/rules`` (``kind`` = "alert" | "record" filters)."""
        data = self._api("/api/v1/rules", {"type": kind} if kind else None)
        groups: list[dict[str, Any]] = data.get("groups", [])
        return groups

    def targets(self) -> list[dict[str, Any]]:
        """Active scrape targets (each has ``labels``, ``health``, ``lastScrape``, …)."""
        active: list[dict[str, Any]] = self._api("/api/v1/targets").get("activeTargets", [])
        return active

    def start_time(self) -> float | None:
        """When this Prometheus process started (epoch seconds, ``/api/v1/status/runtimeinfo``),
        or None when it does not say. A later answer with another start time is another
        process: whatever it did not scrape in between is lost."""
        data = self._api("/api/v1/status/runtimeinfo")
        return parse_rfc3339(str(data.get("startTime") or "")) if isinstance(data, dict) else None

    def retention_s(self) -> float | None:
        """How long this Prometheus keeps samples (``--storage.tsdb.retention.time``, read
        from ``/api/v1/status/runtimeinfo``: :func:`parse_retention`), or None when it
        keeps them by size only or does not say."""
        data = self._api("/api/v1/status/runtimeinfo")
        if not isinstance(data, dict):
            return None
        return parse_retention(str(data.get("storageRetention") or ""))

    def ready(self) -> bool:
        """True when ``/-/ready`` answers 200; raises PrometheusUnavailable when unreachable."""
        return self._get("/-/ready").status_code == 200

    def require_ready(self) -> None:
        """Raise PrometheusUnavailable unless Prometheus is reachable and ready."""
        if not self.ready():
            raise PrometheusUnavailable(self.url, "/-/ready does not answer 200 (still starting?)")

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
