"""Exceptions the ``slo`` package raises (all are :class:`faultkit.errors.FaultkitError`).

Tree::

    FaultkitError
    ├── PrometheusError              Prometheus answered, but not with what was asked for
    │   ├── PrometheusUnavailable    cannot reach Prometheus at the inventory's URL (or not ready)
    │   └── PrometheusQueryError     Prometheus rejected a query (bad PromQL, timeout, …)
    └── AlertmanagerUnavailable      Alertmanager did not answer its API v2 usably

The CLI turns any ``FaultkitError`` into one message and a non-zero exit, so "Prometheus
is down" is never rendered as an empty, healthy-looking result.
"""

from __future__ import annotations

from faultkit.errors import FaultkitError


class PrometheusError(FaultkitError):
    """Prometheus did not give a usable answer."""

    def __init__(self, url: str, message: str) -> None:
        self.url = url
        super().__init__(message)


class PrometheusUnavailable(PrometheusError):
    """Nothing (or nothing ready) answers at ``url``."""

    def __init__(self, url: str, reason: str) -> None:
        self.reason = reason
        super().__init__(
            url,
            f"Prometheus unreachable at {url}: {reason}. Is it running? "
            "(`faultkit testbed up` starts the testbed's; for your own, check the "
            "inventory's prometheus.url)",
        )


class PrometheusQueryError(PrometheusError):
    """Prometheus answered with an error for ``query``."""

    def __init__(self, url: str, query: str, error_type: str, error: str) -> None:
        self.query = query
        self.error_type = error_type
        self.error = error
        super().__init__(
            url, f"Prometheus at {url} rejected the query {query!r}: {error_type}: {error}"
        )


class AlertmanagerUnavailable(FaultkitError):
    """Alertmanager at ``url`` did not answer its API v2 with what was asked for."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(
            f"Alertmanager unreachable at {url}: {reason}. Is it running? (`faultkit testbed "
            "up` starts the testbed's; for your own, check the inventory's alertmanager.url)"
        )
