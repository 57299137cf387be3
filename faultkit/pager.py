"""The pager: a webhook receiver for Alertmanager that dates every page as it arrives.

An alert entering ``firing`` in Prometheus is not yet a page: Alertmanager holds a new group
for its ``group_wait``, may silence or inhibit it, and only then delivers it. Detection
measured *to the page* needs the moment a notification reached its receiver, which neither
Prometheus nor Alertmanager's API records. ``faultkit pager`` is such a receiver
(:func:`make_app`); :func:`fetch_notifications` reads what it received.

HTTP surface:

- ``POST /alerts``: Alertmanager's webhook body (``version: "4"``: ``receiver``, ``status``,
  ``alerts[]`` with ``status``/``labels``/``annotations``/``startsAt``/``endsAt``/
  ``fingerprint``, ``groupLabels``, ``commonLabels``, ``externalURL``, ``groupKey``).
  ``t_received`` is stamped first thing in the handler, when the request's headers have
  arrived and before its body is read. The page is logged (below), kept in memory and
  answered ``200 {}``. A body that is not a JSON object is answered 400 with one line and
  nothing is kept; a page that cannot be logged is answered 500 and not kept either
  (Alertmanager retries a 5xx, so it is not lost).
- ``GET /notifications?since=EPOCH&until=EPOCH`` (each optional): the notifications with
  ``since ≤ t_received ≤ until``, oldest first, as ``[{"t_received", "payload"}]``.
- ``GET /-/ready``: 200 once it listens.

Time base: ``t_received`` is Unix epoch seconds (``time.time()``), comparable with
Prometheus's timestamps and with every ``t_*`` of a run.

The log (``--log``) is one JSON line per page, ``{"t_received": …, "payload": …}``, each
written whole by one ``os.write`` on an ``O_APPEND`` descriptor and fsync'd before the 200:
a page Alertmanager saw acknowledged is on disk, and a crash can leave at most a torn last
line. On start the log is read back so a restarted pager keeps its history; a line that
does not parse (a torn one) is skipped, and a torn tail is ended with a newline so the next
page starts a line of its own. The write and fsync run on the event loop: pages come one
per group and ``group_interval``, so the few milliseconds they block are not worth a thread
that could reorder the log.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from faultkit.errors import PagerUnavailable

__all__ = [
    "DEFAULT_LISTEN",
    "Notification",
    "PagerLog",
    "fetch_notifications",
    "make_app",
    "parse_listen",
    "serve",
]

#: Where ``faultkit pager`` listens unless told otherwise (Alertmanager's own port is 9093).
DEFAULT_LISTEN = "127.0.0.1:9094"
#: The largest webhook body accepted: aiohttp's default of 1 MiB is a few hundred alerts,
#: and Alertmanager sends every alert of a group in one body unless ``max_alerts`` is set.
MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Notification:
    """One webhook delivery as the pager received it.

    ``t_received`` is epoch seconds when the request reached the pager; ``payload`` is
    Alertmanager's body as sent (a JSON object).
    """

    t_received: float
    payload: dict[str, Any]

    @property
    def receiver(self) -> str:
        return str(self.payload.get("receiver", ""))

    @property
    def status(self) -> str:
        """``firing`` or ``resolved``: ``firing`` when any alert of the group still fires."""
        return str(self.payload.get("status", ""))

    @property
    def alerts(self) -> list[dict[str, Any]]:
        """The alerts of the delivery (each with its own ``status`` and ``labels``)."""
        alerts = self.payload.get("alerts")
        return [a for a in alerts if isinstance(a, dict)] if isinstance(alerts, list) else []

    def label_values(self, name: str) -> list[str]:
        """The distinct values of label ``name`` over the alerts, sorted."""
        values = {a.get("labels", {}).get(name) for a in self.alerts
                  if isinstance(a.get("labels"), dict)}
        return sorted(str(v) for v in values if v is not None)

    def summary(self) -> str:
        """One line: receiver, status, alert names, nodes."""
        names = ", ".join(self.label_values("alertname")) or "no alerts"
        nodes = ", ".join(self.label_values("node")) or "-"
        return (f"receiver={self.receiver or '-'} status={self.status or '-'} "
                f"alerts={names} nodes={nodes}")

    def to_json(self) -> dict[str, Any]:
        return {"t_received": self.t_received, "payload": self.payload}

    @classmethod
    def from_json(cls, data: object) -> Notification:
        """Read ``{"t_received": number, "payload": object}``; ValueError says what is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"a notification is a JSON object, not {type(data).__name__}")
        t, payload = data.get("t_received"), data.get("payload")
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise ValueError(f"t_received must be a finite number, not {t!r}")
        if not isinstance(payload, dict):
            raise ValueError("payload must be a JSON object")
        return cls(float(t), payload)


