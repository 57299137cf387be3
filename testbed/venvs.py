"""Cached virtualenvs for the lab's Python engines (the vLLM node, the LiteLLM gateway).

What the node modules share:

* the Python the venvs are built on (:func:`python_runtime`, the interpreter faultkit runs
  on): it is mounted read-only into the containers *at its own path*, because a venv's
  ``bin/python`` is a symlink to it and ``pyvenv.cfg`` names it;
* the cache rule: a venv is whole when its :data:`MARKER` file holds the hash of the spec
  it was built from (:func:`spec_hash`, :func:`is_cached`);
* :func:`run`: one install step, logged, its failure a :class:`TestbedError` with the
  log's tail.

A venv is relocatable when started as ``python -m …``; console scripts carry host
shebangs, so the containers never use them.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed._shell import OnLine, stream
from testbed.errors import TestbedError

#: The file in a cached directory that holds the hash of the spec it was built from.
MARKER = ".faultkit-ready"
#: A venv built on the system Python (Debian bookworm's 3.11) uses the image's own copy.
SYSTEM_PREFIXES = frozenset({Path("/usr"), Path("/")})


def python_runtime() -> Path:
    """The Python installation the venvs are built on (mounted into containers as is)."""
    return Path(sys.base_prefix).resolve()


def runtime_python(what: str) -> Path:
    """The runtime's interpreter binary; ``what`` names the venv in the error."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for name in (version, "python3"):
        candidate = python_runtime() / "bin" / name
        if candidate.exists():
            return candidate
    raise TestbedError(
        f"no python interpreter under {python_runtime()}/bin: {what} is built on the Python "
        "that runs faultkit; run faultkit from a regular CPython install"
    )


def site_packages(venv: Path) -> Path:
    """The venv's ``lib/pythonX.Y/site-packages`` for this interpreter's version."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "lib" / version / "site-packages"


def spec_hash(spec: dict[str, Any]) -> str:
    """A short stable hash of a JSON-able spec."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def is_cached(directory: Path, wanted: str) -> bool:
    """True when ``directory`` carries a marker holding exactly ``wanted``."""
    marker = directory / MARKER
    try:
        return marker.read_text().strip() == wanted
    except OSError:
        return False


def run(
    argv: list[str],
    what: str,
    log: Path,
    *,
    on_line: OnLine | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run a command; raise TestbedError with the log's tail if it fails.

    ``env`` is added to this process's environment. With ``on_line`` the output (stdout
    and stderr merged) is streamed: each line goes to ``on_line`` as it is printed and to
    the log as it is written. Returns the command's stdout (merged output when streamed).
    """
    full_env = {**os.environ, **(env or {})}
    log.parent.mkdir(parents=True, exist_ok=True)
    if on_line is not None:
        try:
            with log.open("ab") as fh:
                fh.write(f"$ {' '.join(argv)}\n".encode())
                code, output = stream(argv, sink=fh, on_line=on_line, env=full_env)
                fh.write(b"\n")
        except FileNotFoundError as exc:
            raise TestbedError(f"{what}: command not found: {argv[0]}") from exc
        if code != 0:
            tail = "\n".join(output.strip().splitlines()[-12:])
            raise TestbedError(f"{what} failed (exit {code}; full log: {log}):\n{tail}")
        return output
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=full_env)
    except FileNotFoundError as exc:
        raise TestbedError(f"{what}: command not found: {argv[0]}") from exc
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
        raise TestbedError(f"{what} failed (exit {proc.returncode}; full log: {log}):\n{tail}")
    return proc.stdout
