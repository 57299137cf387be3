"""The harness under its own faults (docs/definitions.md, "The harness under its own
faults"): what a run concludes when what the harness itself stands on fails mid-run.

Every test acts on its own scratch node (a llama-server container from the lab's image on
a free port) and, where it needs one, its own Prometheus (:mod:`harness_chaos_support`),
never on the lab's nodes or the lab's Prometheus; the journal lives under the test's own
``FAULTKIT_HOME``. The outcome is judged from Docker's inspect and the kernel's rule
tables (:func:`testbed.scratch.snapshot`, narrowed to the node by
:func:`harness_chaos_support.node_snapshot`) and from the run directory's files, not from
what the harness says about itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from faultkit.docker.host import docker_host
from faultkit.experiment import Experiment, NotJudgeable
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal
from faultkit.load.profile import BACKGROUND_PROFILE
from faultkit.rundir import RunDir
from testbed.scratch import remove_scratch, write_inventory
from testbed.torture import FAULTKIT
from tests.integration.harness_chaos_support import (
    PROMETHEUS,
    PrivatePrometheus,
    StarvedCgroup,
    assert_node_restored,
    docker_actions_since,
    full_filesystem,
    node_snapshot,
    scraped_node,
)

REPO = Path(__file__).parents[2]

pytestmark = [pytest.mark.docker,
              pytest.mark.skipif(not PROMETHEUS.exists(), reason="needs /usr/bin/prometheus")]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's own ``FAULTKIT_HOME``: its journal is nobody else's."""
    path = tmp_path / "home"
    monkeypatch.setenv("FAULTKIT_HOME", str(path))
    return path


@pytest.fixture(scope="module")
def watched(
    lab_inventory: Inventory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Inventory, Node, PrivatePrometheus]]:
    """A scratch node and a private Prometheus scraping it (1 s), its target up."""
    inventory, node = scraped_node(lab_inventory, "fk-chaos-watched")
    prometheus = PrivatePrometheus(inventory, tmp_path_factory.mktemp("prometheus"))
    try:
        prometheus.start()
        deadline = time.monotonic() + 30
        while not prometheus.has_target_up(node.name):
            assert time.monotonic() < deadline, "the private Prometheus never scraped the node"
            time.sleep(0.5)
        yield inventory, node, prometheus
    finally:
        prometheus.stop()
        remove_scratch(docker_host(node.docker.host), node.docker.container)  # type: ignore[union-attr]


def _series_before(run: RunDir, t: float) -> int:
    """How many captured samples of the node's series (prometheus.json) are dated before ``t``."""
    captured = run.read_object(run.prometheus_json)
    return sum(1 for series in captured.get("series", [])
               for stamp, _value in series.get("values", []) if stamp < t)


def test_prometheus_killed_and_restarted_during_observe_is_inconclusive(
    watched: tuple[Inventory, Node, PrivatePrometheus], home: Path, tmp_path: Path
) -> None:
    """Prometheus SIGKILLed one second into a pause and started again 3 s later (its data
    kept, as a real one's disk would be): the run is INCONCLUSIVE naming that gap, never
    PASS nor FAIL on the monitoring it could not see; the pause is reverted; the figures
    and the series from before the gap are kept."""
    inventory, node, prometheus = watched
    before = node_snapshot(node)
    exp = Experiment(scenario="pause", node=node, inventory=inventory,
                     run=RunDir.create(tmp_path / "runs", "pause", node.name),
                     load_profile=BACKGROUND_PROFILE)
    marks: dict[str, float] = {}

    async def kill_prometheus_meanwhile(_exp: Any) -> None:
        await asyncio.sleep(1.0)
        marks["killed"] = time.time()
        prometheus.kill()
        await asyncio.sleep(3.0)  # shorter than the 8 s after which a silence is an outage
        await asyncio.to_thread(prometheus.start)
        marks["ready"] = time.time()
        await asyncio.sleep(2.0)

    async def scenario() -> None:
        await exp.run_fault("pause", during=kill_prometheus_meanwhile)
        exp.check()

    try:
        asyncio.run(scenario())
    finally:
        exp.finalize()
        if not prometheus.ready():
            prometheus.start()
    verdict = exp.verdict
    measurement = exp.measurement
    assert verdict is not None and measurement is not None
    assert verdict.outcome == "INCONCLUSIVE", verdict.summary()
    (gap,) = [r for r in verdict.inconclusive if "Prometheus" in r]
    assert "restarted" in gap, gap
    # the gap named runs from the last answer before the kill to the answer after the start
    down = [e for e in exp.run.timeline() if e.kind == "prometheus_down"]
    assert len(down) == 1, down
    assert down[0].data["since"] <= marks["killed"] < down[0].data["restarted_at"] <= marks["ready"]
    # the fault is reverted and the node as before, judged by Docker and the kernel
    asyncio.run(assert_node_restored(node, before))
    assert FaultJournal(home / "journal").unreverted() == []
    # figures from before the gap are kept: the effect, the baseline, the series
    assert measurement.t_effect is not None and measurement.t_effect < marks["killed"]
    assert measurement.slis["baseline"].requests > 0
    assert _series_before(exp.run, marks["killed"]) > 0
    saved = json.loads(exp.run.verdict_json.read_text())
    assert saved["outcome"] == "INCONCLUSIVE"
    assert exp.run.incident_md.exists()


