"""The LiteLLM gateway node: LiteLLM's proxy in a virtualenv, its config, one container.

What the lab calls (all idempotent; the venv is cached under ``$FAULTKIT_HOME``):

* :func:`ensure_litellm_env` — the virtualenv ``$FAULTKIT_HOME/litellm-venv`` (~760 MiB,
  ~2-4 min cold from PyPI, well under a second when cached).
* :func:`write_gateway_config` — the proxy's config file for one gateway node, under the
  lab's state directory (:mod:`testbed.gateway_config` builds its content).
* :func:`litellm_container_mounts` / :func:`litellm_container_env` /
  :func:`proxy_command` — what the node's container needs: ``docker`` SDK ``volumes=``,
  environment, and the command line.
* :func:`litellm_lab_setup` — the three together, in the shape ``testbed.lab_nodes.lab_mounts``
  returns (``testbed up`` calls it for ``engine: litellm`` nodes).

Decisions, each forced by something found on this machine (docs/gateway.md has the how):

* **Version.** ``litellm[proxy]==1.108.7``: the newest release whose ``proxy`` extra
  resolves from the registry this machine reaches. From 1.108.8 on, the extra pins
  ``litellm-enterprise`` / ``litellm-proxy-extras`` builds (``0.1.79.post2``,
  ``0.4.110.post1``…) that are not served, and 1.110.x pins a ``litellm-proxy`` package
  that does not exist there. 1.82.7/1.82.8 and 1.107.0 (the releases of LiteLLM's
  supply-chain compromises) are not published any more; the pin stays clear of them.
* **No stray start-up code.** Those compromised wheels carried a ``.pth`` file, which
  Python runs at every interpreter start. After installing, every ``.pth`` file in the
  venv's site-packages must be one of :data:`ALLOWED_PTH`, or the venv is refused.
* **prometheus_client.** LiteLLM's ``prometheus`` callback imports it, but the ``proxy``
  extra does not install it: it is pinned here (:data:`EXTRA_REQUIREMENTS`).
* **Python runtime.** As for the vLLM node (:mod:`testbed.venvs`): the venv is built on the
  interpreter faultkit runs on, that runtime tree is mounted read-only at its own path, the
  venv at :data:`VENV_IN_CONTAINER`, and the proxy starts as ``python -m
  litellm.proxy.proxy_cli`` (the ``litellm`` console script carries a host shebang).
* **Offline and quiet.** ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (the cost map is read from
  the package, not fetched at start), ``LITELLM_TELEMETRY_DISABLED=true``,
  ``LITELLM_MODE=PRODUCTION`` (no ``.env`` is read from the working directory), no
  ``DATABASE_URL`` (no database, no spend log).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from faultkit.inventory import Inventory, Node
from faultkit.runtime.progress import step
from testbed._shell import Progress
from testbed.errors import TestbedError
from testbed.gateway_config import (
    GatewaySpec,
    GatewayVariant,
    RouterPolicy,
    gateway_spec,
    litellm_config,
    render_yaml,
)
from testbed.paths import cache_dir, state_dir
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
    "CONFIG_DIR_IN_CONTAINER",
    "CONFIG_IN_CONTAINER",
    "CONTAINER_PORT",
    "LITELLM_VERSION",
    "MARKER",
    "VENV_IN_CONTAINER",
    "check_no_stray_pth",
    "config_dir",
    "config_file",
    "config_file_of",
    "ensure_litellm_env",
    "env_spec",
    "is_cached",
    "litellm_container_env",
    "litellm_container_mounts",
    "litellm_lab_setup",
    "litellm_runtime_env",
    "proxy_command",
    "python_runtime",
    "spec_hash",
    "venv_dir",
    "write_gateway_config",
]

LITELLM_VERSION = "1.108.7"
LITELLM_REQUIREMENT = f"litellm[proxy]=={LITELLM_VERSION}"
#: Imported by the ``prometheus`` callback, not installed by the ``proxy`` extra.
EXTRA_REQUIREMENTS = ("prometheus_client==0.26.0",)
#: The only ``.pth`` files a healthy venv holds (setuptools' own).
ALLOWED_PTH = frozenset({"distutils-precedence.pth"})

VENV_IN_CONTAINER = "/opt/litellm-venv"
CONFIG_DIR_IN_CONTAINER = "/etc/litellm"
CONFIG_FILE = "config.yaml"
CONFIG_IN_CONTAINER = f"{CONFIG_DIR_IN_CONTAINER}/{CONFIG_FILE}"
#: The port the proxy listens on inside its container (LiteLLM's own default).
CONTAINER_PORT = 4000
#: ``python -m`` this to run the proxy (what the ``litellm`` console script calls).
PROXY_MODULE = "litellm.proxy.proxy_cli"
#: Bump when the install recipe below changes, so cached venvs are rebuilt.
_RECIPE = 1


def venv_dir() -> Path:
    """Where the LiteLLM virtualenv lives: ``$FAULTKIT_HOME/litellm-venv``."""
    return cache_dir("litellm-venv")


def env_spec() -> dict[str, Any]:
    """Everything the cached venv depends on; its hash is stored in the marker file."""
    return {
        "recipe": _RECIPE,
        "litellm": LITELLM_REQUIREMENT,
        "extra": list(EXTRA_REQUIREMENTS),
        "python": str(python_runtime()),
        "python_version": sys.version.split()[0],
    }


def ensure_litellm_env(progress: Progress) -> Path:
    """Create (once) and return the LiteLLM virtualenv at ``$FAULTKIT_HOME/litellm-venv``.

    Cached by a marker file holding :func:`env_spec`'s hash: when it matches, this returns
    at once; when it differs (a new pin, another Python), the venv is rebuilt from scratch;
    when it is missing (an interrupted install), pip runs again over what is there. Needs
    PyPI. Raises :class:`TestbedError` naming the log file when a step fails, and when the
    installed venv holds a ``.pth`` file that is not in :data:`ALLOWED_PTH`.
    """
    venv = venv_dir()
    wanted = spec_hash(env_spec())
    if is_cached(venv, wanted):
        return venv
    log = cache_dir("logs") / "litellm-venv.log"
    if (venv / MARKER).exists():
        progress("the LiteLLM virtualenv is out of date: rebuilding it")
        shutil.rmtree(venv)
        venv.mkdir(parents=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    with step(
        progress,
        f"building the LiteLLM virtualenv at {venv} ({LITELLM_REQUIREMENT}; ~760 MiB, "
        f"~2-4 min, once; log: {log})",
    ) as s:
        if not python.exists():
            what = "the LiteLLM gateway's virtualenv"
            run([str(runtime_python(what)), "-m", "venv", str(venv)], "creating the venv", log)
        run(
            [*pip, "--progress-bar", "off", LITELLM_REQUIREMENT, *EXTRA_REQUIREMENTS],
            f"installing {LITELLM_REQUIREMENT}",
            log,
            on_line=s.update,
        )
        check_no_stray_pth(venv)
        s.update("checking that the proxy imports")
        run(
            [str(python), "-c", f"import prometheus_client, {PROXY_MODULE}"],
            "checking that LiteLLM's proxy imports",
            log,
            env=litellm_runtime_env(),
        )
        (venv / MARKER).write_text(wanted + "\n")
    return venv


def check_no_stray_pth(venv: Path) -> None:
    """Refuse a venv whose site-packages holds a ``.pth`` file not in :data:`ALLOWED_PTH`.

    A ``.pth`` file runs code at every interpreter start, ``import`` or not: that is how
    LiteLLM's compromised releases stole credentials. The venv is left in place, unmarked.
    """
    stray = sorted(p.name for p in site_packages(venv).glob("*.pth") if p.name not in ALLOWED_PTH)
    if stray:
        raise TestbedError(
            f"the LiteLLM virtualenv at {venv} holds unexpected start-up files "
            f"({', '.join(stray)}): a .pth file runs code at every Python start. Do not use it; "
            "check which package installed it (pip show -f) before deleting the venv"
        )


# ----------------------------------------------------------------------------- config


def config_dir(node_name: str) -> Path:
    """Where a gateway node's config lives: ``$FAULTKIT_HOME/state/gateway/<node>``."""
    return state_dir(f"gateway/{node_name}")


