"""Running host commands for the testbed with progress output and clear failures."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from testbed.errors import TestbedError

Progress = Callable[[str], None]


def run(
    argv: Sequence[str],
    *,
    what: str,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    input_bytes: bytes | None = None,
) -> str:
    """Run ``argv``; on failure raise TestbedError naming ``what`` and the log's tail."""
    try:
        proc = subprocess.run(
            list(argv),
            input=input_bytes,
            capture_output=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            check=False,
        )
    except FileNotFoundError as exc:
        raise TestbedError(f"{what}: command not found: {argv[0]}") from exc
    output = (proc.stdout or b"").decode(errors="replace") + (proc.stderr or b"").decode(
        errors="replace"
    )
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(output)
    if proc.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-15:])
        where = f" (full log: {log})" if log else ""
        raise TestbedError(f"{what} failed with exit code {proc.returncode}{where}:\n{tail}")
    return output


def apt_install(packages: Sequence[str], progress: Progress) -> None:
    """Install Debian packages with apt-get (root, Debian/Ubuntu only)."""
    if shutil.which("apt-get") is None:
        raise TestbedError(
            f"need {', '.join(packages)} but this machine has no apt-get: install them by hand"
        )
    progress(f"installing {', '.join(packages)} with apt-get (one-time)")
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    run(["apt-get", "update", "-q"], what="apt-get update", env=env)
    run(
        ["apt-get", "install", "-y", "-q", *packages],
        what=f"apt-get install {' '.join(packages)}",
        env=env,
    )


def ensure_commands(commands: Mapping[str, str], progress: Progress) -> None:
    """Make sure each command exists, installing its Debian package (``{command: package}``)."""
    missing = sorted({pkg for cmd, pkg in commands.items() if shutil.which(cmd) is None})
    if missing:
        apt_install(missing, progress)
