"""testbed.litellm_node without LiteLLM: caching, the .pth guard, mounts, env, command."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from faultkit.inventory import parse_inventory
from testbed import litellm_node
from testbed.errors import TestbedError
from testbed.gateway_config import GatewaySpec, Upstream
from testbed.venvs import site_packages


@pytest.fixture
def fk_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path))
    return tmp_path


def _no_run(*_args: object, **_kwargs: object) -> str:
    raise AssertionError("a cached venv must not run pip")


def test_cached_env_returns_without_running_anything(
    fk_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = fk_home / "litellm-venv"
    venv.mkdir()
    wanted = litellm_node.spec_hash(litellm_node.env_spec())
    (venv / litellm_node.MARKER).write_text(wanted + "\n")
    monkeypatch.setattr(litellm_node, "run", _no_run)
    assert litellm_node.ensure_litellm_env(lambda _m: None) == venv


def test_stale_marker_rebuilds_from_scratch(fk_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = fk_home / "litellm-venv"
    venv.mkdir()
    (venv / litellm_node.MARKER).write_text("an-old-spec\n")
    (venv / "leftover").write_text("x")
    calls: list[list[str]] = []

    def fake_run(argv: list[str], what: str, log: Path, **_kwargs: object) -> str:
        calls.append(argv)
        raise TestbedError(f"{what}: stopped here")

    monkeypatch.setattr(litellm_node, "run", fake_run)
    with pytest.raises(TestbedError, match="stopped here"):
        litellm_node.ensure_litellm_env(lambda _m: None)
    assert not (venv / "leftover").exists()
    assert calls[0][1:3] == ["-m", "venv"]


def test_install_pins_litellm_and_refuses_a_stray_pth(
    fk_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_run(argv: list[str], what: str, log: Path, **_kwargs: object) -> str:
        calls.append(argv)
        if argv[1:3] == ["-m", "venv"]:
            (Path(argv[3]) / "bin").mkdir(parents=True)
            (Path(argv[3]) / "bin" / "python").touch()
        if "install" in argv:  # what a compromised wheel would leave behind
            packages = site_packages(Path(argv[0]).parents[1])
            packages.mkdir(parents=True)
            (packages / "distutils-precedence.pth").write_text("import os\n")
            (packages / "litellm_init.pth").write_text("import os\n")
        return ""

    monkeypatch.setattr(litellm_node, "run", fake_run)
    with pytest.raises(TestbedError, match=r"unexpected start-up files \(litellm_init\.pth\)"):
        litellm_node.ensure_litellm_env(lambda _m: None)
    install = next(argv for argv in calls if "install" in argv)
    assert f"litellm[proxy]=={litellm_node.LITELLM_VERSION}" in install
    assert any(arg.startswith("prometheus_client==") for arg in install)
    assert not (fk_home / "litellm-venv" / litellm_node.MARKER).exists(), "never marked whole"


def test_spec_hash_changes_with_the_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    before = litellm_node.spec_hash(litellm_node.env_spec())
    monkeypatch.setattr(litellm_node, "LITELLM_REQUIREMENT", "litellm[proxy]==9.9.9")
    assert litellm_node.spec_hash(litellm_node.env_spec()) != before


def test_mounts_are_read_only_at_the_container_paths(fk_home: Path) -> None:
    mounts = litellm_node.litellm_container_mounts("gw")
    binds = {spec["bind"]: host for host, spec in mounts.items()}
    assert all(spec["mode"] == "ro" for spec in mounts.values())
    assert binds[litellm_node.VENV_IN_CONTAINER] == str(fk_home / "litellm-venv")
    assert binds[litellm_node.CONFIG_DIR_IN_CONTAINER] == str(fk_home / "state" / "gateway" / "gw")
    runtime = str(litellm_node.python_runtime())
    assert binds[runtime] == runtime, "the venv's python symlink needs the runtime at its own path"


def test_system_python_is_never_mounted_over_usr(
    fk_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(litellm_node, "python_runtime", lambda: Path("/usr"))
    binds = [spec["bind"] for spec in litellm_node.litellm_container_mounts("gw").values()]
    assert "/usr" not in binds


def test_env_is_offline_without_telemetry_or_database() -> None:
    env = litellm_node.litellm_container_env()
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["LITELLM_TELEMETRY_DISABLED"] == "true"
    assert env["LITELLM_MODE"] == "PRODUCTION", "DEV mode reads a .env from the working dir"
    assert "DATABASE_URL" not in env
    assert "LITELLM_MASTER_KEY" not in env, "the key is the serving config's, never baked in"


def test_proxy_runs_as_a_module_not_a_console_script() -> None:
    cmd = litellm_node.proxy_command()
    assert cmd[:3] == [
        f"{litellm_node.VENV_IN_CONTAINER}/bin/python",
        "-m",
        "litellm.proxy.proxy_cli",
    ]
    assert cmd[cmd.index("--config") + 1] == litellm_node.CONFIG_IN_CONTAINER
    assert cmd[cmd.index("--port") + 1] == str(litellm_node.CONTAINER_PORT)
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
    host = litellm_node.proxy_command("/v/bin/python", "/c.yaml", host="127.0.0.1", port=28101)
    assert host[:3] == ["/v/bin/python", "-m", "litellm.proxy.proxy_cli"]
    assert host[host.index("--port") + 1] == "28101"


def test_config_is_written_whole_and_readable(fk_home: Path) -> None:
    spec = GatewaySpec("chat", (Upstream("a", "http://a:8000", "m"),))
    path = litellm_node.write_gateway_config("gw", spec)
    assert path == fk_home / "state" / "gateway" / "gw" / "config.yaml"
    assert yaml.safe_load(path.read_text())["model_list"][0]["model_info"] == {"id": "a"}
    assert path.stat().st_mode & 0o777 == 0o644
    assert not path.with_name("config.yaml.tmp").exists()


def test_lab_setup_refuses_an_engine_node(fk_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = parse_inventory(
        "nodes:\n  - {name: a, engine: vllm, base_url: 'http://127.0.0.1:1', model: m}\n"
    )
    monkeypatch.setattr(litellm_node, "ensure_litellm_env", _no_run)
    with pytest.raises(TestbedError, match="'a' is not a LiteLLM gateway"):
        litellm_node.litellm_lab_setup(inventory, inventory.node("a"), lambda _m: None)


def test_lab_setup_writes_the_config_and_returns_the_container(
    fk_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = parse_inventory(
        "nodes:\n"
        "  - {name: a, engine: vllm, base_url: 'http://127.0.0.1:8000', model: m}\n"
        "  - {name: gw, kind: gateway, engine: litellm, base_url: 'http://127.0.0.1:4000',\n"
        "     model: chat, upstreams: [a]}\n"
    )
    monkeypatch.setattr(litellm_node, "ensure_litellm_env", lambda _p: fk_home / "litellm-venv")
    volumes, env, command = litellm_node.litellm_lab_setup(
        inventory, inventory.node("gw"), lambda _m: None, address=lambda n: f"http://{n.name}:8000"
    )
    config = yaml.safe_load((fk_home / "state" / "gateway" / "gw" / "config.yaml").read_text())
    assert config["model_list"][0]["litellm_params"]["api_base"] == "http://a:8000/v1"
    assert env == litellm_node.litellm_container_env()
    assert command == litellm_node.proxy_command()
    assert str(fk_home / "state" / "gateway" / "gw") in volumes
