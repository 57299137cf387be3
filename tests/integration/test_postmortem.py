"""``faultkit postmortem`` against ground truth it never reads: the test itself breaks a
scratch node out of band — ``docker kill``, ``docker pause``, ``docker network
disconnect``; faultkit is not involved — while a plain client the test runs (an httpx loop
at :data:`RATE` req/s) writes its own record of every request, then runs the real CLI on the
window from monitoring alone and holds what it wrote against Docker's own events
(``docker events``, read with the ``docker`` CLI), the client's record and what the test
injected:

- the outage's start and end bounds (scrape stamps) enclose Docker's own events, with one
  scrape's duration of slack on their later side (:data:`SCRAPE_SLACK_S`: Prometheus stamps
  a scrape when it *begins*);
- the alert that detected it fired within a few evaluations of Docker's event;
- the lost requests the server's counters give (a range) hold the client's failed requests;
- the shared incident report (``incident.md``) names the act the test did as the cause.

A scratch simulated vLLM node (``testbed.simnode``: it counts its requests like vLLM,
``http_requests_total``) and a private Prometheus scraping it every second: nothing of the
lab is touched. The node and the client live for the module; each test waits for a
baseline of traffic after the previous test's recovery.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from faultkit.docker.host import docker_host
from faultkit.inventory import Inventory, Node, PrometheusRef
from faultkit.pager import fetch_notifications
from faultkit.postmortem import POSTMORTEM_JSON, Postmortem
from faultkit.postmortem.collect import LOG_LEAD_S
from faultkit.rundir import RunDir
from reports.load import load_run
from reports.phases import recovery_phases
from slo.types import read_measurement, read_verdict
from testbed.lab import LAB_NETWORK
from testbed.scratch import free_port, remove_scratch, scratch_node, write_inventory
from testbed.torture import FAULTKIT
from testbed.truth_sources import truth_events
from tests.integration.harness_chaos_support import PROMETHEUS, PrivatePrometheus

pytestmark = [pytest.mark.docker, pytest.mark.own_containers,
              pytest.mark.skipif(not PROMETHEUS.exists(), reason="needs /usr/bin/prometheus")]

#: the private Prometheus' scrape interval, and so the most a scrape lasts (its timeout)
SCRAPE_SLACK_S = 1.0
#: how long each test keeps the node out
DOWN_S = 5.0
#: the test's own client: requests per second, and how long one may take (longer than a
#: pause: a frozen engine answers its backlog when it resumes, and a client that gave up
#: would be a loss the server's counters cannot see — docs/postmortem.md)
RATE = 5.0
CLIENT_TIMEOUT_S = 15.0
#: traffic before each outage, inside the window given to the postmortem (its rate)
BASELINE_S = 12.0


@dataclass(frozen=True)
class Sent:
    """One request of the test's client: when it was sent and ended (epoch s), and
    whether it was answered 200."""

    t_sent: float
    t_end: float
    ok: bool
    error: str


class Client:
    """An open-loop client: one chat request every ``1 / RATE`` s, each in its own worker,
    its outcome recorded whatever the server does."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.records: list[Sent] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=int(RATE * CLIENT_TIMEOUT_S) + 8)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _one(self, http: httpx.Client) -> None:
        sent = time.time()
        try:
            answer = http.post(f"{self.node.base_url}/v1/chat/completions", json={
                "model": self.node.model, "max_tokens": 4,
                "messages": [{"role": "user", "content": "hello"}]})
            ok, error = answer.status_code == 200, f"http {answer.status_code}"
        except httpx.HTTPError as exc:
            ok, error = False, type(exc).__name__
        with self._lock:
            self.records.append(Sent(sent, time.time(), ok, "" if ok else error))

    def _loop(self) -> None:
        with httpx.Client(timeout=CLIENT_TIMEOUT_S,
                          limits=httpx.Limits(max_connections=200)) as http:
            next_t = time.monotonic()
            while not self._stop.is_set():
                self._pool.submit(self._one, http)
                next_t += 1.0 / RATE
                self._stop.wait(max(0.0, next_t - time.monotonic()))
            self._pool.shutdown(wait=True)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(CLIENT_TIMEOUT_S + 10)

    def settled(self, since: float, until: float) -> list[Sent]:
        """The requests sent in ``[since, until]``, once each has ended (polled: a request
        in flight may take up to the client's timeout)."""
        deadline = time.monotonic() + CLIENT_TIMEOUT_S + 5
        expected = int((until - since) * RATE) - 2
        while True:
            with self._lock:
                found = [r for r in self.records if since <= r.t_sent <= until]
            if len(found) >= expected or time.monotonic() > deadline:
                return found
            time.sleep(0.2)