def config_file(node_name: str, file_name: str = CONFIG_FILE) -> Path:
    """A gateway node's proxy config file (:func:`write_gateway_config` writes it)."""
    return config_dir(node_name) / file_name


def config_file_of(command: list[str] | tuple[str, ...]) -> str:
    """The config file a proxy command line reads (``--config /etc/litellm/NAME``), as its
    name in the node's config directory. Raises TestbedError when the command reads none,
    or one outside :data:`CONFIG_DIR_IN_CONTAINER`."""
    args = list(command)
    if "--config" not in args[:-1]:
        raise TestbedError(f"a gateway's command must name its --config file: {args}")
    path = args[args.index("--config") + 1]
    directory, _, name = path.rpartition("/")
    if directory != CONFIG_DIR_IN_CONTAINER or not name or name.startswith("."):
        raise TestbedError(
            f"a gateway's --config must be a file in {CONFIG_DIR_IN_CONTAINER}/ (got {path!r})"
        )
    return name


def write_gateway_config(node_name: str, spec: GatewaySpec, file_name: str = CONFIG_FILE) -> Path:
    """Write ``spec``'s proxy config to :func:`config_dir` as ``file_name`` and return it.

    Written to a temporary file and renamed, so a proxy never reads half a config; the
    file is world-readable (the container may not run as the host user).
    """
    path = config_file(node_name, file_name)
    staging = path.with_name(file_name + ".tmp")
    staging.write_text(render_yaml(litellm_config(spec)))
    staging.chmod(0o644)
    os.replace(staging, path)
    return path


