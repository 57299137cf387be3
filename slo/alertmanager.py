"""Alertmanager, read through its API v2 and never reconfigured (docs/slo.md, "Detection
to the page").

- :meth:`Alertmanager.alerts` — every alert it holds, with its state (``active``,
  ``suppressed``, ``unprocessed``) and what suppresses it (silences, inhibiting alerts);
- :meth:`Alertmanager.silence` — one silence: who set it, why, until when;
- :meth:`Alertmanager.route` — the root route's timing (``group_wait`` …), read from the
  configuration Alertmanager itself reports (``/api/v2/status``), with Alertmanager's
  defaults where the file leaves them out: what stands between an alert firing and a page.

The client is synchronous (the observer runs it in a worker thread, as it does Prometheus)
and never retries: a watcher polling twice a second must learn at once that it is gone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import yaml

from faultkit.model.durations import parse_model_duration
from slo.errors import AlertmanagerUnavailable

__all__ = ["Alertmanager", "AmAlert", "RouteTiming", "Silence"]

log = logging.getLogger(__name__)

#: Alertmanager's own defaults for a route that does not set them (its configuration docs)
DEFAULT_GROUP_WAIT_S = 30.0
DEFAULT_GROUP_INTERVAL_S = 300.0
DEFAULT_REPEAT_INTERVAL_S = 4 * 3600.0

def _epoch(text: object) -> float | None:
    """An RFC 3339 time as Alertmanager writes it, in epoch seconds (None if absent)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class AmAlert:
    """One alert as Alertmanager holds it."""

    fingerprint: str
    labels: dict[str, str]
    state: str  # active | suppressed | unprocessed
    silenced_by: tuple[str, ...] = ()
    inhibited_by: tuple[str, ...] = ()
    starts_at: float | None = None

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @classmethod
    def from_api(cls, item: dict[str, Any]) -> AmAlert:
        status = item.get("status") or {}
        return cls(
            fingerprint=str(item.get("fingerprint", "")),
            labels={str(k): str(v) for k, v in (item.get("labels") or {}).items()},
            state=str(status.get("state", "unprocessed")),
            silenced_by=tuple(str(s) for s in status.get("silencedBy") or ()),
            inhibited_by=tuple(str(s) for s in status.get("inhibitedBy") or ()),
            starts_at=_epoch(item.get("startsAt")),
        )


@dataclass(frozen=True, slots=True)
class Silence:
    """A silence: its id, who set it and why, and until when."""

    id: str
    created_by: str
    comment: str
    ends_at: float | None
    matchers: tuple[str, ...] = ()

    def describe(self) -> str:
        """``silence 3f2a… by alice ("maintenance"), node="vllm"``: enough to find it."""
        said = f' ("{self.comment}")' if self.comment else ""
        by = f" by {self.created_by}" if self.created_by else ""
        matched = f", matching {', '.join(self.matchers)}" if self.matchers else ""
        return f"silence {self.id}{by}{said}{matched}"

    @classmethod
    def from_api(cls, item: dict[str, Any]) -> Silence:
        matchers = tuple(
            f"{m.get('name')}{'!' if m.get('isEqual') is False else ''}"
            f"{'=~' if m.get('isRegex') else '='}\"{m.get('value')}\""
            for m in item.get("matchers") or ())
        return cls(id=str(item.get("id", "")), created_by=str(item.get("createdBy", "")),
                   comment=str(item.get("comment", "")), ends_at=_epoch(item.get("endsAt")),
                   matchers=matchers)


@dataclass(frozen=True, slots=True)
class RouteTiming:
    """What the root route makes an alert wait before its first page, and after."""

    receiver: str
    group_wait_s: float = DEFAULT_GROUP_WAIT_S
    group_interval_s: float = DEFAULT_GROUP_INTERVAL_S
    repeat_interval_s: float = DEFAULT_REPEAT_INTERVAL_S
    #: the root route has child routes, whose timing may differ for some alerts
    has_children: bool = False
    group_by: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"receiver": self.receiver, "group_wait_s": self.group_wait_s,
                "group_interval_s": self.group_interval_s,
                "repeat_interval_s": self.repeat_interval_s,
                "has_children": self.has_children, "group_by": list(self.group_by)}

    @classmethod
    def from_config(cls, original: str) -> RouteTiming:
        """The root route of an Alertmanager configuration (YAML); :class:`ValueError`
        when it has none or a timing is not a duration."""
        config = yaml.safe_load(original) or {}
        route = config.get("route") if isinstance(config, dict) else None
        if not isinstance(route, dict):
            raise ValueError("the configuration has no route")

        def seconds(key: str, default: float) -> float:
            value = route.get(key)
            return default if value is None else parse_model_duration(str(value))

        return cls(
            receiver=str(route.get("receiver", "")),
            group_wait_s=seconds("group_wait", DEFAULT_GROUP_WAIT_S),
            group_interval_s=seconds("group_interval", DEFAULT_GROUP_INTERVAL_S),
            repeat_interval_s=seconds("repeat_interval", DEFAULT_REPEAT_INTERVAL_S),
            has_children=bool(route.get("routes")),
            group_by=tuple(str(g) for g in route.get("group_by") or ()),
        )


class Alertmanager:
    """An Alertmanager at ``url``; ``timeout_s`` bounds every HTTP call."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        self._client.close()

    def _get(self, path: str) -> Any:
        try:
            response = self._client.get(self.url + path)
        except httpx.TimeoutException:
            raise AlertmanagerUnavailable(self.url, f"no answer from {path} in time") from None
        except httpx.HTTPError as exc:
            reason = "connection refused" if "refused" in str(exc).lower() else str(exc)
            raise AlertmanagerUnavailable(self.url, reason) from None
        if response.status_code != 200:
            raise AlertmanagerUnavailable(self.url, f"HTTP {response.status_code} from {path}")
        try:
            return response.json()
        except ValueError:
            raise AlertmanagerUnavailable(self.url, f"non-JSON answer from {path}") from None

    def alerts(self) -> list[AmAlert]:
        """Every alert Alertmanager holds (active, silenced, inhibited, unprocessed)."""
        items = self._get("/api/v2/alerts")
        if not isinstance(items, list):
            raise AlertmanagerUnavailable(self.url, "/api/v2/alerts did not answer a list")
        return [AmAlert.from_api(i) for i in items if isinstance(i, dict)]

    def silence(self, silence_id: str) -> Silence:
        item = self._get(f"/api/v2/silence/{silence_id}")
        if not isinstance(item, dict):
            raise AlertmanagerUnavailable(self.url, f"silence {silence_id} is not an object")
        return Silence.from_api(item)

    def route(self) -> RouteTiming:
        """The root route's timing, from the configuration Alertmanager runs."""
        status = self._get("/api/v2/status")
        original = (status.get("config") or {}).get("original") \
            if isinstance(status, dict) else None
        if not isinstance(original, str):
            raise AlertmanagerUnavailable(self.url, "/api/v2/status holds no configuration")
        try:
            return RouteTiming.from_config(original)
        except (ValueError, yaml.YAMLError) as exc:
            raise AlertmanagerUnavailable(self.url, f"its configuration: {exc}") from None

    def route_or_error(self) -> dict[str, Any]:
        """:meth:`route` as the timeline notes it (``RouteTiming.to_json()``), or
        ``{"error": why}`` when it could not be read: the route's timing is context for
        the page, never a reason to stop."""
        try:
            return self.route().to_json()
        except AlertmanagerUnavailable as exc:
            log.warning("%s", exc)
            return {"error": exc.reason}