@dataclass
class Watched:
    inventory: Inventory
    node: Node
    client: Client
    directory: Path
    #: when the previous test's node recovered (the next baseline starts after it)
    quiet_since: float


@contextlib.contextmanager
def watching(lab_inventory: Inventory, directory: Path, name: str,
             **node_changes: Any) -> Iterator[Watched]:
    """A scratch sim-vllm node (``node_changes``: e.g. another serving config) under the
    test's own client, scraped (1 s) by a private Prometheus that sends its alerts to the
    lab's Alertmanager, its target up."""
    inventory, node = scratch_node(lab_inventory, name, base_name="sim-vllm",
                                   prometheus=PrometheusRef(job=name), **node_changes)
    prometheus_ref = inventory.prometheus.model_copy(update={
        "url": f"http://127.0.0.1:{free_port()}", "scrape_interval_s": 1.0,
        "slo_evaluation_interval_s": 5.0})
    # its alerts go to the lab's Alertmanager (grouped by alertname and node: a group of
    # their own), whose pages the lab's pager keeps — the postmortem reads them there
    inventory = inventory.model_copy(update={"prometheus": prometheus_ref,
                                             "alertmanager": lab_inventory.alertmanager})
    prometheus = PrivatePrometheus(inventory, directory / "prometheus")
    client = Client(node)
    try:
        client.start()  # traffic before the first scrape: every sample shows it
        prometheus.start()
        deadline = time.monotonic() + 30
        while not prometheus.has_target_up(node.name):
            assert time.monotonic() < deadline, "the private Prometheus never scraped the node"
            time.sleep(0.5)
        yield Watched(inventory, node, client, directory, time.time())
    finally:
        client.stop()
        prometheus.stop()
        assert node.docker is not None
        remove_scratch(docker_host(node.docker.host), node.docker.container)


@pytest.fixture(scope="module")
def watched(lab_inventory: Inventory, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Watched]:
    """The scratch node of the kill, pause and network-cut trials, on the lab's config."""
    with watching(lab_inventory, tmp_path_factory.mktemp("postmortem"), "fk-postmortem") as w:
        yield w


@pytest.fixture
def watched_oom(lab_inventory: Inventory, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[Watched]:
    """A scratch node on the lab's KNOWN BAD ``sim-vllm-bad-oom``: no chunked prefill at
    0.99 utilisation, so a prompt over ~1,500 tokens is prefilled in one step that does
    not fit (CUDA out of memory) and the engine dies; Docker's restart policy
    (``on-failure``) starts it again."""
    with watching(lab_inventory, tmp_path_factory.mktemp("postmortem-oom"),
                  "fk-postmortem-oom", serving_config="sim-vllm-bad-oom") as w:
        yield w


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True,
                          timeout=60).stdout


def docker_events(container: str, since: float, until: float) -> list[dict[str, Any]]:
    """Docker's own events naming ``container`` (the ``docker`` CLI, not faultkit): its
    container events and the network events that name it."""
    out = docker("events", "--since", str(int(since)), "--until", str(int(until) + 1),
                 "--format", "{{json .}}")
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    container_id = docker("inspect", "--format", "{{.Id}}", container).strip()
    return [e for e in events
            if (e.get("Actor") or {}).get("ID") == container_id
            or ((e.get("Actor") or {}).get("Attributes") or {}).get("container") == container_id]


def event_time(events: list[dict[str, Any]], action: str, after: float) -> float:
    """Epoch seconds of the first ``action`` event at or after ``after``."""
    stamps = [int(e["timeNano"]) / 1e9 for e in events if e.get("Action") == action]
    found = [t for t in stamps if t >= after]
    assert found, f"Docker recorded no {action!r} event after {after} (events: {stamps})"
    return min(found)


