"""Undo steps: how to revert a fault, as plain data the journal can hold.

A step is a JSON object ``{"op": NAME, ...arguments}``. :func:`run_step` executes one;
every op is idempotent (running it twice, or on a node that is already restored, does
nothing and says so) and returns one line describing what it did. A fault's normal revert
and the sweep after a crashed harness run the *same* steps, so the sweep path is exercised
by every ordinary test.

A step whose Docker call fails in a way that may pass (``DockerError.transient``: a 5xx
answer, the engine unreachable, a timeout) is run again, up to :data:`UNDO_ATTEMPTS`
times within about :data:`UNDO_RETRY_S` seconds (waits 0.5, 1, 2, 4 s), each failure
logged with the step; that is safe because every op is idempotent. A step that still
fails raises, and its caller (the revert, the sweep) leaves the journal record
unreverted, so the next sweep tries again. :func:`retry_policy` is that policy, and a
fault's acts (:meth:`faultkit.faults.base.Fault.act`) are retried by it too.

Ops (``host`` is a Docker engine URL, ``container`` a container name):

==================  ==========================================================================
``unpause``         unpause the container if it is paused
``start``           start the container if it is not running (and not restarting)
``connect``         reconnect the container to ``network`` with ``aliases``/``ipv4_address``
``iptables_purge``  delete rules tagged ``comment`` from ``table`` in the container's netns
                    (``container: null`` = the host's namespace)
``qdisc_delete``    delete the root qdisc with handle fa17: on every interface of the netns
``memory``          set the memory limits back to ``memory`` / ``memswap`` bytes
``container``       recreate the container from ``spec`` (+ ``networks``) if it differs
``shell``           run ``command`` with ``sh -c`` (config rollout's command-pair mode)
``exec``            run ``command`` (argv) inside the container if it is running
``helpers_remove``  remove the helper containers labelled ``label`` on the node's host
``resume``          SIGCONT every process of the container that a signal stopped
==================  ==========================================================================
"""

from __future__ import annotations

import logging
import signal
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)
from tenacity.wait import wait_base

from faultkit.constants import LOCAL_DOCKER
from faultkit.docker.host import DockerHost, docker_host, spec_from_json, spec_to_json
from faultkit.errors import ContainerNotFound, DockerError, FaultError
from faultkit.platform import Netns, netns, platform_for

log = logging.getLogger(__name__)

Step = dict[str, Any]
StepRunner = Callable[[Mapping[str, Any]], str]

#: op name → function; tests may register extra ops (a fake backend).
OPS: dict[str, StepRunner] = {}
#: how many times a step (or a fault's act) is tried when Docker fails transiently, and
#: within how long (s)
UNDO_ATTEMPTS = 5
UNDO_RETRY_S = 10.0
#: the wait between two attempts (tests replace it with ``wait_none()``)
UNDO_WAIT: wait_base = wait_exponential(multiplier=0.5, max=4)


def op(name: str) -> Callable[[StepRunner], StepRunner]:
    def register(fn: StepRunner) -> StepRunner:
        OPS[name] = fn
        return fn

    return register


def run_step(step: Mapping[str, Any]) -> str:
    """Execute one undo step, retried while Docker fails transiently; one line of what it did.

    Unknown ops raise :class:`FaultError`; so does a step whose Docker call still fails
    transiently after :data:`UNDO_ATTEMPTS` attempts. Other errors are raised at once.
    """
    name = step.get("op")
    fn = OPS.get(str(name))
    if fn is None:
        raise FaultError(f"unknown undo op {name!r} in the fault journal (known: {sorted(OPS)})")
    what = describe_step(step)
    retrying = Retrying(**retry_policy(f"undo step {what}", log))
    try:
        line: str = retrying(fn, step)
    except DockerError as exc:
        if not exc.transient:
            raise
        tries = retrying.statistics.get("attempt_number", UNDO_ATTEMPTS)
        raise FaultError(f"{exc} (undo step {what}: still failing after {tries} attempts)") \
            from exc
    return line


