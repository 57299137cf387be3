"""Request faults, sent with the load generator: ``oversized_context`` and ``flood``.

Both run in the background from ``inject_end`` until revert (or until their own request
budget is spent); revert stops issuing, waits up to ``drain_s`` for requests in flight and
then cancels the rest (recorded ``unknown``/``cancelled``). Nothing on the node needs
putting back, so the journal record has no undo steps.

``result``: ``issued``, ``by_outcome`` (``ok`` or the error class → count),
``http_statuses`` (status → count), ``restart_count_before``/``after`` and ``crashed``
(the container restarted or is down after the fault) when the node has Docker access, and
``records`` (the :class:`~faultkit.model.records.RequestRecord` list, for the scenario's ledger).

- ``oversized_context input_tokens=N concurrency=C``: prompts of ``N`` tokens (default
  16384, above any testbed context) from ``C`` closed-loop workers. A well-behaved engine
  answers a clean 4xx; a 5xx, a reset or a crash is a finding.
- ``flood rate=R``: open-loop Poisson arrivals at ``R`` req/s (set it well above
  capacity), uncapped concurrency unless ``concurrency`` is given.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any, ClassVar

from faultkit.errors import DockerError
from faultkit.faults.base import Fault
from faultkit.faults.locks import NodeLock
from faultkit.faults.params import Param, ParamSpec
from faultkit.load.generator import LoadGenerator, LoadResult
from faultkit.load.profile import MAX_RATE_RPS, LoadProfile, Target

#: Requests in flight from one client process: its default open-file limit is 1,024.
_MAX_IN_FLIGHT = 1024
#: 1 Mi tokens: beyond the largest context window an engine offers today.
_MAX_INPUT_TOKENS = 1_048_576
_MAX_OUTPUT_TOKENS = 131_072


class _LoadFault(Fault):
    spans_outage: ClassVar[bool] = True  # the load *is* the fault: from its first request
    #: it only sends requests to the base_url: no container to prove it is the same process
    acts_on_container: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gen: LoadGenerator | None = None
        self._task: asyncio.Task[LoadResult] | None = None

    def _profile(self) -> LoadProfile:
        raise NotImplementedError

    def node_locks(self) -> list[NodeLock]:
        """None: a request fault only sends traffic and changes nothing on the node that a
        revert would put back, so it runs beside a fault that does (a flood while memory
        is squeezed is one experiment)."""
        return []

    async def _prepare(self) -> list[dict[str, Any]]:
        if self.node.docker is not None:
            with contextlib.suppress(DockerError):
                st = await asyncio.to_thread(self.platform.state, self.container)
                self.result["restart_count_before"] = st.restart_count
        return []

    async def _apply(self) -> None:
        self._gen = LoadGenerator(Target.from_node(self.node), self._profile(),
                                  id_prefix=self.id)
        self.acting(f"start sending {self.kind} requests")
        self._task = asyncio.ensure_future(self._gen.run())
        await asyncio.sleep(0)  # let it start issuing before inject_end

    async def _after_undo(self) -> None:
        if self._gen is None or self._task is None:
            return
        self._gen.stop()
        try:
            result = await asyncio.wait_for(asyncio.shield(self._task), self.params["drain_s"])
        except TimeoutError:
            self._gen.cancel_in_flight()
            result = await self._task
        self._summarise(result)
        if "restart_count_before" in self.result:
            with contextlib.suppress(DockerError):
                st = await asyncio.to_thread(self.platform.state, self.container)
                self.result["restart_count_after"] = st.restart_count
                self.result["crashed"] = (
                    st.restart_count > self.result["restart_count_before"] or not st.running
                )

    def _summarise(self, result: LoadResult) -> None:
        outcomes = collections.Counter(
            "ok" if r.status == "ok" else (r.error_class or r.status) for r in result.records
        )
        statuses = collections.Counter(str(r.http_status) for r in result.records if r.http_status)
        self.result.update(
            issued=len(result.records), by_outcome=dict(outcomes), http_statuses=dict(statuses),
            duration_s=round(result.duration_s, 3), records=result.records,
            ledger_violations=result.violations,
        )
        if not result.records:
            self.effect_missing(f"{self.kind} sent no request: nothing was injected")


class OversizedContext(_LoadFault):
    kind: ClassVar[str] = "oversized_context"
    PARAMS: ClassVar[ParamSpec] = {
        "input_tokens": Param(int, 16384, ge=1, le=_MAX_INPUT_TOKENS, unit="tokens"),
        "concurrency": Param(int, 4, ge=1, le=_MAX_IN_FLIGHT, unit="workers"),
        "requests": Param(int, None, ge=1, le=1_000_000),
        "output_tokens": Param(int, 8, ge=1, le=_MAX_OUTPUT_TOKENS, unit="tokens"),
        "drain_s": Param(float, 30.0, ge=0, le=600, unit="s"),
    }

    def what(self) -> str:
        return (f"send {self.params['input_tokens']}-token prompts from "
                f"{self.params['concurrency']} workers (over the context / KV budget)")

    def _profile(self) -> LoadProfile:
        p = self.params
        return LoadProfile(concurrency=p["concurrency"], requests=p["requests"],
                           input_tokens=p["input_tokens"], output_tokens=p["output_tokens"],
                           first_token_timeout_s=60.0, total_timeout_s=120.0,
                           reuse_connections=False)


class Flood(_LoadFault):
    kind: ClassVar[str] = "flood"
    PARAMS: ClassVar[ParamSpec] = {
        # what one client core can schedule (see MAX_RATE_RPS)
        "rate": Param(float, 50.0, gt=0, le=MAX_RATE_RPS, unit="req/s"),
        "concurrency": Param(int, None, ge=1, le=_MAX_IN_FLIGHT, unit="in flight"),
        "input_tokens": Param(int, 32, ge=1, le=_MAX_INPUT_TOKENS, unit="tokens"),
        "output_tokens": Param(int, 16, ge=1, le=_MAX_OUTPUT_TOKENS, unit="tokens"),
        "drain_s": Param(float, 10.0, ge=0, le=600, unit="s"),
    }

    def what(self) -> str:
        return f"open-loop flood at {self.params['rate']} req/s"

    def _profile(self) -> LoadProfile:
        p = self.params
        return LoadProfile(rate=p["rate"], concurrency=p["concurrency"],
                           input_tokens=p["input_tokens"], output_tokens=p["output_tokens"],
                           first_token_timeout_s=30.0, total_timeout_s=60.0,
                           reuse_connections=False)