def wait_until_ok(base_url: str, timeout_s: float = 60.0) -> float:
    """GET /health every 0.1 s until 200; the epoch time the first 200 was received."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base_url}/health", timeout=1.0).status_code == 200:
                return time.time()
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{base_url} did not answer /health 200 within {timeout_s} s")


@dataclass
class Outcome:
    """What the postmortem wrote for the one incident, and the truth beside it."""

    pm: Postmortem
    run: RunDir
    report: str
    t_effect: float  # Docker's event of the act
    t_restored: float  # Docker's event of the undoing
    failed: list[Sent]
    sent: list[Sent]
    #: the lab pager's own record of the node's firing notifications in the window (the
    #: private Prometheus sends its alerts to the lab's Alertmanager)
    pages: list[float]


def out_of_band(w: Watched, tmp: Path, act: Callable[[str], object],
                undo: Callable[[str], object],
                effect_action: str, restore_action: str) -> Outcome:
    """Wait for a baseline, ``act`` on the container, ``undo`` it :data:`DOWN_S` later, wait
    for the recovery to hold, then run ``faultkit postmortem`` over the window."""
    assert w.node.docker is not None
    container = w.node.docker.container
    wait = w.quiet_since + BASELINE_S + 1 - time.time()
    if wait > 0:
        time.sleep(wait)
    t_from = time.time() - BASELINE_S
    t_act = time.time()
    act(container)
    time.sleep(DOWN_S)
    undo(container)
    wait_until_ok(w.node.base_url)
    hold_s = w.inventory.slo_for(w.node).recovery_hold_s
    time.sleep(hold_s + 3.0)  # good scrapes enough for the recovery to hold
    t_end = time.time()
    w.quiet_since = t_end
    events = docker_events(container, t_act - 1, t_end)
    t_effect = event_time(events, effect_action, t_act)
    t_restored = event_time(events, restore_action, t_effect)
    sent = w.client.settled(t_from, t_end)

    runs = tmp / "runs"
    inventory_file = write_inventory(w.inventory, tmp / "inventory.yaml")
    done = subprocess.run(
        [*FAULTKIT, "postmortem", "--node", w.node.name, "--inventory", str(inventory_file),
         "--from", str(t_from), "--to", str(t_end), "--runs-dir", str(runs)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    [index] = [d for d in runs.iterdir() if (d / POSTMORTEM_JSON).exists()]
    pm = Postmortem.from_json(json.loads((index / POSTMORTEM_JSON).read_text()))
    [name] = pm.runs
    run = RunDir(runs / name)
    return Outcome(pm, run, run.incident_md.read_text(), t_effect, t_restored,
                   [r for r in sent if not r.ok], sent, firing_pages(w, t_from, t_end))


def firing_pages(w: Watched, since: float, until: float) -> list[float]:
    """When the lab's pager received a firing notification naming the scratch node."""
    assert w.inventory.alertmanager is not None and w.inventory.alertmanager.pager_url
    return sorted(
        n.t_received for n in fetch_notifications(w.inventory.alertmanager.pager_url,
                                                  since, until)
        if n.payload.get("status") == "firing" and any(
            (a.get("labels") or {}).get("node") == w.node.name
            for a in n.payload.get("alerts") or ()))