# ----------------------------------------------------------------------------- container


def litellm_runtime_env() -> dict[str, str]:
    """The environment every LiteLLM process here runs with: offline, no telemetry, no
    ``.env`` file, no database (on the host and in the container alike)."""
    return {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY_DISABLED": "true",
        "LITELLM_MODE": "PRODUCTION",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
    }


def litellm_container_env() -> dict[str, str]:
    """Environment the container needs beyond its serving config (see
    :func:`litellm_runtime_env`); ``DATABASE_URL`` is never set."""
    return litellm_runtime_env()


def litellm_container_mounts(node_name: str) -> dict[str, dict[str, str]]:
    """Bind mounts for a gateway node's container, in the docker SDK's ``volumes=`` form,
    all read-only.

    venv → :data:`VENV_IN_CONTAINER`; the node's config directory →
    :data:`CONFIG_DIR_IN_CONTAINER`; the Python runtime → its own path (unless it is the
    system Python, ``/usr``: the image's own python3 then serves the venv).
    Call :func:`ensure_litellm_env` and :func:`write_gateway_config` first.
    """
    mounts = {
        str(venv_dir()): {"bind": VENV_IN_CONTAINER, "mode": "ro"},
        str(config_dir(node_name)): {"bind": CONFIG_DIR_IN_CONTAINER, "mode": "ro"},
    }
    runtime = python_runtime()
    if runtime not in SYSTEM_PREFIXES:  # never mount over the image's own /usr
        mounts[str(runtime)] = {"bind": str(runtime), "mode": "ro"}
    return mounts


def proxy_command(
    python: str = f"{VENV_IN_CONTAINER}/bin/python",
    config: str = CONFIG_IN_CONTAINER,
    *,
    host: str = "0.0.0.0",
    port: int = CONTAINER_PORT,
) -> list[str]:
    """The command line that starts the proxy (one worker, uvicorn).

    Defaults are the container's paths; on the host, pass the venv's ``bin/python``, the
    config file and ``host="127.0.0.1"``.
    """
    return [
        python, "-m", PROXY_MODULE, "--config", config, "--host", host, "--port", str(port),
        "--num_workers", "1",
    ]  # fmt: skip


def litellm_lab_setup(
    inventory: Inventory,
    node: Node,
    progress: Progress,
    *,
    policy: RouterPolicy | None = None,
    address: Callable[[Node], str] | None = None,
    require_key: bool = True,
    variants: Mapping[str, GatewayVariant] | None = None,
) -> tuple[dict[str, dict[str, str]], dict[str, str], list[str]]:
    """Everything the lab needs to run gateway ``node``: (volumes, env, command).

    Builds the venv (cached), writes the node's config from the inventory (its upstreams,
    ``policy``; ``address(upstream node)`` gives the URL the container reaches it at, see
    :func:`testbed.gateway_config.gateway_spec`) and returns the mounts, the environment
    and :func:`proxy_command` for the container. ``variants`` (file name → variant)
    writes one config file per variant instead, each with its own policy and upstream
    URLs (the node's serving configs, which name their file in their command; a rollout
    switches between them). Raises :class:`TestbedError` for a node that is not a
    LiteLLM gateway.
    """
    if node.kind != "gateway" or node.engine != "litellm":
        raise TestbedError(
            f"node {node.name!r} is not a LiteLLM gateway "
            f"(kind: {node.kind}, engine: {node.engine})"
        )
    ensure_litellm_env(progress)
    files = variants or {CONFIG_FILE: GatewayVariant(policy or RouterPolicy())}
    reach = address or (lambda n: n.base_url)
    for file_name, variant in files.items():
        spec = gateway_spec(inventory, node, policy=variant.policy,
                            address=variant.address(reach), require_key=require_key)
        write_gateway_config(node.name, spec, file_name)
    return litellm_container_mounts(node.name), litellm_container_env(), proxy_command()
