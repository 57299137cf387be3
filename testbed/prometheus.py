"""The testbed's Prometheus: Debian's ``prometheus`` binary on loopback, 1 s scrape/eval.

The scrape config is generated from the inventory (one job per node that names a
Prometheus job, target = the host:port of its base_url, plus the generation probe of
:mod:`testbed.blackbox`; alerts go to the inventory's
Alertmanager, :mod:`testbed.alertmanager`, when it names one); alert rules come from
:func:`slo.rules.render_rules` (node down, error ratio, burn rates). Data lives under the
testbed state dir; the PID is kept in a file so ``down`` can stop it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import yaml

from faultkit.inventory import Inventory
from testbed._shell import Progress, ensure_commands, run
from testbed.blackbox import scrape_job as generate_probe_job
from testbed.errors import TestbedError
from testbed.paths import state_dir
from testbed.procs import is_ready

#: Engines whose metrics are not at ``/metrics``: LiteLLM's proxy answers ``/metrics`` with a
#: 307 to ``/metrics/`` (docs/gateway.md); scrape the real path rather than a redirect.
METRICS_PATHS = {"litellm": "/metrics/"}

FALLBACK_RULES = """\
groups:
  - name: faultkit-testbed
    rules:
      - alert: FaultkitNodeDown
        expr: up == 0
        labels: {severity: page}
        annotations: {summary: "{{ $labels.job }} is not answering scrapes"}
"""


def scrape_config(inventory: Inventory) -> dict[str, object]:
    """A prometheus.yml for the inventory's nodes (scrape and evaluation every interval),
    sending its alerts to the inventory's Alertmanager when it names one."""
    interval = f"{inventory.prometheus.scrape_interval_s:g}s"
    jobs: list[dict[str, object]] = []
    for node in inventory.nodes:
        if node.prometheus is None:
            continue
        target = urlsplit(node.base_url).netloc
        jobs.append(
            {
                "job_name": node.prometheus.job,
                "metrics_path": METRICS_PATHS.get(node.engine, "/metrics"),
                "static_configs": [{"targets": [target], "labels": {"node": node.name}}],
            }
        )
    probe = generate_probe_job(inventory)
    if probe is not None:  # the lab's generation probe (testbed.blackbox)
        jobs.append(probe)
    config: dict[str, object] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": ["rules.yml"],
        "scrape_configs": jobs,
    }
    if inventory.alertmanager is not None:
        parts = urlsplit(inventory.alertmanager.url)
        alertmanager: dict[str, object] = {"static_configs": [{"targets": [parts.netloc]}]}
        if parts.scheme != "http":
            alertmanager["scheme"] = parts.scheme
        if parts.path.strip("/"):
            alertmanager["path_prefix"] = parts.path
        config["alerting"] = {"alertmanagers": [alertmanager]}
    return config


def render_rules_for(inventory: Inventory) -> str:
    try:
        from slo.rules import render_rules
    except ImportError:  # the SLO rules module is optional for the lab itself
        return FALLBACK_RULES
    return render_rules(inventory)


def _listen(inventory: Inventory) -> tuple[str, int]:
    parts = urlsplit(inventory.prometheus.url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 9090
    if host not in ("127.0.0.1", "localhost"):
        raise TestbedError(f"the testbed's Prometheus must listen on loopback, not {host}")
    return "127.0.0.1", port


def ensure_prometheus(inventory: Inventory, progress: Progress, *, timeout_s: float = 30.0) -> str:
    """Write config + rules, start Prometheus (or reload it if running), wait until ready."""
    ensure_commands({"prometheus": "prometheus", "promtool": "prometheus"}, progress)
    directory = state_dir("prometheus")
    (directory / "prometheus.yml").write_text(
        yaml.safe_dump(scrape_config(inventory), sort_keys=False)
    )
    (directory / "rules.yml").write_text(render_rules_for(inventory))
    run(
        ["promtool", "check", "config", str(directory / "prometheus.yml")],
        what="promtool check config",
    )
    url = inventory.prometheus.url.rstrip("/")
    if is_ready(url):
        httpx.post(f"{url}/-/reload", timeout=5.0).raise_for_status()
        return url
    host, port = _listen(inventory)
    log = directory / "prometheus.log"
    progress(f"starting Prometheus on {host}:{port} (log: {log})")
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address={host}:{port}",
                "--web.enable-lifecycle",
                "--storage.tsdb.retention.time=7d",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    (directory / "prometheus.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-8:])
            raise TestbedError(f"Prometheus exited with code {proc.returncode}:\n{tail}")
        if is_ready(url):
            return url
        time.sleep(0.3)
    raise TestbedError(f"Prometheus not ready at {url} after {timeout_s:.0f} s (log: {log})")


def stop_prometheus() -> bool:
    """Stop the Prometheus the testbed started (by its PID file); True if one was running."""
    pid_file = state_dir("prometheus") / "prometheus.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().strip() or 0)
    pid_file.unlink()
    if not pid or not _is_prometheus(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    for _ in range(50):
        if not _is_prometheus(pid):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


def _is_prometheus(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # the program itself, not any command line that names it (prometheus-alertmanager);
    # the state follows the last ')' (a process name may hold spaces)
    return Path(argv[0].decode(errors="replace")).name == "prometheus" \
        and stat.rsplit(")", 1)[-1].split()[0] != "Z"
