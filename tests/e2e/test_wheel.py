"""The built wheel works outside a source checkout: ``pip install`` + ``faultkit gate``.

The wheel is built from this checkout and installed (without its dependencies) into a fresh
virtualenv; the dependencies come from this project's environment through a ``.pth`` line
(no download, and the environment's editable install of faultkit is *not* picked up: a
``.pth`` path entry does not run that directory's own ``.pth`` files). The gate then runs
from an empty directory, so nothing can be found through the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "testbed" / "inventory.yaml"
#: the environment without PYTHONPATH: nothing may reach the checkout through it
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; returns its ``bin`` directory."""
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(base), str(REPO)],
        check=True, capture_output=True, text=True, env=CLEAN_ENV,
    )
    wheel = next(base.glob("faultkit-*.whl"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   env=CLEAN_ENV)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         str(wheel)],
        check=True, capture_output=True, text=True, env=CLEAN_ENV,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, env=CLEAN_ENV,
    ).stdout.strip()
    (Path(purelib) / "zz_faultkit_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def test_wheel_ships_the_scenario_catalogue(installed: Path, tmp_path: Path) -> None:
    probe = subprocess.run(
        [str(installed / "python"), "-c",
         "import faultkit, scenarios, testbed; print(faultkit.__file__); "
         "print(scenarios.__file__)"],
        cwd=tmp_path, check=True, capture_output=True, text=True, env=CLEAN_ENV,
    ).stdout.split()
    venv = installed.parent.resolve()
    assert all(Path(p).resolve().is_relative_to(venv) for p in probe), probe
    assert (Path(probe[1]).parent / "test_kill.py").is_file()


def test_the_installed_lab_plugs_in_its_command_and_inventory(installed: Path,
                                                              tmp_path: Path) -> None:
    """Through the wheel's entry points (faultkit.commands, faultkit.labs), from a directory
    with no inventory.yaml: the lab's command is listed and its inventory is the default."""
    listed = subprocess.run([str(installed / "faultkit"), "--help"], cwd=tmp_path, check=True,
                            capture_output=True, text=True, env=CLEAN_ENV).stdout
    assert any(line.split()[:1] == ["testbed"] for line in listed.splitlines()), listed
    default = subprocess.run(
        [str(installed / "python"), "-c",
         "from faultkit.commands.input import default_inventory; print(default_inventory())"],
        cwd=tmp_path, check=True, capture_output=True, text=True, env=CLEAN_ENV,
    ).stdout.strip()
    assert Path(default).resolve().is_relative_to(installed.parent.resolve()), default
    assert Path(default).name == "inventory.yaml" and Path(default).is_file()


@pytest.mark.docker
def test_gate_dry_run_outside_a_checkout_touches_nothing(installed: Path, tmp_path: Path) -> None:
    work = tmp_path / "empty"
    work.mkdir()
    inventory = shutil.copy(INVENTORY, tmp_path / "inventory.yaml")
    before = _container_state("faultkit-sim-vllm")
    proc = subprocess.run(
        [str(installed / "faultkit"), "gate", "--dry-run", "--node", "sim-vllm",
         "--config", "sim-vllm-bad-oom", "--inventory", str(inventory)],
        cwd=work, capture_output=True, text=True, timeout=300, env=CLEAN_ENV,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    scenarios_line = next(line for line in out.splitlines() if line.startswith("scenarios: "))
    assert Path(scenarios_line.removeprefix("scenarios: ")).resolve().is_relative_to(
        installed.parent.resolve()
    ), scenarios_line
    # each gate scenario printed its fault plan and acted on nothing
    assert "dry run: kill on sim-vllm" in out, out
    assert "dry run: partition on sim-vllm" in out, out
    # the diff touches memory utilization and chunked prefill: limits, oom, soak and overload
    # first, and pytest's own progress lines list the scenario files in that order
    assert "order: test_limits, test_oom, test_soak, test_overload first" in out, out
    files = [line.split("::")[0].rsplit("/", 1)[-1].split()[0] for line in out.splitlines()
             if "scenarios/test_" in line and (" s" in line or "PASSED" in line)]
    assert files[:4] == ["test_limits.py", "test_oom.py", "test_soak.py", "test_overload.py"], \
        files
    assert "rolling" not in out  # the rollout never started
    assert list(work.iterdir()) == []  # no runs/, no gate directory
    assert _container_state("faultkit-sim-vllm") == before  # Docker's own record: untouched


def _container_state(name: str) -> str:
    """Docker's record of the container: id, start time, restarts, serving-config label."""
    return subprocess.run(
        ["docker", "inspect", "-f",
         '{{.Id}} {{.State.StartedAt}} {{.RestartCount}} '
         '{{index .Config.Labels "faultkit.serving-config"}}', name],
        check=True, capture_output=True, text=True, env=CLEAN_ENV,
    ).stdout.strip()
