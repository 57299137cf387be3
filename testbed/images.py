"""The testbed's base image, built without any registry: debootstrap → ``docker import``.

The image holds a Debian bookworm minbase system with python3 + python3-aiohttp (for the
simulated nodes) and the shared libraries llama-server needs. Node binaries, models and
code are mounted, not baked in, so editing them never needs a rebuild. The image is
cached by tag and by a ``faultkit.spec`` label hashing its package list.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from faultkit.constants import LABEL_SPEC
from faultkit.docker.host import DockerHost
from faultkit.errors import DockerError
from faultkit.runtime.progress import step
from testbed._shell import Progress, ensure_commands, run
from testbed.errors import TestbedError
from testbed.paths import cache_dir

BASE_IMAGE = "faultkit/base:bookworm"
SUITE = "bookworm"
PACKAGES = ("python3", "python3-aiohttp", "libgomp1", "procps", "curl", "ca-certificates")
SPEC = hashlib.sha256(f"{SUITE} {' '.join(PACKAGES)}".encode()).hexdigest()[:12]


def apt_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses (read at run time, never written into the repo)."""
    candidates: list[str] = []
    for path in sorted(sources.glob("sources.list.d/*.sources")):
        text = path.read_text(errors="replace")
        for stanza in re.split(r"\n\s*\n", text):
            if re.search(r"^Suites:.*\bbookworm\b", stanza, re.M) and not re.search(
                r"security", stanza
            ):
                match = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
                if match:
                    candidates.append(match.group(1))
    legacy = sources / "sources.list"
    if legacy.exists():
        for line in legacy.read_text(errors="replace").splitlines():
            match = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s", line)
            if match and "security" not in match.group(1):
                candidates.append(match.group(1))
    if not candidates:
        raise TestbedError(
            f"found no Debian bookworm mirror in {sources}/sources.list(.d): "
            "the testbed builds its base image with debootstrap from the mirror apt uses"
        )
    return candidates[0]


def base_image_current(host: DockerHost) -> bool:
    try:
        image = host.client.images.get(BASE_IMAGE)
    except Exception:  # docker.errors.ImageNotFound and friends: treat as absent
        return False
    return bool((image.labels or {}).get(LABEL_SPEC) == SPEC)


def ensure_base_image(host: DockerHost, progress: Progress) -> str:
    """Build and import the base image unless an up-to-date one exists; return its tag."""
    if base_image_current(host):
        return BASE_IMAGE
    ensure_commands({"debootstrap": "debootstrap"}, progress)
    mirror = apt_mirror()
    root = cache_dir("rootfs") / f"{SUITE}-{SPEC}"
    if root.exists():
        shutil.rmtree(root)
    with step(
        progress, f"building base image: debootstrap {SUITE} from the apt mirror (~2-4 min, once)"
    ) as s:
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(root),
                mirror,
            ],
            what="debootstrap",
            log=cache_dir("logs") / "debootstrap.log",
            on_line=s.update,
        )
    with step(progress, f"importing {BASE_IMAGE}"):
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        try:
            run(
                [
                    "docker",
                    "import",
                    "--change",
                    "LABEL faultkit.component=base-image",
                    "--change",
                    f"LABEL {LABEL_SPEC}={SPEC}",
                    "-",
                    BASE_IMAGE,
                ],
                what="docker import",
                input_bytes=tar.communicate()[0],
            )
        finally:
            tar.wait()
            shutil.rmtree(root, ignore_errors=True)
    if not base_image_current(host):
        raise DockerError(f"{BASE_IMAGE} was imported but is not visible on {host.url}")
    return BASE_IMAGE
