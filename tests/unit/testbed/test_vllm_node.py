"""testbed.vllm_node without Docker: caching, mounts, and agreement with the inventory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from faultkit.inventory import ServingConfig, load_inventory
from testbed import vllm_node
from testbed.errors import TestbedError
from testbed.lab_nodes import container_port
from testbed.paths import INVENTORY
from testbed.vllm import make_model

VLLM_CONFIGS = ("vllm-good", "vllm-bad-maxlen", "vllm-small-kv")


def _arg(config: ServingConfig, flag: str) -> str:
    cmd = config.command
    assert flag in cmd, f"{flag} missing from {cmd}"
    return cmd[cmd.index(flag) + 1]


@pytest.fixture
def fk_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path))
    return tmp_path


def test_cached_env_returns_without_running_anything(
    fk_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = fk_home / "vllm-venv"
    venv.mkdir()
    (venv / vllm_node.MARKER).write_text(vllm_node.spec_hash(vllm_node.env_spec()) + "\n")

    def no_run(*_args: object, **_kwargs: object) -> str:
        raise AssertionError("a cached venv must not run pip")

    monkeypatch.setattr(vllm_node, "_run", no_run)
    assert vllm_node.ensure_vllm_env(lambda _m: None) == venv


def test_stale_marker_triggers_rebuild(fk_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = fk_home / "vllm-venv"
    venv.mkdir()
    (venv / vllm_node.MARKER).write_text("an-old-spec\n")
    (venv / "leftover").write_text("x")
    calls: list[list[str]] = []

    def fake_run(argv: list[str], what: str, log: Path) -> str:
        calls.append(argv)
        raise TestbedError(f"{what}: stopped here")

    monkeypatch.setattr(vllm_node, "_run", fake_run)
    with pytest.raises(TestbedError, match="stopped here"):
        vllm_node.ensure_vllm_env(lambda _m: None)
    assert not (venv / "leftover").exists(), "an out-of-date venv must be rebuilt from scratch"
    assert calls[0][1:3] == ["-m", "venv"]


def test_spec_hash_changes_with_pins(monkeypatch: pytest.MonkeyPatch) -> None:
    before = vllm_node.spec_hash(vllm_node.env_spec())
    monkeypatch.setattr(vllm_node, "VLLM_VERSION", "0.99.0")
    assert vllm_node.spec_hash(vllm_node.env_spec()) != before


def test_requirement_listing_evaluates_markers_and_excludes() -> None:
    # Run the snippet the venv runs, against this environment's own faultkit distribution.
    out = subprocess.run(
        [sys.executable, "-c", vllm_node._LIST_REQUIREMENTS, "faultkit", "pytest,docker"],
        capture_output=True, text=True, check=True,
    ).stdout
    reqs = json.loads(out)
    names = {r.split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in reqs}
    assert "httpx" in names
    assert "pytest" not in names
    assert "docker" not in names
    assert not any("extra ==" in r for r in reqs), "extras' requirements must be dropped"


def test_mounts_are_read_only_but_the_cache_and_match_the_container_paths(fk_home: Path
                                                                          ) -> None:
    mounts = vllm_node.vllm_container_mounts()
    binds = {spec["bind"]: host for host, spec in mounts.items()}
    writable = [spec["bind"] for spec in mounts.values() if spec["mode"] != "ro"]
    assert writable == [vllm_node.CACHE_IN_CONTAINER]
    assert binds[vllm_node.CACHE_IN_CONTAINER] == str(fk_home / "vllm-cache")
    assert vllm_node.vllm_container_env()["VLLM_CACHE_ROOT"] == vllm_node.CACHE_IN_CONTAINER
    assert binds[vllm_node.VENV_IN_CONTAINER] == str(fk_home / "vllm-venv")
    assert binds[vllm_node.MODEL_IN_CONTAINER] == str(fk_home / "models" / "tiny-vllm")
    runtime = str(vllm_node.python_runtime())
    assert binds[runtime] == runtime, "the venv's python symlink needs the runtime at its own path"
    assert Path(binds[vllm_node.WRAPPER_DIR_IN_CONTAINER], "entrypoint.py").is_file()


def test_env_is_offline_and_finds_libnuma() -> None:
    env = vllm_node.vllm_container_env()
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["LD_LIBRARY_PATH"].startswith(vllm_node.VENV_IN_CONTAINER)


def test_missing_host_library_says_what_to_install() -> None:
    with pytest.raises(TestbedError, match="apt-get install"):
        vllm_node.find_host_library("libdoes-not-exist-faultkit.so.7")


@pytest.mark.parametrize("name", VLLM_CONFIGS)
def test_inventory_configs_agree_with_the_node_module(name: str) -> None:
    inventory = load_inventory(INVENTORY)
    config = inventory.serving_config(name)
    cmd = config.command
    assert cmd[:3] == ["python3", vllm_node.ENTRYPOINT_IN_CONTAINER,
                       f"{vllm_node.VENV_IN_CONTAINER}/bin/python"]
    assert "serve" in cmd
    assert vllm_node.MODEL_IN_CONTAINER in cmd
    assert _arg(config, "--served-model-name") == inventory.node("vllm").model
    assert _arg(config, "--dtype") == "float32", "bf16 + eager dies with SIGILL on this CPU"
    assert int(_arg(config, "--kv-cache-memory-bytes")) > 0, "the CPU default takes 92 % of RAM"
    assert config.shm_size is not None
    assert config.restart == "on-failure"
    assert container_port(inventory.node("vllm"), config) == 8000


def test_bad_and_small_configs_are_what_their_names_say() -> None:
    inventory = load_inventory(INVENTORY)
    good, bad, small = (inventory.serving_config(n) for n in VLLM_CONFIGS)
    assert int(_arg(bad, "--max-model-len")) > make_model.MAX_POSITIONS
    assert int(_arg(good, "--max-model-len")) <= make_model.MAX_POSITIONS
    assert bad.restart_max_retries > 0, "the bad config must give up, not loop forever"
    small_kv = int(_arg(small, "--kv-cache-memory-bytes"))
    assert small_kv < int(_arg(good, "--kv-cache-memory-bytes")) // 4
    node = inventory.node("vllm")
    assert node.serving_config == "vllm-good"
    assert node.docker is not None
    assert node.docker.container == "faultkit-vllm"
    assert node.prometheus is not None


def test_model_head_size_is_one_the_cpu_attention_supports() -> None:
    assert make_model.HIDDEN // make_model.HEADS in (32, 64, 80, 96, 112, 128, 256)


def test_system_python_runtime_is_never_mounted_over_usr(
    fk_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm_node, "python_runtime", lambda: Path("/usr"))
    binds = [spec["bind"] for spec in vllm_node.vllm_container_mounts().values()]
    assert "/usr" not in binds