class PagerLog:
    """The notifications received: in memory, and with ``path`` in a JSON-lines file.

    Opening reads the file's existing lines back (``skipped`` counts the lines that did
    not parse). :meth:`append` writes the line first and keeps the notification only once
    it is on disk, so memory never holds a page the file lacks. Raises OSError when the
    file cannot be read or opened for appending.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.skipped = 0
        self._notifications: list[Notification] = []
        self._fd: int | None = None
        if path is not None:
            torn = self._load(path)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                               0o644)
            if torn:
                os.write(self._fd, b"\n")

    def _load(self, path: Path) -> bool:
        """Read the existing lines; True when the file ends in a torn (unterminated) line."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return False
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                self._notifications.append(Notification.from_json(json.loads(line)))
            except ValueError:  # json.JSONDecodeError and UnicodeDecodeError included
                self.skipped += 1
        return bool(data) and not data.endswith(b"\n")

    def append(self, notification: Notification) -> None:
        """Log it (one whole line, fsync'd), then keep it; OSError when it cannot be logged."""
        if self._fd is not None:
            line = json.dumps(notification.to_json(), separators=(",", ":"),
                              ensure_ascii=False, allow_nan=False) + "\n"
            data = line.encode()
            written = os.write(self._fd, data)
            if written != len(data):  # a full disk: the torn line is skipped when read back
                raise OSError(f"wrote {written} of {len(data)} bytes to {self.path}")
            os.fsync(self._fd)
        self._notifications.append(notification)

    def between(self, since: float | None = None, until: float | None = None
                ) -> list[Notification]:
        """The notifications with ``since ≤ t_received ≤ until`` (None: unbounded), oldest
        first."""
        chosen = [n for n in self._notifications
                  if (since is None or n.t_received >= since)
                  and (until is None or n.t_received <= until)]
        return sorted(chosen, key=lambda n: n.t_received)

    def __len__(self) -> int:
        return len(self._notifications)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def make_app(log: PagerLog, on_page: Callable[[Notification], None] | None = None, *,
             clock: Callable[[], float] = time.time) -> web.Application:
    """The pager's aiohttp application over ``log``; ``on_page`` is called with each page
    kept (the command prints it); ``clock`` gives ``t_received`` (epoch seconds)."""

    async def alerts(request: web.Request) -> web.Response:
        t_received = clock()  # first: the arrival, before the body is read
        body = await request.read()
        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise web.HTTPBadRequest(text=f"body is not JSON: {exc}\n") from exc
        if not isinstance(payload, dict):
            raise web.HTTPBadRequest(
                text=f"body is JSON {type(payload).__name__}, not Alertmanager's webhook "
                "object\n")
        notification = Notification(t_received, payload)
        try:
            log.append(notification)
        except OSError as exc:
            raise web.HTTPInternalServerError(
                text=f"cannot log the page to {log.path}: {exc}\n") from exc
        if on_page is not None:
            on_page(notification)
        return web.json_response({})

    async def notifications(request: web.Request) -> web.Response:
        since = _time_param(request, "since")
        until = _time_param(request, "until")
        return web.json_response([n.to_json() for n in log.between(since, until)])

    async def ready(request: web.Request) -> web.Response:
        return web.Response(text="pager is ready\n")

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/alerts", alerts)
    app.router.add_get("/notifications", notifications)
    app.router.add_get("/-/ready", ready)
    return app


def _time_param(request: web.Request, name: str) -> float | None:
    text = request.query.get(name)
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise web.HTTPBadRequest(text=f"{name}={text}: must be epoch seconds (a finite number)\n")
    return value


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start ``app`` on ``host:port`` (0: any free port); return the runner and the port.

    Raises OSError when the address cannot be bound (the runner is cleaned up then).
    """
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    server = site._server
    assert isinstance(server, asyncio.Server)
    return runner, int(server.sockets[0].getsockname()[1])


def parse_listen(text: str, *, allow_remote: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) → (host, port); port 0 means any free port.

    ValueError (its message one line saying what to give) for anything else, and for a
    host that is not loopback unless ``allow_remote``: the pager answers whoever reaches it
    with notifications that name the nodes.
    """
    host, sep, port_text = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host:
        raise ValueError("expected HOST:PORT, such as 127.0.0.1:9094")
    if not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"port {port_text!r} must be a number from 0 to 65535 "
                         "(0: any free port)")
    if not allow_remote and not _is_loopback(host):
        raise ValueError(f"{host} is not a loopback address; pass --allow-remote to listen "
                         "beyond this machine (anyone who reaches the pager reads its pages)")
    return host, int(port_text)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: loopback only by name
        return False


def fetch_notifications(pager_url: str, since: float, until: float,
                        timeout_s: float = 5.0) -> list[Notification]:
    """The notifications the pager at ``pager_url`` received with ``since ≤ t_received ≤
    until`` (epoch seconds), oldest first.

    Raises :class:`~faultkit.errors.PagerUnavailable` when the pager does not answer within
    ``timeout_s``, answers other than 200, or answers something that is not a list of
    notifications.
    """
    base = pager_url.rstrip("/")
    try:
        response = httpx.get(f"{base}/notifications",
                             params={"since": repr(since), "until": repr(until)},
                             timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise PagerUnavailable(base, f"{type(exc).__name__}: {exc}".rstrip(": ")) from exc
    if response.status_code != 200:
        raise PagerUnavailable(base, f"HTTP {response.status_code}: "
                               f"{response.text.strip()[:200] or 'no body'}")
    try:
        body = response.json()
        if not isinstance(body, list):
            raise ValueError(f"a JSON {type(body).__name__}, not a list")
        return [Notification.from_json(item) for item in body]
    except ValueError as exc:
        raise PagerUnavailable(base, f"its answer is not a list of notifications ({exc})"
                               ) from exc