def check(o: Outcome, *, cause: str) -> dict[str, Any]:
    """The assertions every out-of-band incident shares; the measured differences."""
    [incident] = o.pm.findings.incidents
    start, end = incident.start, incident.end
    assert start.after is not None and start.by is not None
    assert end is not None and end.after is not None and end.by is not None and incident.held
    m, verdict = read_measurement(o.run), read_verdict(o.run)
    assert m is not None and verdict is not None
    estimate = m.server_cross_check or {}
    measured = {
        "effect - start.after": o.t_effect - start.after,
        "start.by - effect": start.by - o.t_effect,
        "restored - end.after": o.t_restored - end.after,
        "end.by - restored": end.by - o.t_restored,
        "detection - effect": (None if incident.detection is None
                               else incident.detection.t_first - o.t_effect),
        "page - firing": (None if m.paging is None or m.paging.t_paged is None
                          or incident.detection is None
                          else m.paging.t_paged - incident.detection.t_first),
        "client failed": len(o.failed), "client sent": len(o.sent),
        "estimate": [estimate.get("lost"), estimate.get("low"), estimate.get("high")],
        "verdict": verdict.outcome,
    }
    print("postmortem vs truth:", json.dumps(measured, indent=1))
    # began: after the last good scrape, by the first failed one (one scrape's slack)
    assert start.after < o.t_effect <= start.by + SCRAPE_SLACK_S, measured
    # ended: the first good scrape answered after Docker undid the act; it is stamped when
    # it began, which may be up to one scrape's duration before (a scrape of a frozen
    # engine waits, and is answered when it resumes)
    assert o.t_restored < end.by + SCRAPE_SLACK_S, measured
    assert start.width_s is not None and start.width_s <= o.pm.scrape_interval_s + 0.5
    assert end.width_s is not None and end.width_s <= o.pm.scrape_interval_s + 0.5
    # detection: the node-down rule (for: 0s, evaluated every second) fired on it: by the
    # next scrape's start, its timeout (a frozen target answers nothing), the next
    # evaluation, and one interval of Prometheus' own lag — four intervals at most
    assert incident.detection is not None and incident.detection.alert == "FaultkitNodeDown"
    assert o.t_effect - SCRAPE_SLACK_S < incident.detection.t_first \
        <= o.t_effect + 4 * SCRAPE_SLACK_S, measured
    # the page: the first firing notification the pager received at or after the act, no
    # sooner than the alert fired, and within the lab route's group_wait (2 s) and its
    # delivery after it
    paged = [t for t in o.pages if t >= o.t_effect]
    assert m.paging is not None and paged, (m.paging, o.pages)
    assert m.paging.t_paged == paged[0], (m.paging, o.pages)
    assert incident.detection.t_first <= m.paging.t_paged <= incident.detection.t_first + 6.0
    assert m.paging.page_s is not None and f"paged at {m.paging.page_s:.2f} s" in o.report
    assert "someone was paged after" in o.report  # the headline says it too
    # users affected: the client's own failures inside the server-side estimate's range
    low, high = estimate.get("low"), estimate.get("high")
    assert isinstance(low, int) and isinstance(high, int), estimate
    assert low <= len(o.failed) <= high, measured
    # the shared incident report: the cause is the act the test did, no PASS without a client
    found = re.search(r"^\*\*Cause: (.+)\*\*", o.report, re.MULTILINE)
    assert found is not None and cause in found.group(1), found and found.group(1)
    assert verdict.outcome != "PASS"
    assert "no ledger" in o.report or "no client recorded" in o.report
    return measured


def test_an_out_of_band_kill(watched: Watched, tmp_path: Path) -> None:
    o = out_of_band(watched, tmp_path, lambda c: docker("kill", c), lambda c: docker("start", c),
                    "die", "start")
    check(o, cause="killed through Docker's API (docker kill")
    assert o.failed, "the client saw no failure: the kill did not cut it"
    restarted_in_phases(o)


def restarted_in_phases(o: Outcome) -> None:
    """The container started again: its way back is cut at Docker's start and the
    engine's own start-up lines, the start no sooner than Docker's own event of it."""
    phases = recovery_phases(load_run(o.run.path))
    names = [p.name for p in phases]
    assert "until it started again" in names and "until the weights were loaded" in names, names
    started = next(p for p in phases if p.name == "until it started again")
    assert abs(started.t_end - o.t_restored) < 0.01, (started, o.t_restored)
    assert "until the weights were loaded" in o.report


