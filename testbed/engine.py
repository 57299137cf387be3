"""Make sure a Docker engine answers on this machine, installing and starting one if needed."""

from __future__ import annotations

import subprocess
import time

from faultkit.constants import LOCAL_DOCKER
from faultkit.docker.host import DockerHost
from faultkit.runtime.progress import step
from testbed._shell import Progress, ensure_commands
from testbed.errors import TestbedError
from testbed.paths import home


def ensure_docker_engine(progress: Progress, *, timeout_s: float = 60.0) -> DockerHost:
    """A connected local DockerHost; installs Debian's docker.io and starts dockerd if needed."""
    host = DockerHost(LOCAL_DOCKER)
    if host.ping():
        return host
    ensure_commands({"dockerd": "docker.io", "iptables": "iptables"}, progress)
    log = home() / "dockerd.log"
    with step(progress, f"starting dockerd in the background (log: {log})"):
        with log.open("ab") as out:
            subprocess.Popen(
                ["dockerd"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            time.sleep(0.5)
            host = DockerHost(LOCAL_DOCKER)
            if host.ping():
                return host
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-10:])
        raise TestbedError(
            f"dockerd did not answer within {timeout_s:.0f} s; last log lines:\n{tail}"
        )
