"""Bad input: one clear line on stderr naming the parameter and what is allowed, exit 2,
and nothing journaled or touched (``faultkit inject`` included in and out of ``--dry-run``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.errors import FaultParamError
from faultkit.faults import make_fault
from faultkit.faults.params import Param, check_param
from faultkit.inventory import Inventory, Node
from faultkit.load.profile import MAX_RATE_RPS, LoadProfile
from tests.unit.cli_helpers import one_error_line
from tests.unit.inventory_text import one_node_inventory

INVENTORY = one_node_inventory()


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh FAULTKIT_HOME; the journal would be created under it."""
    path = tmp_path / "home"
    monkeypatch.setenv("FAULTKIT_HOME", str(path))
    return path




# faultkit inject -----------------------------------------------------------------------

BAD_PARAMS = [
    ("flood", "rate=0", "flood rate=0: must be > 0 and ≤ 2000 req/s"),
    ("flood", "rate=1e9", "flood rate=1e9: must be > 0 and ≤ 2000 req/s"),
    ("flood", "rate=inf", "flood rate=inf: must be a finite number, > 0 and ≤ 2000 req/s"),
    ("flood", "input_tokens=0", "flood input_tokens=0: must be ≥ 1 and ≤ 1048576 tokens"),
    ("flood", "concurrency=0", "flood concurrency=0: must be ≥ 1 and ≤ 1024 in flight"),
    ("oversized_context", "concurrency=0",
     "oversized_context concurrency=0: must be ≥ 1 and ≤ 1024 workers"),
    ("oversized_context", "input_tokens=0",
     "oversized_context input_tokens=0: must be ≥ 1 and ≤ 1048576 tokens"),
    ("oversized_context", "requests=-3", "oversized_context requests=-3: must be ≥ 1"),
    ("loss", "mode=bogus", "loss mode=bogus: must be one of auto, netem, iptables"),
    ("loss", "percent=150", "loss percent=150: must be > 0 and ≤ 100 %"),
    ("partition", "mode=sideways", "partition mode=sideways: must be one of refuse, blackhole"),
    ("latency", "delay_ms=-500", "latency delay_ms=-500: must be > 0 and ≤ 60000 ms"),
    ("latency", "delay_ms=nan", "latency delay_ms=nan: must be a finite number, > 0"),
    ("latency", "mode=warp", "latency mode=warp: must be one of auto, netem, proxy"),
    ("memory_squeeze", "fraction=5", "memory_squeeze fraction=5: must be > 0 and < 1"),
    ("memory_squeeze", "limit=1k", "memory_squeeze limit=1k: must be a memory size of at least"),
    ("kill", "ready_timeout_s=-1", "kill ready_timeout_s=-1: must be > 0 and ≤ 3600 s"),
    ("stop", "stop_timeout_s=-5", "stop stop_timeout_s=-5: must be ≥ 0 and ≤ 600 s"),
    ("restart", "ready_timeout_s=inf", "restart ready_timeout_s=inf: must be a finite number"),
    ("bandwidth", "rate=0mbit", "bandwidth rate=0mbit: must be a tc rate above 0"),
    ("kill", "docker_kill=maybe", "kill docker_kill=maybe: must be true or false"),
    ("kill", "speed=3", "fault 'kill' has no param 'speed'"),
    ("rollout", "max_restarts=0", "rollout max_restarts=0: must be ≥ 1 and ≤ 100 restarts"),
]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
@pytest.mark.parametrize(("kind", "param", "message"), BAD_PARAMS,
                         ids=[f"{k}-{p}" for k, p, _ in BAD_PARAMS])
def test_inject_bad_param_is_one_line_exit_2_and_journals_nothing(
    kind: str, param: str, message: str, dry_run: bool, inv: Path, home: Path
) -> None:
    args = ["inject", kind, "--node", "n", "--inventory", str(inv), "--param", param,
            "--duration", "1s"]
    result = CliRunner().invoke(cli, args + (["--dry-run"] if dry_run else []))
    line = one_error_line(result)
    assert message in line
    assert not home.exists(), "nothing may be journaled (not even the journal directory)"
    assert "plan:" not in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["meteor", "--node", "n"], "unknown fault 'meteor'"),
    (["kill", "--node", "ghost"], "no node 'ghost'"),
    (["kill", "--node", "n", "--duration", "soon"], "Invalid value for '--duration'"),
    (["kill", "--node", "n", "--duration", "0s"], "must be a duration > 0"),
    (["kill", "--node", "n", "--param", "novalue"], "Invalid value for '--param'"),
    (["rollout", "--node", "n"], "rollout config: must be given as config=NAME"),
    (["rollout", "--node", "n", "--param", "config=nope"], "no serving config 'nope'"),
])
def test_inject_other_bad_input_exits_2(args: list[str], message: str, inv: Path,
                                        home: Path) -> None:
    result = CliRunner().invoke(cli, ["inject", *args, "--inventory", str(inv)])
    assert message in one_error_line(result)
    assert not home.exists()


def test_inject_refused_by_policy_exits_2(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY.replace('faults: ["*"]', "faults: [kill]\n    protected: true"))
    result = CliRunner().invoke(cli, ["inject", "kill", "--node", "n", "--inventory", str(path)])
    assert "is protected" in one_error_line(result)
    assert not home.exists()