@pytest.mark.parametrize(("leave_bytes", "what_failed"), [(0, "node lock"),
                                                          (4096, "fault journal record")],
                         ids=["full", "room-for-the-lock-only"])
def test_journal_on_a_full_filesystem_applies_nothing(
    leave_bytes: int, what_failed: str, watched: tuple[Inventory, Node, PrivatePrometheus],
    home: Path, tmp_path: Path,
) -> None:
    """``faultkit inject`` with its journal on a full filesystem: one error line, exit 2,
    and Docker never saw the fault — no fault acts without its record on disk. With one
    page left the node lock is written and the record is not: that write is what stops it."""
    inventory, node, _prometheus = watched
    inventory_file = write_inventory(inventory, tmp_path / "inventory.yaml")
    before = node_snapshot(node)
    with full_filesystem(tmp_path / "mnt", leave_bytes=leave_bytes) as mnt:
        journal = mnt / "journal"
        journal.mkdir(mode=0o700)
        (journal / "reverted").mkdir(mode=0o700)
        t0 = time.time()
        done = subprocess.run(
            [*FAULTKIT, "inject", "pause", "--node", node.name, "--inventory",
             str(inventory_file), "--duration", "2s", "--journal-dir", str(journal)],
            capture_output=True, text=True, timeout=120, check=False)
        records = sorted(p.name for p in journal.glob("*.json"))
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert done.returncode == 2, done.stderr
    assert len(errors) == 1 and errors[0] == done.stderr.strip().splitlines()[-1], done.stderr
    assert what_failed in errors[0] and "No space left on device" in errors[0], errors
    assert "not applied" in errors[0] or "nothing was done" in errors[0], errors
    assert "applied:" not in done.stdout, done.stdout  # never announced as holding
    assert records == []
    assert "pause" not in docker_actions_since(node, t0)
    assert node_snapshot(node) == before


@pytest.mark.parametrize(("size_kib", "leave_bytes", "why"),
                         [(64, 0, "cannot be written"), (1024, 1024 * 1024, "MiB free")],
                         ids=["full", "too-small"])
def test_runs_directory_on_a_full_filesystem_is_inconclusive_before_injecting(
    size_kib: int, leave_bytes: int, why: str,
    watched: tuple[Inventory, Node, PrivatePrometheus], home: Path, tmp_path: Path,
) -> None:
    """A scenario whose runs directory is full (or too small to hold its evidence) ends
    INCONCLUSIVE before anything acts, with one reason; the node is untouched."""
    inventory, node, _prometheus = watched
    before = node_snapshot(node)
    with full_filesystem(tmp_path / "mnt", size_kib=size_kib, leave_bytes=leave_bytes) as mnt:
        exp = Experiment(scenario="pause", node=node, inventory=inventory,
                         run=RunDir.create(mnt / "runs", "pause", node.name),
                         load_profile=BACKGROUND_PROFILE)
        t0 = time.time()
        with pytest.raises(NotJudgeable) as aborted:
            asyncio.run(exp.run_fault("pause"))
        exp.finalize()
    assert exp.verdict is not None and exp.verdict.outcome == "INCONCLUSIVE"
    assert exp.verdict.inconclusive == (aborted.value.reason,)
    assert why in aborted.value.reason and "nothing was injected" in aborted.value.reason
    assert "\n" not in aborted.value.reason
    assert "pause" not in docker_actions_since(node, t0)
    assert node_snapshot(node) == before
    assert FaultJournal(home / "journal").ids() == []


