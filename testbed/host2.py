"""The testbed's second Docker host: a Docker engine reachable only at ``tcp://127.0.0.1:18100``.

A GPU lab is several machines, and faultkit must act on a node through *that node's* Docker
engine. This module runs a second engine on this machine that behaves like another box:
docker-in-docker (``dind``), a container ``faultkit-h2-docker`` (every capability) from the
testbed's tools image (the base image plus iptables and iproute2) running this machine's
own Docker binaries, mounted read-only. Why dind and not a second ``dockerd`` beside the
first (docs/architecture.md, "The second host"):

- **its own PID namespace**: the PIDs its engine reports are not this machine's, as on a
  real remote host, so anything that would wrongly use one (``os.kill``, ``nsenter -t``)
  is refused by :mod:`faultkit.docker.hostpid`'s cgroup check instead of hitting a bystander;
- **its own network namespace and iptables**: a second daemon in the host's namespace
  would share the ``DOCKER`` chains and the bridge address space with the lab's engine;
- **a whole-host restart is one call**: restarting the container ends every process on
  that "host" and boots its engine again (``host_restart``);
- one object to remove (the container and its data volume), findable by label.

Published ports: the engine's API on :data:`API_PORT`, and :data:`NODE_PORTS` for the nodes
that run there (each node's container publishes its port on the inner engine; the outer
container publishes the same number on 127.0.0.1). Nothing listens beyond loopback.

This module is the host: its container, engine and images. :func:`start_host` builds the
tools image (once, from packages ``apt-get download`` fetches through this machine's apt)
and starts the engine; :func:`ensure_images` copies the base and tools images into it;
:func:`down` removes it all. Its nodes (the sim nodes of the testbed inventory whose
``docker.host`` is :data:`HOST2_URL`) are :mod:`testbed.host2_nodes`', whose ``up`` brings
host and nodes up. Both are idempotent.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import time
from pathlib import Path

from faultkit.constants import LABEL_CONFIG_HASH, LABEL_OWNER
from faultkit.docker.host import DockerHost
from faultkit.errors import ContainerNotFound, DockerError
from faultkit.runtime.progress import step
from testbed._shell import Progress, run
from testbed.errors import TestbedError
from testbed.images import BASE_IMAGE
from testbed.images import SPEC as BASE_SPEC
from testbed.paths import cache_dir, state_dir

#: the container that is the second host, and its Docker data (a volume: survives restarts)
CONTAINER = "faultkit-h2-docker"
#: how the second host restarts, as a power cut would take it: its engine and every
#: container on it end at once (no grace), and the engine boots again
RESTART_COMMAND = f"docker restart -t 0 {CONTAINER}"
VOLUME = "faultkit-h2-data"
API_PORT = 18100
HOST2_URL = f"tcp://127.0.0.1:{API_PORT}"
#: loopback ports published through to the second host, for the nodes that run there
NODE_PORTS = range(18101, 18110)
#: seconds a stop of the second host gives its engine to stop its containers and exit
STOP_TIMEOUT_S = 20
#: the inner engine's bridge, apart from the outer engine's 172.17.0.0/16
INNER_BIP = "172.29.17.1/24"
#: the lab network on the second host (a partition needs a network to cut)
INNER_NETWORK = "faultkit-h2-lab"
#: where the repository and the sim nodes' state are inside the second host
INNER_REPO = "/opt/faultkit"
INNER_STATE = "/var/lib/faultkit-h2"
LABELS = {LABEL_OWNER: "testbed", "faultkit.component": "host2"}

#: the base image plus what helper containers and the inner engine need (iptables, tc)
TOOLS_IMAGE = "faultkit/tools:bookworm"
TOOLS_PACKAGES = ("iptables", "iproute2", "libbpf1", "libbsd0", "libcap2-bin", "libelf1",
                  "libip4tc2", "libip6tc2", "libmnl0", "libnetfilter-conntrack3",
                  "libnfnetlink0", "libnftnl11", "libxtables12", "netbase",
                  # what this machine's dockerd links beyond the base image
                  "libdevmapper1.02.1", "libudev1", "libselinux1")
#: rebuilt when the base image (its own spec) or the package list changes
TOOLS_SPEC = hashlib.sha256(
    f"{BASE_IMAGE} {BASE_SPEC} {' '.join(TOOLS_PACKAGES)}".encode()).hexdigest()[:12]
#: this machine's Docker binaries the second host runs (mounted read-only)
DOCKER_BINARIES = ("dockerd", "containerd", "containerd-shim-runc-v2", "runc", "docker-init",
                   "docker-proxy")
REPO_ROOT = Path(__file__).resolve().parents[1]


def outer() -> DockerHost:
    from faultkit.constants import LOCAL_DOCKER

    return DockerHost(LOCAL_DOCKER)


def inner(timeout_s: float = 30.0) -> DockerHost:
    return DockerHost(HOST2_URL, timeout_s=timeout_s)


# tools image ------------------------------------------------------------------------------
def ensure_tools_image(host: DockerHost, progress: Progress) -> str:
    """Build :data:`TOOLS_IMAGE` on ``host`` unless an up-to-date one is there."""
    if (host.image_labels(TOOLS_IMAGE) or {}).get("faultkit.spec") == TOOLS_SPEC:
        return TOOLS_IMAGE
    debs = cache_dir(f"debs/tools-{TOOLS_SPEC}")
    if not list(debs.glob("*.deb")):
        with step(progress, f"apt-get download {' '.join(TOOLS_PACKAGES[:2])} (+ libraries)"):
            try:
                run(["apt-get", "download", *TOOLS_PACKAGES], what="apt-get download", cwd=debs)
            except TestbedError:  # no package lists yet on a fresh machine
                run(["apt-get", "update", "-q"], what="apt-get update")
                run(["apt-get", "download", *TOOLS_PACKAGES], what="apt-get download", cwd=debs)
    with step(progress, f"building {TOOLS_IMAGE} (base image + iptables, iproute2)"), \
            tempfile.TemporaryDirectory(prefix="faultkit-tools-") as ctx:
        shutil.copytree(debs, Path(ctx) / "debs")
        (Path(ctx) / "Dockerfile").write_text(
            f"FROM {BASE_IMAGE}\n"
            "COPY debs /tmp/debs\n"
            "RUN dpkg -i --force-depends /tmp/debs/*.deb && rm -rf /tmp/debs\n"
        )
        host.build_image(ctx, TOOLS_IMAGE, {"faultkit.spec": TOOLS_SPEC,
                                            "faultkit.component": "tools-image"})
    return TOOLS_IMAGE


# the host ------------------------------------------------------------------------------
def _binary_mounts() -> dict[str, dict[str, str]]:
    mounts = {}
    for name in DOCKER_BINARIES:
        path = shutil.which(name)
        if path is None:
            raise TestbedError(f"`{name}` is not installed: the second host runs this machine's "
                               "Docker binaries (Debian's docker.io)")
        mounts[path] = {"bind": path, "mode": "ro"}
    return mounts


#: the capabilities Docker knows by name, in bit order (capability(7)); the second host
#: gets every one this machine's bounding set holds. Not ``--privileged``: that asks for
#: all of them, and runc refuses where the bounding set lacks one (this lab's VM has no
#: CAP_SYS_RESOURCE: "unable to apply caps: operation not permitted").
CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ",
)
#: seccomp and AppArmor off (and /proc, /sys unmasked): what --privileged would also give
SECURITY_OPT = ("seccomp=unconfined", "apparmor=unconfined")
#: the second host's init: mount its own cgroup hierarchies writable (it runs in a private
#: cgroup namespace, so they show its own subtree: its containers nest under it), then
#: become its Docker engine
ENTRYPOINT = r"""
for d in /sys/fs/cgroup/*; do
  opts=$(awk -v d="$d" '$2==d && $3=="cgroup" {print $4}' /proc/mounts | tr ',' '\n' \
         | grep -v -E '^(ro|rw|nosuid|nodev|noexec|relatime)$' | paste -sd, -)
  [ -n "$opts" ] || continue
  umount "$d" && mount -t cgroup -o "$opts" cgroup "$d"
done
rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
exec dockerd --host=unix:///var/run/docker.sock --host=tcp://0.0.0.0:2375 --tls=false \
  --bip=%s --data-root=/var/lib/docker --exec-root=/var/run/docker \
  --pidfile=/var/run/docker.pid
"""


def capabilities(status: Path = Path("/proc/self/status")) -> tuple[str, ...]:
    """The capabilities of :data:`CAPABILITIES` in this process's bounding set."""
    bounding = 0
    for line in status.read_text().splitlines():
        if line.startswith("CapBnd:"):
            bounding = int(line.split()[1], 16)
    return tuple(name for bit, name in enumerate(CAPABILITIES) if bounding >> bit & 1)


def _host_hash(volumes: dict[str, dict[str, str]]) -> str:
    """What the second host's container is made of: its mounts (the checkout whose code its
    sim nodes run), image, command and ports; a change recreates it."""
    text = repr((sorted(volumes.items()), TOOLS_SPEC, _command(), API_PORT, list(NODE_PORTS)))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _command() -> list[str]:
    return ["sh", "-c", ENTRYPOINT % INNER_BIP]


def start_host(progress: Progress, *, timeout_s: float = 60.0) -> float:
    """Start the second host's container unless it runs; wait for its engine; seconds taken."""
    host = outer()
    t0 = time.monotonic()
    ensure_tools_image(host, progress)
    volumes = {**_binary_mounts(),
               VOLUME: {"bind": "/var/lib/docker", "mode": "rw"},
               str(REPO_ROOT): {"bind": INNER_REPO, "mode": "ro"},
               str(state_dir("host2")): {"bind": INNER_STATE, "mode": "rw"}}
    wanted = _host_hash(volumes)
    if host.exists(CONTAINER):
        st = host.state(CONTAINER)
        if st.labels.get(LABEL_CONFIG_HASH) != wanted:  # another checkout, another command
            progress(f"recreating {CONTAINER} (its config changed; its data volume stays)")
            # stopped first, once its engine answers (it has restored its containers by
            # then), so that it stops them and records it: a forced removal while it
            # restores them can leave the next engine holding their ports. Before it
            # answers, a stop waits its whole grace and ends in SIGKILL (measured: the
            # engine, PID 1 there, does not act on SIGTERM yet; docs/architecture.md)
            if st.running:
                with contextlib.suppress(TestbedError):
                    wait_engine(timeout_s=30.0)
            host.stop(CONTAINER, timeout_s=STOP_TIMEOUT_S)
            host.remove(CONTAINER)
        elif not st.running:
            host.start(CONTAINER)
    if not host.exists(CONTAINER):
        with step(progress, f"starting the second Docker host {CONTAINER} ({HOST2_URL})"):
            host.create_system_container(
                CONTAINER, TOOLS_IMAGE, _command(),
                ports={2375: API_PORT, **{p: p for p in NODE_PORTS}},
                volumes=volumes, labels={**LABELS, LABEL_CONFIG_HASH: wanted},
                cap_add=capabilities(),
                security_opt=SECURITY_OPT, cgroupns="private",
            )
    wait_engine(timeout_s)
    return time.monotonic() - t0


def wait_engine(timeout_s: float = 60.0) -> float:
    """Wait until the second host's engine answers; the seconds waited."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    while time.monotonic() < deadline:
        if inner(timeout_s=2.0).ping():
            return time.monotonic() - t0
        time.sleep(0.1)
    tail = ""
    with contextlib.suppress(DockerError):
        tail = outer().logs(CONTAINER, tail=10)
    raise TestbedError(f"the second Docker host did not answer at {HOST2_URL} within "
                       f"{timeout_s:.0f} s; its last log lines:\n{tail}")


def ensure_images(progress: Progress) -> None:
    """The base and tools images on the second host (copied from this machine's engine)."""
    src, dst = outer(), inner()
    for tag in (BASE_IMAGE, TOOLS_IMAGE):
        want = (src.image_labels(tag) or {}).get("faultkit.spec")
        if want is not None and (dst.image_labels(tag) or {}).get("faultkit.spec") == want:
            continue
        with step(progress, f"copying {tag} to the second host"):
            src.copy_image(tag, dst)


def restart_engine() -> DockerHost:
    """Restart the second host's engine gracefully (it stops its containers, its data
    stays), then start again every container that ran before; a client of the new engine."""
    running = inner().running_names()
    restart_host(stop_timeout_s=STOP_TIMEOUT_S)
    wait_engine()
    engine = inner()
    for name in running:
        state = engine.state(name)
        if not state.running and not state.restarting:
            engine.start(name)
    return engine


def is_held_port(exc: DockerError) -> bool:
    """Docker could not publish a node's port on the second host: its allocator still
    counts it taken, or a process there listens on it. Seen after a machine reset: the
    outer engine restarts the second host, which restores its containers, and a forced
    removal then leaves the next engine with the port allocated and a stray
    ``docker-proxy`` on it. Both go with a restart of that engine (:func:`restart_engine`).
    Docker words a port another *container* publishes the same way; that one stays taken
    after the restart, and the retry's error says so."""
    text = str(exc)
    return "port is already allocated" in text or (
        "external connectivity" in text and "address already in use" in text)


def down(progress: Progress = print) -> None:
    """Remove the second host (its container and data volume); idempotent."""
    host = outer()
    try:
        host.remove(CONTAINER)
        progress(f"removed {CONTAINER}")
    except ContainerNotFound:
        pass
    if host.remove_volume(VOLUME):
        progress(f"removed volume {VOLUME}")


def restart_host(*, stop_timeout_s: int = 0) -> None:
    """The whole second host goes away and comes back (its container restarts)."""
    outer().restart(CONTAINER, timeout_s=stop_timeout_s)
