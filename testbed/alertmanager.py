"""The testbed's Alertmanager and the ``faultkit pager`` its one route delivers to.

Debian's ``prometheus-alertmanager`` on loopback (clustering off: one instance), with a
config generated from the inventory's ``alertmanager:``: one route, grouped by alert name
and node, to the webhook receiver ``faultkit-pager`` at ``<pager_url>/alerts``, resolved
notifications included. The pager (``faultkit pager``, :mod:`faultkit.pager`) dates every
page as it arrives and logs it to ``notifications.jsonl``. Config, data, logs and PID files
live under the testbed state dir ``alertmanager/``; ``down`` stops both by their PID files.
"""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from faultkit.inventory import AlertmanagerSettings, Inventory
from testbed._shell import Progress, ensure_commands
from testbed.errors import TestbedError
from testbed.paths import state_dir
from testbed.procs import ensure_serving, is_ready, start_ready, stop_by_pid_file, write_checked

#: The receiver every alert of the lab goes to.
RECEIVER = "faultkit-pager"
#: One group per alert and node: a page names one failure of one node.
GROUP_BY = ("alertname", "node")
#: How long a new group waits for more alerts before its first page. Alertmanager's default
#: is 30 s, as long as the scenarios' whole detection objective (``detection_s_max: 30``):
#: the lab pages 2 s after an alert fires, so a page measures monitoring, not the wait.
#: Every figure measured to the page includes it: whatever shows such a figure shows this
#: value beside it.
GROUP_WAIT = "2s"
#: How long a group waits before paging about alerts added to it (Alertmanager's default:
#: 5 m). A failure of the same kind on the same node soon after the last one joins the group
#: Alertmanager still holds and waits for its next interval: 3 s keeps that page inside the
#: run that caused it (runs on one node follow each other within seconds in the catalogue).
GROUP_INTERVAL = "3s"
#: How long before a page still firing is sent again (Alertmanager's default: 4 h).
REPEAT_INTERVAL = "1h"

#: ``testbed status`` rows: what, URL, ready.
Readiness = tuple[str, str, bool]


def alertmanager_config(settings: AlertmanagerSettings) -> dict[str, object]:
    """An alertmanager.yml: one route to the pager (no webhook without a ``pager_url``)."""
    receiver: dict[str, object] = {"name": RECEIVER}
    if settings.pager_url is not None:
        receiver["webhook_configs"] = [
            {"url": f"{settings.pager_url}/alerts", "send_resolved": True}
        ]
    return {
        "route": {
            "receiver": RECEIVER,
            "group_by": list(GROUP_BY),
            "group_wait": GROUP_WAIT,
            "group_interval": GROUP_INTERVAL,
            "repeat_interval": REPEAT_INTERVAL,
        },
        "receivers": [receiver],
    }


def listen_address(url: str, what: str) -> tuple[str, int]:
    """(host, port) to listen on for ``url``: loopback only, as every part of the lab, and
    the port explicit (Prometheus and Alertmanager read the URL as given)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port
    if host not in ("127.0.0.1", "localhost"):
        raise TestbedError(f"the testbed's {what} must listen on loopback, not {host} ({url}): "
                           "use http://127.0.0.1:PORT in the inventory's alertmanager:")
    if port is None:
        raise TestbedError(f"the testbed's {what} URL {url} needs an explicit port "
                           "(http://127.0.0.1:PORT)")
    return "127.0.0.1", port


def ensure_alertmanager(inventory: Inventory, progress: Progress, *,
                        timeout_s: float = 30.0) -> str | None:
    """Write the config, start the pager, then Alertmanager (or have a running one reload
    a changed config); wait until each is ready; return Alertmanager's URL (None: the
    inventory names none).

    A running pager is left alone (its history is in memory and in its log). With
    everything running and the config unchanged, nothing is run: ``testbed up`` stays fast.
    """
    settings = inventory.alertmanager
    if settings is None:
        return None
    url = settings.url
    am_host, am_port = listen_address(url, "Alertmanager")
    pager = ((settings.pager_url, listen_address(settings.pager_url, "pager"))
             if settings.pager_url is not None else None)
    ensure_commands(
        {"prometheus-alertmanager": "prometheus-alertmanager",
         "amtool": "prometheus-alertmanager"},
        progress,
    )
    directory = state_dir("alertmanager")
    config = directory / "alertmanager.yml"
    changed = _write_checked(config, yaml.safe_dump(alertmanager_config(settings),
                                                    sort_keys=False))
    if pager is not None:
        _ensure_pager(*pager, directory, progress, timeout_s)
    ensure_serving(
        url, what="Alertmanager", changed=changed,
        argv=["prometheus-alertmanager",
              f"--config.file={config}",
              f"--storage.path={directory / 'data'}",
              f"--web.listen-address={am_host}:{am_port}",
              "--cluster.listen-address="],  # clustering off: one instance, no gossip port
        log=directory / "alertmanager.log", pid_file=directory / "alertmanager.pid",
        progress=progress, timeout_s=timeout_s)
    return url


def _write_checked(config: Path, text: str) -> bool:
    """Make ``config`` hold ``text`` once ``amtool check-config`` accepts it; True when it
    changed (:func:`testbed.procs.write_checked`)."""
    return write_checked(config, text, lambda candidate: ["amtool", "check-config",
                                                           str(candidate)],
                         "amtool check-config")


def _ensure_pager(url: str, listen: tuple[str, int], directory: Path, progress: Progress,
                  timeout_s: float) -> None:
    """Start ``faultkit pager`` on ``listen`` unless one answers at ``url`` already."""
    if is_ready(url):
        return
    host, port = listen
    log, pages = directory / "pager.log", directory / "notifications.jsonl"
    progress(f"starting the pager on {host}:{port} (log: {log}, pages: {pages})")
    start_ready(
        [sys.executable, "-m", "faultkit.cli", "pager", "--listen", f"{host}:{port}",
         "--log", str(pages)],
        what="the pager", url=url, log=log, pid_file=directory / "pager.pid",
        timeout_s=timeout_s,
    )


def stop_alertmanager() -> list[str]:
    """Stop the Alertmanager and the pager the testbed started (by their PID files, each
    only if that PID is still the process started); return what was running."""
    directory = state_dir("alertmanager")
    stopped = []
    # the marker is in the command line of the process the testbed started, nowhere else
    for what, name, marker in (
        ("Alertmanager", "alertmanager", f"--config.file={directory / 'alertmanager.yml'}"),
        ("the pager", "pager", str(directory / "notifications.jsonl")),
    ):
        if stop_by_pid_file(directory / f"{name}.pid", marker.encode()):
            stopped.append(what)
    return stopped


def readiness(inventory: Inventory) -> list[Readiness]:
    """``(what, url, ready)`` of the inventory's Alertmanager and pager (none without one)."""
    settings = inventory.alertmanager
    if settings is None:
        return []
    rows = [("Alertmanager", settings.url, is_ready(settings.url))]
    if settings.pager_url is not None:
        rows.append(("pager", settings.pager_url, is_ready(settings.pager_url)))
    return rows