def test_inject_good_dry_run_still_plans(inv: Path, home: Path) -> None:
    result = CliRunner().invoke(cli, ["inject", "flood", "--node", "n", "--inventory", str(inv),
                                      "--param", f"rate={MAX_RATE_RPS:g}", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("plan: flood on n")
    assert not home.exists()


# faultkit load -------------------------------------------------------------------------

@pytest.mark.parametrize(("option", "value", "message"), [
    ("--rate", "inf", "Invalid value for '--rate': inf: must be a finite number, > 0 and ≤ 2000"),
    ("--rate", "1e9", "Invalid value for '--rate': 1e9: must be > 0 and ≤ 2000 req/s"),
    ("--rate", "nan", "Invalid value for '--rate': nan: must be a finite number"),
    ("--rate", "0", "Invalid value for '--rate': 0: must be > 0"),
    ("--timeout", "-5", "Invalid value for '--timeout': -5: must be > 0 s"),
    ("--connect-timeout", "inf", "Invalid value for '--connect-timeout'"),
    ("--first-token-timeout", "nan", "Invalid value for '--first-token-timeout'"),
    ("--burstiness", "inf", "Invalid value for '--burstiness'"),
    ("--duration", "-1", "Invalid value for '--duration'"),
])
def test_load_bad_numbers_exit_2_before_any_request(
    option: str, value: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("bad input must be refused before the pre-flight request")

    monkeypatch.setattr("faultkit.commands.load.preflight", no_network)
    result = CliRunner().invoke(cli, ["load", "--endpoint", "http://127.0.0.1:9",
                                      "--model", "m", option, value])
    assert message in one_error_line(result)


@pytest.mark.parametrize("rate", [math.inf, math.nan, MAX_RATE_RPS * 2, 0.0])
def test_load_profile_refuses_rates_one_core_cannot_schedule(rate: float) -> None:
    with pytest.raises(ValueError, match="rate must be > 0 and <= 2000"):
        LoadProfile(rate=rate)
    assert LoadProfile(rate=MAX_RATE_RPS).rate == MAX_RATE_RPS


def test_load_profile_refuses_infinite_timeouts() -> None:
    with pytest.raises(ValueError, match="total_timeout_s must be > 0 s and finite"):
        LoadProfile(total_timeout_s=math.inf)


# faultkit rules / gate -----------------------------------------------------------------

def test_rules_node_down_for_must_be_a_prometheus_duration(inv: Path) -> None:
    result = CliRunner().invoke(cli, ["rules", "--inventory", str(inv),
                                      "--node-down-for", "banana"])
    line = one_error_line(result)
    assert "'--node-down-for'" in line and "'banana'" in line and "Prometheus duration" in line
    ok = CliRunner().invoke(cli, ["rules", "--inventory", str(inv), "--node-down-for", "1h30m"])
    assert ok.exit_code == 0, ok.output


def test_gate_unknown_node_exits_2(inv: Path, home: Path) -> None:
    result = CliRunner().invoke(cli, ["gate", "--inventory", str(inv), "--node", "nope",
                                      "--config", "good", "--out", str(home / "runs")])
    line = one_error_line(result)
    assert "no node named 'nope'" in line
    assert not home.exists()


def test_gate_unknown_config_exits_2(inv: Path, home: Path) -> None:
    result = CliRunner().invoke(cli, ["gate", "--inventory", str(inv), "--node", "n",
                                      "--config", "nope", "--out", str(home / "runs")])
    assert "no serving config 'nope'" in one_error_line(result)
    assert not home.exists()


def test_unknown_command_is_one_line_exit_2() -> None:
    assert "No such command" in one_error_line(CliRunner().invoke(cli, ["meteor"]))


# the Param spec --------------------------------------------------------------------------

def test_param_spec_converts_and_bounds() -> None:
    rate = Param(float, 50.0, gt=0, le=2000, unit="req/s")
    assert check_param("flood", "rate", rate, "12.5") == 12.5
    assert check_param("flood", "rate", rate, 7) == 7.0
    with pytest.raises(FaultParamError) as info:
        check_param("flood", "rate", rate, "0")
    assert str(info.value) == "flood rate=0: must be > 0 and ≤ 2000 req/s"
    assert (info.value.param, info.value.value) == ("rate", "0")
    with pytest.raises(FaultParamError, match="must be a finite number"):
        check_param("flood", "rate", rate, float("nan"))
    with pytest.raises(FaultParamError, match="not None"):
        check_param("flood", "rate", rate, None)
    optional = Param(int, None, ge=1)
    assert check_param("x", "requests", optional, None) is None
    with pytest.raises(FaultParamError, match="must be an integer, ≥ 1"):
        check_param("x", "requests", optional, "1.5")
    with pytest.raises(FaultParamError, match="must be an integer"):
        check_param("x", "requests", optional, True)


def test_short_tuple_form_still_works_and_refuses_nan() -> None:
    from tests.unit.faults_fake import FakeFault, node

    fault = FakeFault(node(), dry_run=True, key="b", fail_apply="no")
    assert fault.params == {"key": "b", "fail_apply": False}
    spec = FakeFault.params_spec()
    assert spec["key"] == Param(str, "a")
    with pytest.raises(FaultParamError, match="x=nan: must be a finite number"):
        check_param("fake", "x", Param(float, 1.0), "nan")


def test_params_are_checked_before_a_journal_is_opened(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = Inventory(nodes=[Node(name="n", engine="llamacpp", base_url="http://127.0.0.1:9",
                                      model="m", faults=["*"])])
    with pytest.raises(FaultParamError, match="flood rate=-1"):
        make_fault("flood", "n", inventory=inventory, rate=-1)  # not a dry run: no journal given
    assert not home.exists()