PNG_END = b"IEND\xaeB`\x82"


def _start_scenario(
    inventory: Inventory, node: Node, tmp_path: Path, home: Path, kind: str = "pause",
    hold_s: float = 2.0,
) -> tuple[subprocess.Popen[str], RunDir]:
    """A scenario in a process of its own (:mod:`chaos_scenario`); its run directory."""
    inventory_file = write_inventory(inventory, tmp_path / "inventory.yaml")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.chaos_scenario", str(inventory_file),
         node.name, str(tmp_path / "runs"), kind, f"{hold_s:g}"],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "FAULTKIT_HOME": str(home)},
    )
    assert proc.stdout is not None
    return proc, RunDir(Path(proc.stdout.readline().strip()))


def _sigkill_once(proc: subprocess.Popen[Any], ready: Callable[[], bool], within_s: float,
                  what: str, said: Callable[[], str] = lambda: "") -> None:
    """SIGKILL ``proc`` the moment ``ready()`` holds (polled every 2 ms); fail if it ends
    first (with what it ``said``) or ``within_s`` passes. The process is gone when this
    returns, whatever happened."""
    deadline = time.monotonic() + within_s
    try:
        while not ready():
            assert proc.poll() is None, f"the process ended before {what}: {said()}"
            assert time.monotonic() < deadline, f"no {what} within {within_s:g} s"
            time.sleep(0.002)
        proc.kill()
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _rendering(run: RunDir) -> bool:
    """The report is being written: the verdict is in and a chart or report file (or its
    temporary file) has appeared."""
    if not run.verdict_json.exists():
        return False
    return any(p.name.endswith(".tmp") or p.name in ("timeline.png", "incident.md")
               for p in run.path.iterdir() if p.name not in ("verdict.json.tmp",))


def test_sigkill_while_rendering_the_report_leaves_it_whole_and_re_renderable(
    watched: tuple[Inventory, Node, PrivatePrometheus], home: Path, tmp_path: Path
) -> None:
    """The harness SIGKILLed while it writes the incident report: the node is back as it
    was (the fault was reverted before the report), no report file is torn (each is absent
    or whole), and ``faultkit sweep`` then ``faultkit report RUN_DIR`` complete it from the
    run's files, with the verdict the run reached."""
    inventory, node, _prometheus = watched
    before = node_snapshot(node)
    proc, run = _start_scenario(inventory, node, tmp_path, home)
    _sigkill_once(proc, lambda: _rendering(run), 90, "its report was rendered")
    png, md = run.timeline_png, run.incident_md
    assert not png.exists() or png.read_bytes().endswith(PNG_END), "a torn timeline.png"
    assert not md.exists(), "the report was complete before the kill: nothing was tested"
    asyncio.run(assert_node_restored(node, before))
    env = {**os.environ, "FAULTKIT_HOME": str(home)}
    swept = subprocess.run([*FAULTKIT, "sweep"], capture_output=True, text=True, env=env,
                           timeout=60, check=False)
    assert swept.returncode == 0, swept.stderr
    assert FaultJournal(home / "journal").unreverted() == []
    rendered = subprocess.run([*FAULTKIT, "report", str(run.path)], capture_output=True,
                              text=True, env=env, timeout=120, check=False)
    assert rendered.returncode == 0, rendered.stderr
    verdict = json.loads(run.verdict_json.read_text())
    assert verdict["outcome"] in md.read_text()
    assert png.read_bytes().endswith(PNG_END)
    # what the killed render left half-written is gone with the re-render
    renders = (f".{md.name}.", f".{png.name}.")
    assert [p.name for p in run.path.iterdir() if p.name.startswith(renders)] == []


def _timeline_has(run: RunDir, kind: str) -> bool:
    path = run.timeline_jsonl
    return path.exists() and f'"kind":"{kind}"' in path.read_text()


def _sent_late(run: RunDir, measurement: dict[str, Any]) -> tuple[int, int]:
    """Requests of the run's own ledger sent 0.5 s or more after their user arrived: (on one
    side of every edge of the outage, across one) — the edges being the fault's effect, the
    ``revert_end`` the timeline recorded and the recovery."""
    timeline = [json.loads(line) for line in run.timeline_jsonl.read_text().splitlines()]
    edges = [measurement["t_effect"], measurement["t_recovered"],
             *(e["t"] for e in timeline if e["kind"] == "revert_end" and e["source"] == "fault")]
    edges = [t for t in edges if t is not None]
    late = [0, 0]
    for line in run.ledger_jsonl.read_text().splitlines():
        r = json.loads(line)
        arrival, sent = r.get("t_scheduled"), r["t_invoke"]
        if arrival is not None and sent - arrival >= 0.5:
            late[any(arrival < t <= sent for t in edges)] += 1
    return late[0], late[1]


