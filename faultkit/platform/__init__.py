"""The platform seam: the one interface through which every fault acts on its node.

A fault never calls Docker, ``/proc`` or ``nsenter`` itself: it calls the verbs of
:class:`Platform` (``Fault.platform``), one object per Docker host (:func:`platform_for`).
So another platform (a ``KubernetesPlatform`` acting through the API server and a node
agent) implements this one interface, and every fault runs on it unchanged. Undo steps are
the exception: they run from journal data, even in another process after a crash
(:mod:`faultkit.faults.undo`), and reach the engine from the step's own ``host``.

The verbs (:mod:`faultkit.platform.base`):

- read the container: ``inspect``, ``state``, ``host_pid``, ``events``, ``logs``,
  ``endpoints``, ``spec_of``, ``memory_limits``, ``memory_usage``; the host:
  ``running_names``, ``engine_answers``;
- act on it: ``pause``, ``stop``, ``start``, ``restart``, ``docker_kill`` (a manual stop),
  ``remove`` + ``create`` (recreate from a spec), ``disconnect``/``connect``,
  ``set_memory_limits``, ``exec``;
- reach the node's kernel: ``processes`` (each PID proven the container's),
  ``signal_processes`` and ``crash`` (a signal as the kernel would send it: the restart
  policy applies, unlike ``docker_kill``; a SIGSTOP that hangs them), ``wait_gone``,
  ``wait_stopped``, ``netns`` (where iptables/tc run
  in the container's network namespace: network rules and traffic shaping,
  :mod:`faultkit.platform.netns`), ``uses_helpers``/``helper_steps``.

The Docker verbs are the same for every implementation: each delegates to the node's own
:class:`~faultkit.docker.host.DockerHost` (``host``), whose engine may be ``unix://``,
``tcp://`` or ``ssh://``. The kernel verbs are not: a *crash* signal (``docker kill`` is a
manual stop that no restart policy undoes), the container's process list and
``iptables``/``tc`` in its network namespace need the node's own kernel:

- :class:`LocalDocker` (``unix://``): the harness runs on the node's host. Processes are
  found in this machine's ``/proc``, each PID proven to be the container's through its
  cgroup before a pidfd signals it (:mod:`faultkit.docker.hostpid`); namespaces are entered with
  ``nsenter -t PID -n`` (:mod:`faultkit.platform.netns`). Only an optimisation: the helpers below
  would work here too.
- :class:`RemoteDocker` (any other engine URL): nothing of this machine is used. Each act
  is a short-lived **helper container on the node's host**, created through the node's
  own Docker API from :data:`HELPER_IMAGE` (Pumba's approach): ``--pid host`` to read the
  host's process table and signal a process of the container (its cgroup names the
  container's id, checked inside the helper, then a pidfd signal), ``--network
  container:<target>`` with ``NET_ADMIN`` to run ``iptables``/``tc`` in the target's
  namespace. Helpers carry the labels :data:`faultkit.constants.LABEL_OWNER` ``=helper``
  and :data:`HELPER_LABEL` ``=<fault id>``; each is removed when it ends, and a fault that
  uses them journals a ``helpers_remove`` step, so ``faultkit sweep`` removes any that a
  killed harness left behind.

A :class:`Netns` value says *where* a :mod:`faultkit.platform.netns` command runs: a proven host PID
(``nsenter``), ``None`` (this machine's own namespace) or a :class:`HelperNetns`.
"""

from __future__ import annotations

from faultkit.docker import hostpid
from faultkit.docker.host import DockerHost, docker_host
from faultkit.platform.base import Platform
from faultkit.platform.helpers import (
    HELPER_IMAGE,
    HELPER_LABEL,
    HELPER_TIMEOUT_S,
    HelperNetns,
    Netns,
)
from faultkit.platform.local import LocalDocker
from faultkit.platform.remote import RemoteDocker

__all__ = ["HELPER_IMAGE", "HELPER_LABEL", "HELPER_TIMEOUT_S", "HelperNetns", "LocalDocker",
           "Netns", "Platform", "RemoteDocker", "platform_for"]


def platform_for(url: str, host: DockerHost | None = None) -> Platform:
    """The platform of the Docker engine at ``url`` (reached through ``host``, by default
    :func:`~faultkit.docker.host.docker_host`): local shortcuts for a ``unix://`` engine
    (:func:`faultkit.docker.hostpid.is_local`), helper containers for any other."""
    engine = host if host is not None else docker_host(url)
    return LocalDocker(url, engine) if hostpid.is_local(url) else RemoteDocker(url, engine)
