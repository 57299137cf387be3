"""``rollout``: put a named serving config on a node; roll back automatically if it fails.

Container mode (default): the node's container is replaced by one running the config's
image, command, env (merged over the current env), memory and restart policy, keeping
its name, published ports, mounts, networks and labels (``faultkit.serving-config`` set to
the config's name; ``faultkit.config-hash``, which described the previous config, dropped).
The previous container spec is journaled first, so ``faultkit sweep`` can restore it.

That spec keeps the previous container's env *values*, secrets included (``HF_TOKEN``, the
API key): they are not redacted nor stored by reference, because restoring must work in
the one moment it matters most, after the old container was removed and before the
candidate exists (the candidate's image fails to create, or the harness dies right
there). Then no container is left to resolve an ``env_from`` reference from, and the
previous value is nowhere else (it need not be in the inventory, and the candidate may
override it). So the value stays in the journal, which only its owner can read (0700
directory, 0600 files, see :mod:`faultkit.journal`), which holds nothing ``docker
inspect`` would not show the same user, and which is never copied into run directories
or reports; ``faultkit sweep`` prints a record's description, never its spec.

Command-pair mode: when the config has ``apply:``/``rollback:`` shell commands (e.g.
``docker compose -f base.yml -f candidate.yml up -d``), those are run instead.

Readiness is polled with a tenacity deadline (``config.ready_timeout_s``). A gateway
(``kind: gateway``) is ready only when it also reaches its upstreams: its readiness
endpoint says the proxy serves, not that any upstream does, so once it answers, the
gateway is asked to try each upstream (:func:`faultkit.probes.health.upstream_health`), and an
upstream it cannot reach although that upstream answers its own health check is a failed
rollout (a wrong upstream URL, port or key); ``result["upstream_check"]`` keeps what it
said. The rollout has
*failed* when the container exits for good, restart-loops (``max_restarts`` restarts,
OOM kills included), a gateway cannot reach a ready upstream, or never answers OK before
the deadline; then it rolls back to the
previous config and waits for ready again. ``result``: ``config``, ``ready`` (bool),
``failed_reason``, ``t_failed_detected`` / ``t_restored`` (epoch seconds),
``time_to_ready_s`` (monotonic), ``rolled_back`` (bool). A failed rollout is a finding:
``inject()`` returns normally and the body runs against the restored node. Before rolling
back, the failed candidate's last log lines are kept in :attr:`Rollout.candidate_log`
(container mode), *not* in ``result``: engines print their arguments, secrets included, so
a caller redacts them before writing them anywhere (the gate does).

:meth:`Rollout.promote` keeps a passing candidate: revert then leaves it in place.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any, ClassVar

import httpx
from tenacity import AsyncRetrying, RetryError, retry_if_result, stop_after_delay, wait_fixed

from faultkit.constants import LABEL_CONFIG_HASH, LABEL_SERVING_CONFIG
from faultkit.docker.host import ContainerSpec, spec_to_json
from faultkit.errors import FaultError, FaultkitError, FaultParamError, NodeNotReady
from faultkit.faults import undo
from faultkit.faults.base import Fault
from faultkit.faults.locks import NodeLock
from faultkit.faults.params import Param, ParamSpec
from faultkit.inventory import ServingConfig
from faultkit.model.events import EventKind
from faultkit.probes.health import probe, upstream_health, wait_ready

#: how much of a failed candidate's log is kept: a start-up traceback fits
CANDIDATE_LOG_LINES = 60


class Rollout(Fault):
    kind: ClassVar[str] = "rollout"
    spans_outage: ClassVar[bool] = True  # replacing the container is the outage
    PARAMS: ClassVar[ParamSpec] = {
        "config": (str, None),  # checked against the inventory's serving configs below
        # 0 would call the candidate restart-looping before it ever restarted
        "max_restarts": Param(int, 2, ge=1, le=100, unit="restarts"),
        "restore_timeout_s": Param(float, None, gt=0, le=3600, unit="s"),
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._t_created = time.time()  # when the candidate was created (set again then)
        if not self.params["config"]:
            raise FaultParamError(
                "rollout config: must be given as config=NAME, a serving config in the inventory",
                param="config", allowed="a serving config name")
        if self.inventory is None:
            raise FaultError("rollout needs the inventory (it holds the serving configs)")
        self.config: ServingConfig = self.inventory.serving_config(self.params["config"])
        self.promoted = False
        #: the failed candidate's log tail, unredacted (see the module docstring); "" if none
        self.candidate_log = ""
        self._restore_steps: list[dict[str, Any]] = []

    def node_locks(self) -> list[NodeLock]:
        """The node's fault lock while rolling out only (the gate runs faults on top of the
        candidate), and its ``rollout`` lock until reverted (one rollout at a time)."""
        return [NodeLock(self.node, until="inject"), NodeLock(self.node, layer="rollout")]

    def what(self) -> str:
        how = "apply/rollback commands" if self.config.apply else "replace the container"
        return f"roll out serving config {self.params['config']!r} ({how}); rollback on failure"

    # inject -------------------------------------------------------------------------
    async def _prepare(self) -> list[dict[str, Any]]:
        self.result.update(config=self.params["config"], rolled_back=False, ready=False)
        if self.config.apply:
            self.mode = "commands"
            assert self.config.rollback is not None
            self._restore_steps = [{"op": "shell", "command": self.config.rollback}]
            return list(self._restore_steps)
        self.mode = "container"
        previous = await asyncio.to_thread(self.platform.spec_of, self.container)
        endpoints = await asyncio.to_thread(self.platform.endpoints, self.container)
        self._previous = previous
        self._networks: list[dict[str, Any]] = [
            {"name": name, "aliases": [a for a in (ep.get("Aliases") or []) if a]}
            for name, ep in endpoints.items()
        ]
        self._restore_steps = [self.step("container", spec=spec_to_json(previous),
                                         networks=self._networks)]
        self.result["previous_image"] = previous.image
        return list(self._restore_steps)

    def _candidate(self) -> ContainerSpec:
        prev = self._previous
        labels = {k: v for k, v in prev.labels.items() if k != LABEL_CONFIG_HASH}
        labels[LABEL_SERVING_CONFIG] = str(self.params["config"])
        image = self.config.image
        if image == "faultkit/base:bookworm" and prev.image != image:
            image = prev.image  # the lab's base image is tagged locally; keep the resolved one
        return dataclasses.replace(
            prev,
            image=image,
            command=tuple(self.config.command),
            env={**prev.env, **self.config.env},
            memory=self.config.memory or prev.memory,
            cpu_shares=self.config.cpu_shares or prev.cpu_shares,
            restart_policy=self.config.restart,
            restart_max_retries=self.config.restart_max_retries,
            labels=labels,
        )

    async def _apply(self) -> None:
        t0 = time.monotonic()
        if self.config.apply:
            self.acting(f"run the apply command of {self.params['config']!r}")
            await self.act(undo.run_step, {"op": "shell", "command": self.config.apply})
        else:
            spec = self._candidate()
            self.acting(f"remove the current container to roll out {self.params['config']!r}")
            await self.act(self.platform.remove, self.container)
            self._t_created = time.time()
            await self.act(self.platform.create, spec)
            for net in self._networks:
                if net["name"] != spec.network:
                    await self.act(self.platform.connect, self.container, net["name"],
                                   aliases=net["aliases"])
        reason = await self._wait_candidate()
        if reason is None:
            self.result.update(ready=True, time_to_ready_s=round(time.monotonic() - t0, 3))
            return
        self.result.update(failed_reason=reason, t_failed_detected=time.time())
        self.emit(EventKind.CONFIG_FAILED, reason=reason, config=self.params["config"])
        if not self.config.apply:
            self.candidate_log = await self._candidate_log()
        await self._roll_back()

    async def _candidate_log(self) -> str:
        """The failed candidate container's last log lines, before the rollback removes it."""
        try:
            return await asyncio.to_thread(
                self.platform.logs, self.container, tail=CANDIDATE_LOG_LINES
            )
        except FaultkitError as exc:
            return f"(the candidate's logs could not be read: {exc})"

    async def _wait_candidate(self) -> str | None:
        """None when the candidate serves; else why it failed (exit, restart loop, deadline)."""
        deadline = self.config.ready_timeout_s
        last: dict[str, str] = {"why": f"not ready within {deadline:.0f} s"}

        async def check(http: httpx.AsyncClient) -> bool | str:
            """True: ready; False: keep waiting; a string: failed for good (why)."""
            result = await probe(self.node, http, timeout_s=2.0)
            if result.ok:
                return await self._upstreams_reachable(http, last)
            last["why"] = f"not ready within {deadline:.0f} s (last answer: {result.detail})"
            if self.config.apply:
                return False
            st = await asyncio.to_thread(self.platform.state, self.container)
            if st.restart_count >= self.params["max_restarts"]:
                oom = ", OOM-killed" if st.oom_killed else ""
                # the state reads 0 again while the policy restarts it: the die event has it
                died = await asyncio.to_thread(self.platform.last_exit_code, self.container,
                                               self._t_created)
                code = st.exit_code if died is None else died
                return f"restart loop: {st.restart_count} restarts (exit {code}{oom})"
            if not st.running and not st.restarting and st.status in ("exited", "dead"):
                await asyncio.sleep(1.0)  # the restart policy may be about to act
                st = await asyncio.to_thread(self.platform.state, self.container)
                if not st.running and not st.restarting:
                    oom = ", OOM-killed" if st.oom_killed else ""
                    return f"container exited (code {st.exit_code}{oom}) and stays down"
            return False

        outcome: bool | str = False
        async with httpx.AsyncClient() as http:
            try:
                async for attempt in AsyncRetrying(
                    stop=stop_after_delay(deadline), wait=wait_fixed(0.5),
                    retry=retry_if_result(lambda result: result is False),
                ):
                    with attempt:
                        outcome = await check(http)
                    done = attempt.retry_state.outcome
                    if done is not None and not done.failed:  # keep a raised error as is
                        attempt.retry_state.set_result(outcome)
            except RetryError:
                return last["why"]
        return outcome if isinstance(outcome, str) else None

    async def _upstreams_reachable(
        self, http: httpx.AsyncClient, last: dict[str, str]
    ) -> bool | str:
        """A gateway candidate that answers its readiness probe serves only if it reaches
        its upstreams (LiteLLM's readiness stays 200 with every upstream unreachable):
        True when it reaches every one, or when it cannot be asked (``result
        ["upstream_check"]`` says so: evidence missing, for the scenario to judge); a
        failure when an upstream it cannot reach is ready on its own (the config's
        fault: a wrong URL, port or key); False (keep waiting) while such an upstream is
        itself not ready. Not a gateway: True."""
        if self.node.kind != "gateway" or self.inventory is None:
            return True
        seen = await upstream_health(self.node, http)
        self.result["upstream_check"] = seen.to_json()
        if not seen.checked or not seen.unhealthy:
            return True
        broken = []
        for name, error in seen.unhealthy:
            upstream = next((n for n in self.inventory.nodes if n.name == name), None)
            if upstream is None or (await probe(upstream, http, timeout_s=2.0)).ok:
                broken.append(f"{name} ({error or 'no error given'})")
        if broken:
            return (
                "the gateway cannot reach upstream " + "; ".join(broken)
                + ", which answers its own health check: the config's upstream is wrong"
            )
        names = ", ".join(name for name, _ in seen.unhealthy)
        last["why"] = (f"upstream {names} unreachable through the gateway, and not ready on "
                       "its own either")
        return False

    async def _roll_back(self) -> None:
        self.emit(EventKind.ROLLBACK_START, config=self.params["config"])
        for step in self._restore_steps:
            await self.act(undo.run_step, step)
        await self._wait_restored()
        self.result.update(rolled_back=True, t_restored=time.time())
        if self._record is not None and self.journal is not None:
            self._record.undo = []  # already restored: nothing left for revert or the sweep
            await self.journal_io(self.journal.update, self._record)
        self.emit(EventKind.ROLLBACK_DONE, config=self.params["config"])

    async def _wait_restored(self) -> None:
        timeout = self.params["restore_timeout_s"]
        if timeout is None and self.node.serving_config and self.inventory is not None:
            timeout = self.inventory.serving_config(self.node.serving_config).ready_timeout_s
        timeout_s = float(timeout or 120.0)
        t_deadline = time.monotonic() + timeout_s
        try:
            await wait_ready(self.node, timeout_s=timeout_s)
        except NodeNotReady as exc:
            raise FaultError(
                f"rollback of {self.node.name!r} to its previous config did not become ready: "
                f"{exc}; inspect the container, then `faultkit testbed up` or fix it by hand"
            ) from exc
        await self._wait_restored_upstreams(t_deadline)

    async def _wait_restored_upstreams(self, t_deadline: float) -> None:
        """A restored gateway is ready as a candidate is (the module docstring): once its
        readiness answers, it must also reach its upstreams — until then its first users
        would meet a proxy that has not yet opened a connection to any of them. The
        previous config served before, so an upstream it still cannot reach at the
        deadline is not a rollback failure: the run's own evidence shows it."""
        if self.node.kind != "gateway":
            return
        async with httpx.AsyncClient() as http:
            async for attempt in AsyncRetrying(
                stop=stop_after_delay(max(0.0, t_deadline - time.monotonic())),
                wait=wait_fixed(0.5), retry_error_callback=lambda _: None,
                retry=retry_if_result(lambda seen: seen.checked and bool(seen.unhealthy)),
            ):
                with attempt:
                    seen = await upstream_health(self.node, http)
                if attempt.retry_state.outcome is not None \
                        and not attempt.retry_state.outcome.failed:
                    attempt.retry_state.set_result(seen)

    # promote / revert -----------------------------------------------------------------
    def promote(self) -> None:
        """Keep the candidate: revert will leave it in place (nothing to undo)."""
        if not self.result.get("ready"):
            raise FaultError(f"cannot promote {self.params['config']!r}: it did not become ready")
        self.promoted = True
        if self._record is not None and self.journal is not None:
            self._record.undo = []
            self.journal.update(self._record)
        self.emit(EventKind.PROMOTED, config=self.params["config"])

    async def _after_undo(self) -> None:
        if self.promoted:
            return
        if self.result.get("rolled_back"):
            return  # already restored during inject
        await self._wait_restored()
        self.result.setdefault("t_restored", time.time())

