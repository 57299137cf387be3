"""Running host commands for the testbed with progress output and clear failures."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from faultkit.runtime.progress import step
from testbed.errors import TestbedError

#: How the testbed reports: any ``Callable[[str], None]``; a
#: :class:`faultkit.runtime.progress.Progress`
#: also shows each long step live (:func:`faultkit.runtime.progress.step`).
Progress = Callable[[str], None]
#: Called with each line a streamed subprocess prints (a step's ``update``).
OnLine = Callable[[str], None]


def stream(
    argv: Sequence[str],
    *,
    sink: IO[bytes] | None,
    on_line: OnLine,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr merged, passing each output line to ``on_line``
    as it comes and copying every byte to ``sink`` (the log file); return (exit code, output).

    A line is cut at ``\n`` or ``\r`` (progress bars redraw with ``\r``); the full output,
    unaltered, is what goes to ``sink`` and what is returned. Raises FileNotFoundError when
    the command does not exist.
    """
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    assert isinstance(proc.stdout, io.BufferedReader)  # bufsize -1: read1 returns what is there
    chunks: list[bytes] = []
    partial = b""
    with proc.stdout:
        while chunk := proc.stdout.read1(65536):
            chunks.append(chunk)
            if sink is not None:
                sink.write(chunk)
                sink.flush()
            *lines, partial = (partial + chunk).replace(b"\r", b"\n").split(b"\n")
            for line in lines:
                text = line.decode(errors="replace").strip()
                if text:
                    on_line(text)
    if partial.strip():
        on_line(partial.decode(errors="replace").strip())
    return proc.wait(), b"".join(chunks).decode(errors="replace")


def run(
    argv: Sequence[str],
    *,
    what: str,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    input_bytes: bytes | None = None,
    on_line: OnLine | None = None,
) -> str:
    """Run ``argv``; on failure raise TestbedError naming ``what`` and the log's tail.

    With ``on_line`` (and no ``input_bytes``) the output is streamed (:func:`stream`): each
    line goes to ``on_line`` as it is printed and to ``log`` as it is written.
    """
    if on_line is not None and input_bytes is None:
        return _run_streamed(argv, what=what, log=log, env=env, cwd=cwd, on_line=on_line)
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


def _run_streamed(
    argv: Sequence[str],
    *,
    what: str,
    log: Path | None,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    on_line: OnLine,
) -> str:
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("wb") if log is not None else _no_sink() as sink:
            code, output = stream(argv, sink=sink, on_line=on_line, env=env, cwd=cwd)
    except FileNotFoundError as exc:
        raise TestbedError(f"{what}: command not found: {argv[0]}") from exc
    if code != 0:
        tail = "\n".join(output.strip().splitlines()[-15:])
        where = f" (full log: {log})" if log else ""
        raise TestbedError(f"{what} failed with exit code {code}{where}:\n{tail}")
    return output


def _no_sink() -> contextlib.nullcontext[None]:
    return contextlib.nullcontext(None)


def apt_install(packages: Sequence[str], progress: Progress) -> None:
    """Install Debian packages with apt-get (root, Debian/Ubuntu only)."""
    if shutil.which("apt-get") is None:
        raise TestbedError(
            f"need {', '.join(packages)} but this machine has no apt-get: install them by hand"
        )
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    with step(progress, f"installing {', '.join(packages)} with apt-get (one-time)") as s:
        run(["apt-get", "update", "-q"], what="apt-get update", env=env, on_line=s.update)
        run(
            ["apt-get", "install", "-y", "-q", *packages],
            what=f"apt-get install {' '.join(packages)}",
            env=env,
            on_line=s.update,
        )


def ensure_commands(commands: Mapping[str, str], progress: Progress) -> None:
    """Make sure each command exists, installing its Debian package (``{command: package}``)."""
    missing = sorted({pkg for cmd, pkg in commands.items() if shutil.which(cmd) is None})
    if missing:
        apt_install(missing, progress)