def retry_policy(what: str, logger: logging.Logger) -> dict[str, Any]:
    """The one policy for a Docker call that changes something (an undo step, a fault's act),
    as keyword arguments of a tenacity ``Retrying`` or ``AsyncRetrying``.

    A transient :class:`DockerError` is tried again, up to :data:`UNDO_ATTEMPTS` times
    within about :data:`UNDO_RETRY_S` seconds (waits :data:`UNDO_WAIT`), each failure
    logged on ``logger`` as ``<what> failed (attempt n of N): <error>; trying again in
    <s> s``; anything else, and the last failure, is raised as it is. Read at each call, so
    a test that replaces :data:`UNDO_WAIT` replaces it everywhere.
    """

    def log_failure(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        logger.warning("%s failed (attempt %d of %d): %s; trying again in %.1f s",
                       what, state.attempt_number, UNDO_ATTEMPTS, exc,
                       state.next_action.sleep if state.next_action else 0.0)

    return {
        "stop": stop_after_attempt(UNDO_ATTEMPTS) | stop_after_delay(UNDO_RETRY_S),
        "wait": UNDO_WAIT,
        "retry": retry_if_exception(_transient),
        "before_sleep": log_failure,
        "reraise": True,
    }


def describe_step(step: Mapping[str, Any]) -> str:
    """``unpause vllm-a``: the op and what it acts on, never its data (a spec holds env)."""
    target = step.get("container") or "host"
    extra = step.get("network") or step.get("table") or ""
    return " ".join(str(part) for part in (step.get("op"), target, extra) if part)


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, DockerError) and exc.transient


def _host(step: Mapping[str, Any]) -> DockerHost:
    return docker_host(str(step.get("host") or LOCAL_DOCKER))


def _running_pid(step: Mapping[str, Any]) -> int | None:
    """The container's PID when it is up (paused counts); None when its netns is gone."""
    host, name = _host(step), str(step["container"])
    try:
        st = host.state(name)
    except ContainerNotFound:
        return None
    return st.pid if st.running and st.pid else None


def _netns_pid(step: Mapping[str, Any]) -> Netns:
    """Where to run iptables/tc in the container's netns (:func:`faultkit.platform.
    platform_for`: a proven PID on this machine, a helper container on a remote host);
    None when the container is gone or not running (its netns, and what was in it, went
    with it)."""
    name = str(step["container"])
    platform = platform_for(str(step.get("host") or LOCAL_DOCKER), _host(step))
    try:
        attrs = platform.host.inspect(name)
    except ContainerNotFound:
        return None
    if not (attrs.get("State") or {}).get("Running"):
        return None
    return platform.netns(name, str(step.get("fault_id") or "sweep"))


@op("helpers_remove")
def _helpers_remove(step: Mapping[str, Any]) -> str:
    """Remove the helper containers a fault left on the node's host (by their label)."""
    removed = _host(step).remove_labelled_containers(str(step["label"]))
    return f"removed {len(removed)} helper container(s) {step['label']}"


@op("exec")
def _exec(step: Mapping[str, Any]) -> str:
    if _running_pid(step) is None:
        return f"{step['container']} not running: nothing to run in it"
    code, _ = _host(step).exec(str(step["container"]), [str(a) for a in step["command"]])
    return f"ran {' '.join(map(str, step['command']))} in {step['container']} (exit {code})"


@op("resume")
def _resume(step: Mapping[str, Any]) -> str:
    """SIGCONT every process of the container: those a SIGSTOP stopped run again, and to a
    running one the signal does nothing. Every one, not only those the fault stopped, so a
    crash between its SIGSTOPs leaves none behind."""
    name = str(step["container"])
    if _running_pid(step) is None:
        return f"{name} not running: nothing to resume"
    platform = platform_for(str(step.get("host") or LOCAL_DOCKER), _host(step))
    fault_id = str(step.get("fault_id") or "sweep")
    _, processes = platform.processes(name, fault_id)
    resumed = platform.signal_processes(name, [pid for pid, _ in processes], signal.SIGCONT,
                                        fault_id)
    return f"sent SIGCONT to the {len(resumed)} process(es) of {name}"


