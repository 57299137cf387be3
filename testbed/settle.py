"""What a killed harness left on the lab, undone before ``testbed up`` keeps a container.

A lab container whose config hash matches its spec can still differ from that spec: a
harness killed in the middle of a fault (a CI job cut off, a machine restarted) leaves the
fault applied. Docker keeps some of it across a restart of the engine itself: a container
a partition disconnected stays off its network, a squeezed memory limit stays squeezed.
``testbed up`` would then keep that container and wait, in vain, for it to answer.

So ``testbed up``, before it keeps any container:

1. replays the journal's orphaned records on the lab's own containers, however old
   (:func:`settle_journal`): the same undo steps a normal revert runs. The age bound of
   :func:`faultkit.sweep.sweep` protects repair work done on a node since; the lab's
   containers are rebuilt from their spec right after, so there is none to protect;
2. recreates a container whose record could not be replayed, and marks that record
   superseded (:func:`supersede`): a record left in the journal would keep its node
   BLOCKED for every later fault;
3. recreates a kept container that still differs from its spec in what a fault changes
   (:func:`drift`), whoever changed it.

docs/testbed.md ("A lab left in a fault") says the same for users.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from docker.utils import parse_bytes

from faultkit.constants import LABEL_CONFIG_HASH, LOCAL_DOCKER
from faultkit.docker.host import DockerHost
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal, JournalRecord
from faultkit.sweep import sweep
from testbed._shell import Progress

#: what a superseded record's note says
SUPERSEDED = "superseded: testbed up recreated {container} from its spec"


@dataclass(frozen=True, slots=True)
class LabContainers:
    """The lab's own containers: (Docker host URL, container name) → node name."""

    by_target: dict[tuple[str, str], str]

    @classmethod
    def of(cls, nodes: Collection[Node]) -> LabContainers:
        return cls({(n.docker.host, n.docker.container): n.name
                    for n in nodes if n.docker is not None})

    def owns(self, record: JournalRecord) -> bool:
        """True when every container the record's undo steps touch is one of the lab's, and
        it touches at least one: a record on a user's own node is never the lab's."""
        targets = [_target(step) for step in record.undo]
        touched = [t for t in targets if t is not None]
        return bool(touched) and all(t in self.by_target for t in touched)

    def node_of(self, record: JournalRecord) -> str | None:
        """The lab node whose container the record touches (None: not the lab's)."""
        if not self.owns(record):
            return None
        return next(self.by_target[t] for t in map(_target, record.undo) if t is not None)


def _target(step: dict[str, object]) -> tuple[str, str] | None:
    """The (host, container) an undo step acts on; None for a step on no container."""
    spec = step.get("spec")
    name = step.get("container") or (spec.get("name") if isinstance(spec, dict) else None)
    if not name:
        return None
    return str(step.get("host") or LOCAL_DOCKER), str(name)


def settle_journal(inventory: Inventory, progress: Progress,
                   journal: FaultJournal | None = None) -> set[str]:
    """Replay the orphaned records on the lab's containers (any age) and the others the
    sweep's own policy allows; one progress line each. Returns the lab nodes whose records
    are still left applied: ``testbed up`` recreates those (then :func:`supersede`)."""
    journal = journal if journal is not None else FaultJournal()
    lab = LabContainers.of(inventory.nodes)
    for line in sweep(journal, inventory=inventory, helpers=True, replay_old=lab.owns):
        progress(f"fault journal: {line}")
    return {node for record in journal.orphans() if (node := lab.node_of(record)) is not None}


def supersede(inventory: Inventory, recreated: Collection[str], progress: Progress,
              journal: FaultJournal | None = None) -> None:
    """Mark reverted the orphaned records of the lab nodes just recreated from their spec
    (the fault went with the old container)."""
    journal = journal if journal is not None else FaultJournal()
    lab = LabContainers.of(inventory.nodes)
    for record in journal.orphans():
        node = lab.node_of(record)
        if node is None or node not in recreated:
            continue
        container = inventory.node(node).docker
        with journal.claim(record.id) as claimed:
            if claimed is None:
                continue
            note = SUPERSEDED.format(container=container.container if container else node)
            journal.update_reverted(claimed, note=note)
        progress(f"fault journal: {record.id} ({record.description}): {note}")


def drift(host: DockerHost, name: str, *, network: str,
          memory: str | int | None) -> str | None:
    """Why the container ``name`` differs from its spec in what a fault changes, or None."""
    if network not in host.endpoints(name):
        return f"it is off its network {network}, as a partition leaves it"
    want = int(parse_bytes(memory)) if memory else 0
    have = host.memory_limits(name)[0]
    if have != want:
        return f"its memory limit is {have} bytes where its spec says {want}"
    return None


def keep_existing(host: DockerHost, name: str, *, wanted_hash: str, network: str,
                  memory: str | int | None, rebuild: bool, progress: Progress) -> bool:
    """Keep the container ``name`` (unpaused, started) when it is what its spec makes:
    True. Otherwise remove it, saying why, and return False: the caller creates it anew.
    ``rebuild`` removes it whatever it is (a fault on it could not be undone)."""
    if not host.exists(name):
        return False
    state = host.state(name)
    if rebuild:
        why: str | None = "a fault left on it could not be undone"
    elif state.labels.get(LABEL_CONFIG_HASH) != wanted_hash:
        why = "its config changed"
    else:
        why = drift(host, name, network=network, memory=memory)
    if why is not None:
        progress(f"recreating {name} ({why})")
        host.remove(name)
        return False
    if state.paused:
        host.unpause(name)
    if not state.running and not state.restarting:
        progress(f"starting existing container {name}")
        host.start(name)
    return True