def test_two_outages_in_a_window_without_an_end_are_found_apart(
        watched: Watched, tmp_path: Path) -> None:
    """No ``--to`` (the window runs to now): two out-of-band kills 5 s down each, the
    second after the first's recovery held, are two incidents with a report each — each
    bounded around Docker's own events of its kill, in order, no third found."""
    w = watched
    assert w.node.docker is not None
    container = w.node.docker.container
    hold_s = w.inventory.slo_for(w.node).recovery_hold_s
    wait = w.quiet_since + BASELINE_S + 1 - time.time()
    if wait > 0:
        time.sleep(wait)
    t_from = time.time() - BASELINE_S
    acts = []
    for _ in range(2):
        t_act = time.time()
        docker("kill", container)
        time.sleep(DOWN_S)
        docker("start", container)
        wait_until_ok(w.node.base_url)
        time.sleep(hold_s + 3.0)
        acts.append(t_act)
    w.quiet_since = time.time()
    events = docker_events(container, acts[0] - 1, w.quiet_since)
    truth = [(event_time(events, "die", t), event_time(events, "start", event_time(
        events, "die", t))) for t in acts]

    runs = tmp_path / "runs"
    inventory_file = write_inventory(w.inventory, tmp_path / "inventory.yaml")
    done = subprocess.run(
        [*FAULTKIT, "postmortem", "--node", w.node.name, "--inventory", str(inventory_file),
         "--from", str(t_from), "--runs-dir", str(runs)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    [index] = [d for d in runs.iterdir() if (d / POSTMORTEM_JSON).exists()]
    pm = Postmortem.from_json(json.loads((index / POSTMORTEM_JSON).read_text()))
    found = pm.findings.incidents
    assert len(found) == 2 and len(pm.runs) == 2, (found, truth)
    for incident, (died, started) in zip(found, truth, strict=True):
        assert incident.start.after is not None and incident.start.by is not None
        assert incident.end is not None and incident.end.by is not None and incident.held
        assert incident.start.after < died <= incident.start.by + SCRAPE_SLACK_S, (incident,
                                                                                  died)
        assert started < incident.end.by + SCRAPE_SLACK_S, (incident, started)
    for name in pm.runs:  # each incident its own report
        assert "killed through Docker's API (docker kill" in RunDir(runs / name).incident_md\
            .read_text()
    assert all(str(runs / name / "incident.md") in done.stdout for name in pm.runs)


def test_an_out_of_band_pause(watched: Watched, tmp_path: Path) -> None:
    o = out_of_band(watched, tmp_path, lambda c: docker("pause", c),
                    lambda c: docker("unpause", c), "pause", "unpause")
    check(o, cause="paused through Docker's API (docker pause)")


def test_an_out_of_band_network_cut(watched: Watched, tmp_path: Path) -> None:
    o = out_of_band(watched, tmp_path,
                    lambda c: docker("network", "disconnect", LAB_NETWORK, c),
                    lambda c: docker("network", "connect", LAB_NETWORK, c),
                    "disconnect", "connect")
    check(o, cause="cut off the network through Docker's API (docker network disconnect)")
    assert o.failed, "the client saw no failure: the cut did not reach it"


#: a prompt the OOM-prone config prefills in one step that does not fit (~3,000 tokens;
#: its limit is 4,096)
LONG_PROMPT = "word " * 3000


def send_long_prompt(w: Watched) -> Callable[[str], object]:
    """The out-of-band act of the OOM trial: one long prompt, sent by the test (not by
    faultkit, not by the client), in a thread of its own (the engine dies under it)."""
    def act(_container: str) -> object:
        def post() -> None:
            with contextlib.suppress(httpx.HTTPError):
                httpx.post(f"{w.node.base_url}/v1/completions", timeout=30.0,
                           json={"model": w.node.model, "prompt": LONG_PROMPT,
                                 "max_tokens": 1})
        thread = threading.Thread(target=post, daemon=True)
        thread.start()
        return thread
    return act


def test_an_oom_through_a_config(watched_oom: Watched, tmp_path: Path) -> None:
    """The engine dies of a CUDA OOM its own config invites, and its restart policy brings
    it back: the report names the GPU OOM from the engine's own words, and the simulator's
    own record of the OOM (its truth file, which faultkit never reads) lies before Docker's
    die and inside the log's lead before the outage."""
    since = time.time()
    o = out_of_band(watched_oom, tmp_path, send_long_prompt(watched_oom), lambda _c: None,
                    "die", "start")
    measured = check(o, cause="GPU out of memory during prefill")
    [incident] = o.pm.findings.incidents
    assert incident.start.after is not None and incident.start.by is not None
    ooms = [e["t"] for e in truth_events(watched_oom.node, since) if e.get("event") == "oom"]
    assert len(ooms) == 1, ooms
    # the OOM comes before Docker's die, and may come before the last good scrape too (a
    # dying engine still answers a scrape): inside the lead the report's log is read from
    assert ooms[0] <= o.t_effect, "Docker saw the engine die before it ran out of memory"
    assert incident.start.after - LOG_LEAD_S < ooms[0] <= incident.start.by, measured
    assert o.failed, "the client saw no failure: the engine's death did not reach it"
    restarted_in_phases(o)