@op("unpause")
def _unpause(step: Mapping[str, Any]) -> str:
    host, name = _host(step), str(step["container"])
    if host.state(name).paused:
        host.unpause(name)
        return f"unpaused {name}"
    return f"{name} was not paused"


@op("start")
def _start(step: Mapping[str, Any]) -> str:
    host, name = _host(step), str(step["container"])
    st = host.state(name)
    if st.paused:
        host.unpause(name)
    if st.running or st.restarting:
        return f"{name} already {st.status}"
    host.start(name)
    return f"started {name}"


@op("connect")
def _connect(step: Mapping[str, Any]) -> str:
    host, name, network = _host(step), str(step["container"]), str(step["network"])
    if network in host.endpoints(name):
        return f"{name} already on {network}"
    host.connect(
        name,
        network,
        aliases=list(step.get("aliases") or []),
        ipv4_address=step.get("ipv4_address"),
        links=list(step.get("links") or []),
    )
    return f"reconnected {name} to {network}"


@op("iptables_purge")
def _iptables_purge(step: Mapping[str, Any]) -> str:
    table, comment = str(step.get("table", "filter")), str(step["comment"])
    if step.get("container"):
        pid = _netns_pid(step)
        if pid is None:
            return f"{step['container']} not running: its netns (and rules) are gone"
        where = str(step["container"])
    else:
        pid, where = None, "host"
    n = netns.purge_rules(pid, table, comment)
    return f"removed {n} {table} rule(s) {comment} from {where}"


@op("qdisc_delete")
def _qdisc_delete(step: Mapping[str, Any]) -> str:
    pid = _netns_pid(step)
    if pid is None:
        return f"{step['container']} not running: its netns (and qdiscs) are gone"
    deleted = [dev for dev in netns.interfaces(pid) if netns.delete_root_qdisc(pid, dev)]
    return f"removed fa17: qdisc from {step['container']} {', '.join(deleted) or '(none left)'}"


@op("memory")
def _memory(step: Mapping[str, Any]) -> str:
    host, name = _host(step), str(step["container"])
    want = (int(step["memory"]), int(step["memswap"]))
    if host.memory_limits(name) == want:
        return f"{name} memory limits already {want[0]} / {want[1]}"
    memory, memswap = want
    if memory == 0:  # docker cannot "unset" a limit; the largest value is the closest thing
        memory, memswap = 2**62, -1
    host.set_memory_limits(name, memory, memswap)
    return f"restored {name} memory limit {want[0]} (swap {want[1]})"


def _comparable(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: spec.get(k) for k in ("image", "command", "memory", "restart_policy", "ports",
                                     "volumes", "labels")}


@op("container")
def _container(step: Mapping[str, Any]) -> str:
    host = _host(step)
    spec = spec_from_json(step["spec"])
    if host.exists(spec.name):
        current = spec_to_json(host.spec_of(spec.name))
        if _comparable(current) == _comparable(step["spec"]):
            st = host.state(spec.name)
            if not st.running and not st.restarting:
                host.start(spec.name)
                return f"{spec.name} had its previous config; started it"
            return f"{spec.name} already runs its previous config"
        host.remove(spec.name)
    host.create(spec)
    for network in step.get("networks") or []:
        if network.get("name") and network["name"] != spec.network:
            host.connect(spec.name, network["name"], aliases=network.get("aliases"))
    return f"recreated {spec.name} from its previous config ({spec.image})"


@op("shell")
def _shell(step: Mapping[str, Any]) -> str:
    command = str(step["command"])
    try:
        proc = subprocess.run(
            ["sh", "-c", command], capture_output=True, text=True, check=False,
            timeout=float(step.get("timeout_s", 600)),
        )
    except subprocess.TimeoutExpired as exc:
        raise FaultError(f"`{command}` did not finish in {exc.timeout:.0f} s") from exc
    if proc.returncode != 0:
        output = (proc.stderr or proc.stdout).strip()[-400:]
        raise FaultError(f"`{command}` failed (exit {proc.returncode}): {output}")
    return f"ran `{command}`"
