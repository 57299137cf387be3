"""The pytest plugin is light, and idle unless the session uses faultkit.

pytest loads the plugin (``pytest11`` entry point) in every project of an environment
where faultkit is installed. There it must import nothing heavy (Docker, aiohttp, …),
print no header and sweep no journal. Each case runs pytest in a subprocess with this
interpreter and a private ``FAULTKIT_HOME``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.paths import REPO

#: modules the plugin must not import in a session that does not use faultkit
HEAVY = ("docker", "aiohttp", "httpx", "prometheus_api_client", "matplotlib", "slo", "reports")

#: pytest in-process, then what it left in sys.modules (one line, ``MODULES: a b c``)
PYTEST_THEN_MODULES = textwrap.dedent(
    """
    import sys
    import pytest

    code = pytest.main(sys.argv[1:])
    print("EXIT", int(code))
    print("MODULES:", " ".join(sorted(m for m in sys.modules)))
    """
)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FAULTKIT_", "PYTEST_"))}
    env["FAULTKIT_HOME"] = str(home)
    return env


def _pytest(cwd: Path, home: Path, *args: str) -> tuple[int, str, set[str]]:
    """Run pytest in ``cwd``; return its exit code, its output and the modules it imported."""
    proc = subprocess.run(
        [sys.executable, "-c", PYTEST_THEN_MODULES, "-p", "no:cacheprovider", *args],
        cwd=cwd, env=_env(home), capture_output=True, text=True, timeout=300, check=False,
    )
    lines = proc.stdout.splitlines()
    modules = next(line for line in lines if line.startswith("MODULES:")).split()[1:]
    code = int(next(line for line in lines if line.startswith("EXIT")).split()[1])
    return code, proc.stdout, set(modules)


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def _header(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("faultkit:")]


@pytest.mark.parametrize("quiet", [(), ("-q",)], ids=["header-shown", "quiet"])
def test_an_empty_project_imports_nothing_heavy_and_prints_no_header(
    tmp_path: Path, quiet: tuple[str, ...]
) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    code, output, modules = _pytest(project, home, "--co", *quiet)
    assert code == pytest.ExitCode.NO_TESTS_COLLECTED, output
    assert "faultkit.plugin" in modules  # the plugin was loaded …
    assert _heavy(modules) == []  # … and imported nothing heavy
    assert "docker" not in modules and "aiohttp" not in modules
    assert _header(output) == []
    assert not home.exists()


def test_an_unrelated_test_run_is_left_alone(tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    (project / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    code, output, modules = _pytest(project, home)
    assert code == pytest.ExitCode.OK, output
    assert _heavy(modules) == []
    assert _header(output) == []
    assert not home.exists()  # no journal sweep


def test_a_fault_marker_turns_the_plugin_on(tmp_path: Path) -> None:
    """The positive control: a collected test with a ``fault`` marker uses faultkit, so the
    header is shown and the journal is swept (which creates it) before the test runs."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    (project / "test_scenario.py").write_text(
        "import pytest\n\n\n@pytest.mark.fault('kill')\ndef test_scenario():\n    assert True\n"
    )
    code, output, _ = _pytest(project, home)
    assert code == pytest.ExitCode.OK, output
    assert any(line.startswith("faultkit: inventory") for line in _header(output)), output
    assert (home / "journal").is_dir()


def test_the_scenarios_still_collect(tmp_path: Path) -> None:
    code, output, _ = _pytest(REPO, tmp_path / "home", "--co", "-q", "scenarios")
    assert code == pytest.ExitCode.OK, output
    assert "scenarios/test_kill.py::test_kill[" in output
    assert not (tmp_path / "home").exists()  # collecting sweeps nothing


def test_on_the_testbed_the_gateway_gets_only_its_scenarios(tmp_path: Path) -> None:
    """The gateway's fault scenarios are its own (``node_kind("gateway")``):
    ``test_gateway_termination`` (the gateway dies; ``test_kill`` is for engine nodes, so
    the experiment runs once), ``test_upstream_failure`` once per upstream fault and
    ``test_gateway_rollout`` once per candidate config (``test_rollout`` is for engine
    nodes), besides the smoke checks, which inject nothing."""
    code, output, _ = _pytest(REPO, tmp_path / "home", "--co", "-q", "scenarios")
    assert code == pytest.ExitCode.OK, output
    ids = sorted(line.split("::", 1)[1] for line in output.splitlines() if "[gateway" in line)
    assert ids == [
        "test_gateway_rollout[gateway:gateway-bad-upstream]",
        "test_gateway_termination[gateway]",
        "test_is_scraped_by_prometheus[gateway]",
        "test_streams_a_completion[gateway]",
        "test_upstream_failure[gateway-kill]",
        "test_upstream_failure[gateway-partition]",
        "test_upstream_failure[gateway-pause]",
    ], output
    others = [line for line in output.splitlines()
              if any(f"test_{name}[" in line for name in
                     ("upstream_failure", "gateway_termination", "gateway_rollout"))
              and "[gateway" not in line]
    assert not others, others  # engine nodes get none of them
    assert "test_kill[gateway]" not in output and "test_rollout[gateway" not in output


def test_the_unit_tests_do_not_sweep_the_journal(tmp_path: Path) -> None:
    """``pytest tests/unit`` (this repository's ini sets ``faultkit = true``: header shown)
    runs no scenario, so it leaves FAULTKIT_HOME alone. One cheap test is selected, so the
    whole of tests/unit is collected but this module is not run again."""
    home = tmp_path / "home"
    code, output, _ = _pytest(REPO, home, "tests/unit", "-k", "test_parse_window")
    assert code == pytest.ExitCode.OK, output
    assert "1 passed" in output
    assert _header(output), output  # the ini says faultkit is used: the header shows
    assert not home.exists() or not any(home.iterdir())


def test_soak_scenarios_run_only_for_a_given_duration(tmp_path: Path) -> None:
    """``pytest scenarios`` deselects test_soak (pytest counts it, the header says why);
    ``--soak-s`` selects it on every engine node; a bad duration is a usage error."""
    home = tmp_path / "home"
    code, output, _ = _pytest(REPO, home, "--co", "scenarios", "-k", "soak or smoke")
    assert code == pytest.ExitCode.OK, output
    assert "test_soak[" not in output
    assert "soak scenarios deselected (give --soak-s SECONDS" in output, output
    code, output, _ = _pytest(REPO, home, "--co", "-q", "scenarios", "-k", "soak",
                              "--soak-s", "90s")
    assert code == pytest.ExitCode.OK, output
    ids = sorted(line.split("::", 1)[1] for line in output.splitlines() if "test_soak[" in line)
    assert ids == ["test_soak[llama]", "test_soak[sim-sglang]", "test_soak[sim-vllm-h2]",
                   "test_soak[sim-vllm]", "test_soak[vllm]"], output
    code, output, _ = _pytest(REPO, home, "--co", "-q", "scenarios", "--soak-s", "forever")
    assert code == pytest.ExitCode.USAGE_ERROR, output  # once, at start-up (stderr)
