"""The diagnosis truth table: what really caused each run of the catalogue, stated from what
the test injected and the known defect of the config it rolled out — never from the report
code — and the check of every incident report against it.

A case is a scenario × node (a run directory). Its report must give:

- a first diagnosis (**cause**) among the keys the truth allows;
- a "What brought it back" that names the real actor (the restart policy only after a
  death the restart policy answered; the harness's revert, the rollback or the fault's own
  action otherwise);
- one count of lost requests: the headline, Key figures and the Symptoms table's Lost
  column all say ``measurement.json``'s ``lost_total``.

And wherever the report claims the kernel OOM-killed the engine, the kernel's own log
(:mod:`tests.e2e.kernel_log`, read here, never through the harness) must hold an OOM kill of
a process of that container inside the run's window. :func:`judge` returns the table's
rows; the e2e test requires every row to match, ``bench/diagnosis_truth.py`` prints it for
docs/diagnosis-truth.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.kernel_log import KernelLog, oom_killed_in

#: the kernel's OOM kills of a container's processes: (container ID, since, until) → kills
OomKills = Callable[[str, float, float], list[Any]]


@dataclass(frozen=True)
class Truth:
    """What caused a run, and what may be credited with bringing the node back."""

    why: str
    causes: frozenset[str]
    #: "What brought it back" must contain one of these (empty: nothing is asserted)
    brought_back: tuple[str, ...] = ()


def _t(why: str, *causes: str, back: tuple[str, ...] = ()) -> Truth:
    return Truth(why, frozenset(causes), back)


RESTART_POLICY = ("Docker's restart policy",)
REVERT = ("the harness's revert of the fault",)
NOTHING = ("not applicable", "no recorded action")

#: test id pattern → the truth, in order (the first matching pattern holds)
TABLE: tuple[tuple[str, Truth], ...] = (
    (r"test_kill\[.*\]|test_contained_failure\[.*\]|test_gateway_termination\[.*\]",
     _t("the test SIGKILLs the container's main process; the restart policy restarts it",
        "injected_kill", back=RESTART_POLICY)),
    (r"test_engine_death\[.*\]",
     _t("the test SIGKILLs the engine's worker inside the container; the node's own "
        "supervision (restart policy, entrypoint) brings it back",
        "injected_kill_process", back=RESTART_POLICY)),
    (r"test_engine_stall\[.*\]",
     _t("the test SIGSTOPs the engine's worker inside the container (the API may keep "
        "answering); its revert sends SIGCONT", "injected_stall", back=(*REVERT, "(SIGCONT"))),
    (r"test_pause\[vllm\]", _t("the inventory freezes this node with SIGSTOP of every process of "
                                "its container (pause_with: sigstop; the cgroup v1 freezer "
                                "refuses vLLM's); its revert sends SIGCONT",
                                "injected_stall", back=(*REVERT, "(SIGCONT"))),
    (r"test_pause\[.*\]", _t("the test freezes the container; its revert unpauses it",
                             "injected_pause", back=(*REVERT, "(unpause)"))),
    (r"test_partition\[.*\]", _t("the test cuts the node off the network; the revert "
                                 "reconnects it", "injected_partition", back=REVERT)),
    (r"test_latency\[.*\]", _t("the test adds 200 ms to the node's network path",
                               "injected_latency", back=REVERT)),
    (r"test_cold_start\[.*\]", _t("the test stops the container (docker stop); its revert "
                                  "starts it", "injected_stop", back=REVERT)),
    (r"test_node_restart\[.*\]", _t("the test restarts the nodes' containers on the host",
                                    "injected_node_restart", back=("the fault's own action",))),
    (r"test_host_restart\[.*\]|test_contained_failure_across_hosts\[.*\]",
     _t("the test restarts the node's whole Docker host", "injected_host_restart",
        back=("the fault's own action",))),
    (r"test_memory_squeeze\[.*\]",
     _t("the test lowers the container's memory limit: the kernel OOM-kills the engine "
        "(memory_exhaustion, confirmed by Docker's oom event) or the engine serves on "
        "squeezed", "memory_exhaustion", "injected_memory_squeeze")),
    (r"test_oom\[.*\]", _t("the test sends prompts past the node's context: the default "
                           "configs reject them cleanly or serve them, and may slow the "
                           "node's other users meanwhile (vLLM tokenizes them first)",
                           "served_through", "context_rejection",
                           "injected_oversized_context", back=NOTHING)),
    (r"test_overload\[.*\]", _t("the test floods the node above its capacity: users wait "
                                "or are turned away, the engine lives",
                                "injected_flood", "served_through")),
    (r"test_bad_input\[llama\]", _t("malformed requests; llama.cpp answers some with 500 (the "
                                    "node's accepted finding)",
                                    "bad_input_malformed_rejected_4xx", back=NOTHING)),
    (r"test_bad_input\[.*\]", _t("malformed requests, answered 4xx; a node still warming up "
                                 "may answer its other users slowly meanwhile",
                                 "served_through", "slow_service", back=NOTHING)),
    (r"test_limits\[.*\]", _t("prompts sized to the node's own context limit",
                              "served_through", "context_limits_kv_holds_declared_concurrency",
                              "context_rejection")),
    (r"test_rollout\[.*:.*-bad-maxlen\]|test_rollout\[llama:llama-bad-model\]",
     _t("KNOWN BAD config (inventory description): the engine exits at start-up; the "
        "rollout rolls it back", "config_rejected", "failed_rollout",
        back=("rollback to the previous config",))),
    (r"test_speculative\[.*\]", _t("the test rolls out a config that turns speculative "
                                   "decoding on (inventory description): it starts and "
                                   "serves, and the rollout's end puts the node's own back",
                                   "rollout_served")),
    (r"test_rollout\[.*\]", _t("a config whose defect only shows under a long prompt or "
                               "sustained load (inventory description): it starts and "
                               "serves the rollout", "rollout_served")),
    (r"test_upstream_failure\[gateway-(kill|partition|pause)\]",
     _t("the test injects the fault on an upstream behind the gateway",
        "injected_kill", "injected_partition", "injected_pause")),
    (r"test_gateway_rollout\[.*\]", _t("KNOWN BAD gateway config: an upstream at a wrong "
                                       "port; the rollout detects it and rolls back before "
                                       "the load, then an upstream is killed",
                                       "failed_rollout", "config_rejected")),
)


def truth_of(test_id: str) -> Truth | None:
    return next((t for pattern, t in TABLE if re.fullmatch(pattern, test_id)), None)


@dataclass
class Row:
    test_id: str
    truth: Truth
    cause: str = ""
    brought_back: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return not self.problems


def _section(md: str, title: str) -> str:
    start = md.find(f"\n## {title}\n")
    if start < 0:
        return ""
    end = md.find("\n## ", start + 1)
    return md[start: end if end > 0 else len(md)]


def _headline_lost(md: str) -> int | None:
    line = md.split("\n")[2] if md.count("\n") > 2 else ""
    if m := re.search(r"(\d+) of \d+ requests (?:was|were) lost", line):
        return int(m.group(1))
    if re.search(r"none of its \d+ requests was lost|no request was recorded", line):
        return 0
    return None


def _figures_lost(md: str) -> int | None:
    m = re.search(r"^\| Lost requests \| (\d+)", _section(md, "Key figures"), re.M)
    return int(m.group(1)) if m else None


def _symptoms_lost(md: str) -> int:
    rows = re.findall(r"^\| `[^`]+` \| (\d+|—) \|", _section(md, "Symptoms"), re.M)
    return sum(int(n) for n in rows if n != "—")


def check_run(test_id: str, run_dir: Path, truth: Truth, oom_kills: OomKills) -> Row:
    """One row of the table: the report in ``run_dir`` against ``truth``."""
    row = Row(test_id, truth)
    md = (run_dir / "incident.md").read_text()
    m = re.search(r"^\*\*Cause: (.*?)\*\*", md, re.M)
    diagnosis = _section(md, "Diagnosis")
    row.cause = m.group(1) if m else "(no cause line)"
    cause_key = _cause_keys(run_dir)[0]
    if cause_key not in truth.causes:
        row.problems.append(f"cause {cause_key!r} ({row.cause}), expected one of "
                            f"{sorted(truth.causes)}: {truth.why}")
    back = re.search(r"^What brought it back: (.*)$", md, re.M)
    row.brought_back = back.group(1) if back else ""
    if truth.brought_back and not any(b in row.brought_back for b in truth.brought_back):
        row.problems.append(f"brought back by {row.brought_back!r}, expected "
                            f"{' or '.join(repr(b) for b in truth.brought_back)}")
    measured = json.loads((run_dir / "measurement.json").read_text())["lost_total"] \
        if (run_dir / "measurement.json").exists() else None
    if measured is not None:
        said = {"headline": _headline_lost(md), "Key figures": _figures_lost(md),
                "Symptoms": _symptoms_lost(md)}
        for where, n in said.items():
            if n != measured:
                row.problems.append(f"{where} says {n} lost, measurement.json {measured}")
    quoted = re.search(r"\(exit (-?\d+)", row.cause)
    if quoted:
        died = _exit_codes(run_dir)
        if quoted.group(1) not in died:
            row.problems.append(f"the cause quotes exit {quoted.group(1)}, but Docker's die "
                                f"events in the run exited {sorted(died) or 'never'}")
    if "OOM-killed" in diagnosis or cause_key == "memory_exhaustion":
        info = json.loads((run_dir / "run.json").read_text())
        container = json.loads((run_dir / "container.json").read_text())["after"]["id"]
        if not oom_kills(container, info["t_start"], info["t_end"]):
            row.problems.append("the report says the kernel OOM-killed the engine, but the "
                                f"kernel log holds no OOM kill in container {container} in "
                                "the run's window")
    return row


def _exit_codes(run_dir: Path) -> set[str]:
    """The exit codes of Docker's ``die`` events the run recorded (timeline.jsonl)."""
    codes = set()
    for line in (run_dir / "timeline.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") == "docker_die" and event["data"].get("exit_code") is not None:
            codes.add(str(event["data"]["exit_code"]))
    return codes


