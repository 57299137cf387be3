"""Every exception the faultkit core raises, in one place.

Each message says what went wrong *and* what to do about it; data rides along as
attributes so callers (CLI, pytest plugin) can render it their own way.

Tree::

    FaultkitError
    ├── InventoryError            malformed or inconsistent inventory file
    ├── DockerError               the Docker engine or a container misbehaved
    │   ├── DockerUnavailable     cannot reach the engine at a docker host URL
    │   └── ContainerNotFound     the node's container does not exist
    ├── NodeError                 a node did not answer as expected (readiness, API)
    │   └── NodeNotReady          readiness deadline passed
    ├── FaultError                a fault could not be injected or reverted
    │   ├── FaultParamError       unknown fault kind or a parameter out of range (nothing was done)
    │   ├── FaultRefused          blast-radius policy forbids it (nothing was done)
    │   ├── FaultAlreadyActive    a second inject of the same fault instance
    │   ├── FaultUnsupported      the kernel / engine lacks what the fault needs
    │   └── FaultNotApplied       an act of the fault failed after its retries (reverted)
    ├── JournalError              the fault journal is unreadable or locked
    │   └── JournalUnwritable     a record or node lock could not be written before the
    │                             fault acted (a full disk): nothing was done
    ├── LoadError                 the load generator could not run (e.g. endpoint unreachable)
    │   ├── LedgerInvariantError  a request lacks exactly one terminal record (a harness bug)
    │   └── LedgerFileError       a ledger file cannot be written or read
    └── PagerUnavailable          a `faultkit pager` did not answer, or answered garbage

The packages above the core raise their own subclasses of :class:`FaultkitError`, kept
next to their owners: ``slo.errors`` (Prometheus), ``reports.errors`` (``ReportError``,
``NotARunDirectory``) and ``testbed.errors`` (``TestbedError``).
"""

from __future__ import annotations


class FaultkitError(Exception):
    """Base class: anything faultkit raises on purpose."""


class InventoryError(FaultkitError):
    """The inventory file is malformed; ``problems`` lists one line per error."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__("\n".join(problems) if problems else f"{path}: invalid inventory")


class DockerError(FaultkitError):
    """A Docker engine call failed.

    ``transient`` is True when trying again may succeed: the engine answered 5xx, could not
    be reached, or did not answer in time (undo steps are retried then,
    :func:`faultkit.faults.undo.run_step`); False for an answer that will not change (a
    4xx: no such container, a bad request).
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        self.transient = transient
        super().__init__(message)


class DockerUnavailable(DockerError):
    """No Docker engine answers at ``host`` (transient unless ``transient=False``)."""

    def __init__(self, host: str, reason: str, *, transient: bool = True) -> None:
        self.host = host
        self.reason = reason
        super().__init__(
            f"cannot reach a Docker engine at {host}: {reason}. "
            "Is dockerd running? (`faultkit testbed up` starts one on this machine; "
            "for a remote node check the inventory's docker.host)",
            transient=transient,
        )


class ContainerNotFound(DockerError):
    """The node's container does not exist on its Docker host."""

    def __init__(self, host: str, name: str, found: list[str]) -> None:
        self.host = host
        self.name = name
        self.found = found
        listing = ", ".join(sorted(found)) if found else "no containers"
        super().__init__(f"no container named {name!r} on {host} (found: {listing})")


class NodeError(FaultkitError):
    """A node did not behave as an inference server should."""


class NodeNotReady(NodeError):
    """A node's readiness endpoint did not answer OK before the deadline."""

    def __init__(self, node: str, url: str, waited_s: float, last: str) -> None:
        self.node = node
        self.url = url
        self.waited_s = waited_s
        self.last = last
        super().__init__(
            f"node {node!r} not ready after {waited_s:.0f} s at {url} (last answer: {last})"
        )


class FaultError(FaultkitError):
    """A fault could not be injected or reverted."""


class FaultParamError(FaultError):
    """A fault kind is unknown or a parameter is outside its allowed values; nothing was done.

    Bad input: the CLI exits 2 with this one-line message. ``param`` names the parameter
    (``"kind"`` for an unknown fault), ``value`` is what was given and ``allowed`` says what
    it may be (e.g. ``"> 0 and ≤ 2000 req/s"``).
    """

    def __init__(self, message: str, *, param: str = "", value: object = None,
                 allowed: str = "") -> None:
        self.param = param
        self.value = value
        self.allowed = allowed
        super().__init__(message)


class FaultRefused(FaultError):
    """The blast-radius policy forbids this fault on this node; nothing was done."""


class NodeBusy(FaultRefused):
    """Another fault (of this harness or another one) holds the node's lock; nothing was
    done. A precondition of the experiment, not a finding about the node: a run that meets
    it is INCONCLUSIVE."""


class FaultAlreadyActive(FaultError):
    """``inject()`` was called on a fault instance that is already injected."""


class FaultUnsupported(FaultError):
    """The target lacks what the fault needs (e.g. the kernel has no sch_netem)."""


class FaultNotApplied(FaultError):
    """An act of the fault still failed after its retries; what was done has been reverted.

    Raised by ``inject()`` from the error (``__cause__``), once the revert has finished.
    ``error`` is that error's own words (Docker's, for a Docker call), ``attempts`` how
    many times the failing act was tried (0: the error came from no act), ``steps_done``
    the acts that had taken effect before it, and ``applied`` says which case it is:
    ``"none"`` (no act took effect) or ``"partly"``. :attr:`reason` is the run's
    INCONCLUSIVE reason: ``the fault could not be applied: <error> (…)``.
    """

    def __init__(self, describe: str, error: str, *, attempts: int,
                 steps_done: list[str]) -> None:
        self.error = error
        self.attempts = attempts
        self.steps_done = list(steps_done)
        self.applied = "partly" if steps_done else "none"
        tries = f"after {attempts} attempts; " if attempts > 1 else ""
        done = (f"partly applied ({', '.join(steps_done)} done), then reverted" if steps_done
                else "nothing was applied")
        self.reason = f"the fault could not be applied: {error} ({tries}{done})"
        super().__init__(f"{describe}: {self.reason}")


class JournalError(FaultkitError):
    """The fault journal could not be read or written."""


class JournalUnwritable(JournalError):
    """A fault's journal record or node lock could not be written before it acted (a full
    or read-only filesystem): the fault was not applied, since no fault acts without its
    record (``FaultJournal.begin``)."""


class LoadError(FaultkitError):
    """The load generator could not run at all."""


class LedgerInvariantError(LoadError):
    """Some invoked request did not end in exactly one terminal record (a harness bug)."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        shown = "; ".join(violations[:5]) + (" …" if len(violations) > 5 else "")
        super().__init__(
            f"ledger invariant violated for {len(violations)} request(s): {shown}. "
            "The load figures of this run cannot be trusted; please report it as a faultkit bug"
        )


class LedgerFileError(LoadError):
    """A ledger file (``ledger.arrows`` / ``ledger.jsonl``) cannot be written or read."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class PagerUnavailable(FaultkitError):
    """The ``faultkit pager`` at ``url`` did not answer, or its answer was not a list of
    notifications (:func:`faultkit.pager.fetch_notifications`): no page can be dated, so
    nothing may be concluded about paging from it."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(
            f"no usable answer from the faultkit pager at {url}: {reason}. Check that "
            "`faultkit pager` runs there (`faultkit testbed up` starts the lab's) and that "
            "it is the inventory's alertmanager.pager_url"
        )