def test_a_starved_harness_is_never_a_false_pass_nor_a_false_fail(
    watched: tuple[Inventory, Node, PrivatePrometheus], home: Path, tmp_path: Path
) -> None:
    """The harness's process throttled to 1 % of a CPU (its own cgroup's CFS quota) for 3 s
    from 1 s before its pause is due to be reverted: its load client sends late, and so does
    its revert. A request sent late across an edge of the outage makes the run
    INCONCLUSIVE; without one every late request met what its user would have met, and the
    run reads PASS. Never FAIL; the node is restored."""
    inventory, node, _prometheus = watched
    before = node_snapshot(node)
    hold_s = 4.0
    proc, run = _start_scenario(inventory, node, tmp_path, home, hold_s=hold_s)
    starved = StarvedCgroup(proc.pid, f"faultkit-starve-{proc.pid}")
    try:
        deadline = time.monotonic() + 60
        while not _timeline_has(run, "inject_end"):
            assert proc.poll() is None and time.monotonic() < deadline, "never injected"
            time.sleep(0.05)
        time.sleep(hold_s - 1.0)
        starved.throttle(quota_us=1_000)  # 1 ms of CPU per 100 ms
        time.sleep(3.0)
        starved.release()
        throttled_s = starved.throttled_s()
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        starved.close()
    assert throttled_s > 1.0, "the quota never held the harness back: nothing was tested"
    verdict = json.loads(run.verdict_json.read_text())
    measurement = json.loads(run.measurement_json.read_text())
    beside, across = _sent_late(run, measurement)
    print(f"throttled {throttled_s:.2f} s; requests sent late: {beside} beside the edges, "
          f"{across} across one; verdict {verdict['outcome']}")
    assert beside + across > 0, "no request was sent late: the starvation was not tested"
    if across:
        assert verdict["outcome"] == "INCONCLUSIVE", verdict
        assert any("the load client's event loop stalled" in r for r in verdict["inconclusive"])
        assert measurement["sent_late"] == across
    else:
        assert verdict["outcome"] == "PASS", verdict
    asyncio.run(assert_node_restored(node, before))
    assert FaultJournal(home / "journal").unreverted() == []


def test_sigkill_during_a_rollback_then_sweep_restores_the_node(
    watched: tuple[Inventory, Node, PrivatePrometheus], home: Path, tmp_path: Path
) -> None:
    """A candidate config rolled out (the gate's rollout), and the harness SIGKILLed once its
    rollback has begun: ``faultkit sweep`` finishes the rollback from the journal, and the
    node is its old container spec, networks and limits again, serving. (The torture trials
    kill at random moments; this one waits for the rollback itself.)"""
    inventory, node, _prometheus = watched
    good = inventory.serving_config("llama-good")
    alt = good.model_copy(update={"command": [a if a != "2" else "1" for a in good.command]})
    inventory = inventory.model_copy(
        update={"serving_configs": {**inventory.serving_configs, "llama-alt": alt}})
    inventory_file = write_inventory(inventory, tmp_path / "inventory.yaml")
    journal = tmp_path / "journal"
    events = tmp_path / "inject.stderr"
    before = node_snapshot(node)
    with events.open("w") as err:
        proc = subprocess.Popen(
            [*FAULTKIT, "inject", "rollout", "--node", node.name, "--inventory",
             str(inventory_file), "--duration", "1s", "--journal-dir", str(journal),
             "--param", "config=llama-alt"], stdout=subprocess.DEVNULL, stderr=err)
        _sigkill_once(proc, lambda: "revert_start" in events.read_text(errors="replace"), 120,
                      "the rollback began", lambda: events.read_text(errors="replace")[-800:])
    assert [r.id for r in FaultJournal(journal).unreverted()], "nothing was left to sweep"
    swept = subprocess.run([*FAULTKIT, "sweep", "--journal-dir", str(journal), "--inventory",
                            str(inventory_file)], capture_output=True, text=True, timeout=180,
                           check=False)
    assert swept.returncode == 0, swept.stderr
    assert FaultJournal(journal).unreverted() == []
    asyncio.run(assert_node_restored(node, before))