def _cause_keys(run_dir: Path) -> list[str]:
    """The diagnosis keys as ``faultkit report`` computes them (the cause first)."""
    from reports import diagnose, load_run

    return [d.key for d in diagnose(load_run(run_dir))]


def judge(runs: Iterable[tuple[str, Path | None]], oom_kills: OomKills) -> list[Row]:
    """Every run with a truth and an incident report, checked."""
    rows = []
    for test_id, run_dir in sorted(runs, key=lambda r: r[0]):
        truth = truth_of(test_id)
        if truth is None or run_dir is None or not (run_dir / "incident.md").exists():
            continue
        rows.append(check_run(test_id, run_dir, truth, oom_kills))
    return rows


def runs_from_junit(paths: Iterable[Path]) -> dict[str, Path | None]:
    """test id → run directory, from the JUnit files of ``faultkit lanes --run`` (the
    ``faultkit_run_dir`` property the plugin writes); a later file's row wins."""
    import xml.etree.ElementTree as ET

    runs: dict[str, Path | None] = {}
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            props = {p.get("name"): p.get("value") for p in case.iter("property")}
            run_dir = props.get("faultkit_run_dir")
            if run_dir:
                runs[case.get("name", "?")] = Path(run_dir)
    return runs


def oom_kills_in(log: KernelLog) -> OomKills:
    """The kernel's OOM kills of one container's processes, from ``log``."""
    kills = log.oom_kills()

    def of(container: str, since: float, until: float) -> list[Any]:
        return list(oom_killed_in(kills, container, since, until))

    return of
