"""Keep a candidate serving config on a node for a whole session of scenarios.

The rollout fault lives in one event loop on a background thread from roll-out to roll-
back, so its tasks never cross loops with the scenarios' own. Contract:
:meth:`CandidateSession.start` returns once the candidate serves (``None``) or has been
rolled back (why, as one line naming ``--serving-config``); :meth:`CandidateSession.stop`
rolls it back and is safe to call in either case. The pytest plugin's session fixture
drives it and ends the session on a failed start.
"""

from __future__ import annotations

import asyncio
import threading

from faultkit.constants import LABEL_SERVING_CONFIG
from faultkit.docker.host import docker_host
from faultkit.errors import FaultkitError
from faultkit.faults import make_fault
from faultkit.faults.rollout import Rollout
from faultkit.inventory import Inventory, Node
from reports.text import failed_start


def runs_serving_config(node: Node, config: str) -> bool:
    """Whether the node's container runs serving config ``config`` now, by the label the
    rollout puts on the container it starts (``False``: another config, no container, or
    Docker cannot tell)."""
    if node.docker is None:
        return False
    try:
        state = docker_host(node.docker.host).state(node.docker.container)
    except FaultkitError:
        return False
    return state.labels.get(LABEL_SERVING_CONFIG) == config


class CandidateSession:
    """The ``config`` serving config rolled onto ``node`` from :meth:`start` to :meth:`stop`."""

    def __init__(self, node: Node, inventory: Inventory, config: str) -> None:
        self.node = node
        self.inventory = inventory
        self.config = config
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def already_running(self) -> bool:
        """Whether the node's container already runs the candidate (as under
        ``faultkit gate``, which rolled it out itself)."""
        return runs_serving_config(self.node, self.config)

    def start(self) -> str | None:
        """Roll the candidate out (unless it already runs) and wait until it serves:
        ``None``; or, when it did not become ready or could not be rolled out, why (it is
        rolled back and the session stopped)."""
        if self.already_running():
            return None
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._main()), daemon=True, name="faultkit-candidate"
        )
        self._thread.start()
        self._ready.wait()
        if self.error:
            self.stop()
        return self.error

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._done = asyncio.Event()
        try:
            fault = make_fault("rollout", self.node, inventory=self.inventory, config=self.config)
            async with fault:
                if fault.result.get("rolled_back"):
                    assert isinstance(fault, Rollout)
                    why, _log = failed_start(str(fault.result.get("failed_reason")),
                                             fault.candidate_log, self.inventory)
                    self.error = (
                        f"--serving-config {self.config}: the candidate did not become ready "
                        f"({why}); it was rolled back"
                    )
                self._ready.set()
                await self._done.wait()
        except FaultkitError as exc:
            self.error = f"--serving-config {self.config}: {exc}"
        finally:
            self._ready.set()

    def stop(self) -> None:
        """Roll the candidate back (waits up to 5 minutes for the rollback)."""
        if self._thread is None:
            return
        if self._loop is not None and self._done is not None:
            self._loop.call_soon_threadsafe(self._done.set)
        self._thread.join(timeout=300)
        self._thread = None
