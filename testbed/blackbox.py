"""The testbed's generation probe: Debian's ``prometheus-blackbox-exporter`` on loopback,
asking every engine node for one token.

A stalled engine answers ``/health`` 200 and its scrapes (docs/faults.md, "What a stalled
vLLM engine looks like"); what sees it is a request that needs the engine. Each engine
node gets a module ``generate-<node>`` that POSTs a one-token completion to its
``/v1/completions`` and succeeds only on a 200 carrying ``choices``; Prometheus scrapes it
as job :data:`~faultkit.constants.GENERATE_PROBE_JOB` with ``node=<name>``, the series
``FaultkitEngineStalled`` reads (:mod:`slo.rules`). Config, log and PID file live under
the testbed state dir ``blackbox/``; ``down`` stops it by its PID file.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import yaml

from faultkit.constants import GENERATE_PROBE_JOB
from faultkit.inventory import Inventory, Node
from testbed._shell import Progress, ensure_commands
from testbed.errors import TestbedError
from testbed.paths import state_dir
from testbed.procs import ensure_serving, is_ready, stop_by_pid_file, write_checked

#: Debian's package and program
EXPORTER = "prometheus-blackbox-exporter"
#: where the lab's exporter listens (loopback only, as every part of the lab)
LISTEN = ("127.0.0.1", 19115)
URL = f"http://{LISTEN[0]}:{LISTEN[1]}"
#: how often each node is asked for a token, and how long the probe waits for it: a stall
#: shows as a probe that got no answer (``probe_http_status_code`` 0) within the timeout
PROBE_INTERVAL = "5s"
PROBE_TIMEOUT_S = 4.0


def probed_nodes(inventory: Inventory) -> list[Node]:
    """The engine nodes the probe asks for a token (a gateway's upstreams are probed
    themselves; an unscraped node has no Prometheus job to tie its probe to)."""
    return [n for n in inventory.nodes
            if n.kind == "engine" and n.prometheus is not None and n.model]


def module_name(node: Node) -> str:
    return f"generate-{node.name}"


def blackbox_config(inventory: Inventory) -> dict[str, object]:
    """A blackbox.yml: one one-token completion module per probed node."""
    modules: dict[str, object] = {}
    for node in probed_nodes(inventory):
        body = {"model": node.model, "prompt": "ping", "max_tokens": 1}
        modules[module_name(node)] = {
            "prober": "http",
            "timeout": f"{PROBE_TIMEOUT_S:g}s",
            "http": {
                "method": "POST",
                "headers": {"Content-Type": "application/json"},
                "body": json.dumps(body),
                "valid_status_codes": [200],
                "fail_if_body_not_matches_regexp": ['"choices"'],
                "preferred_ip_protocol": "ip4",
            },
        }
    return {"modules": modules}


def scrape_job(inventory: Inventory) -> dict[str, object] | None:
    """The Prometheus scrape job of the probe: one target per probed node, its module a
    target label (``__param_module``); None when no node is probed."""
    targets = [{
        "targets": [f"{node.base_url.rstrip('/')}/v1/completions"],
        "labels": {"node": node.name, "__param_module": module_name(node)},
    } for node in probed_nodes(inventory)]
    if not targets:
        return None
    return {
        "job_name": GENERATE_PROBE_JOB,
        "scrape_interval": PROBE_INTERVAL,
        "scrape_timeout": f"{round((PROBE_TIMEOUT_S + 0.5) * 1000)}ms",
        "metrics_path": "/probe",
        "static_configs": targets,
        "relabel_configs": [
            {"source_labels": ["__address__"], "target_label": "__param_target"},
            {"source_labels": ["__param_target"], "target_label": "instance"},
            {"target_label": "__address__", "replacement": f"{LISTEN[0]}:{LISTEN[1]}"},
        ],
    }


def ensure_blackbox(inventory: Inventory, progress: Progress, *,
                    timeout_s: float = 30.0) -> str | None:
    """Write the config, start the exporter (or have a running one reload a changed
    config) and wait until it is ready; its URL, or None when no node is probed."""
    if not probed_nodes(inventory):
        return None
    for node in probed_nodes(inventory):
        host = urlsplit(node.base_url).hostname
        if host not in ("127.0.0.1", "localhost"):
            raise TestbedError(f"node {node.name}: the testbed probes loopback nodes only, "
                               f"not {host} ({node.base_url})")
    ensure_commands({EXPORTER: EXPORTER}, progress)
    directory = state_dir("blackbox")
    config = directory / "blackbox.yml"
    changed = write_checked(
        config, yaml.safe_dump(blackbox_config(inventory), sort_keys=False),
        lambda candidate: [EXPORTER, f"--config.file={candidate}", "--config.check"],
        "blackbox exporter --config.check")
    ensure_serving(
        URL, what="the generation probe (blackbox exporter)", changed=changed,
        argv=[EXPORTER, f"--config.file={config}",
              f"--web.listen-address={LISTEN[0]}:{LISTEN[1]}"],
        log=directory / "blackbox.log", pid_file=directory / "blackbox.pid",
        progress=progress, timeout_s=timeout_s)
    return URL


def stop_blackbox() -> bool:
    """Stop the exporter the testbed started (by its PID file); True if one was running."""
    directory = state_dir("blackbox")
    return stop_by_pid_file(directory / "blackbox.pid",
                            f"--config.file={directory / 'blackbox.yml'}".encode())


def readiness() -> tuple[str, str, bool]:
    """``testbed status``'s row for the probe."""
    return ("generation probe", URL, is_ready(URL))
