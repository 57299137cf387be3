"""The lab's Alertmanager and pager without starting them (testbed/alertmanager.py): the
route to the pager, the config amtool accepts, Prometheus's ``alerting:`` block, loopback
only, and stopping by PID file only the process the lab started."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from faultkit.inventory import AlertmanagerSettings, Inventory, load_inventory, parse_inventory
from testbed import alertmanager
from testbed.alertmanager import (
    GROUP_WAIT,
    alertmanager_config,
    ensure_alertmanager,
    listen_address,
    stop_alertmanager,
)
from testbed.errors import TestbedError
from testbed.paths import INVENTORY, state_dir
from testbed.procs import is_ours
from testbed.prometheus import scrape_config
from tests.unit.slo_helpers import required_binary

NODES = """
nodes:
  - {name: a, engine: vllm, base_url: "http://127.0.0.1:18001", model: m, prometheus: {job: a}}
"""


def inventory_with(alertmanager_yaml: str) -> Inventory:
    return parse_inventory(alertmanager_yaml + NODES, source="inv.yaml")


def test_the_lab_pages_its_pager_through_its_alertmanager() -> None:
    inventory = load_inventory(INVENTORY)
    assert inventory.alertmanager == AlertmanagerSettings(
        url="http://127.0.0.1:19093", pager_url="http://127.0.0.1:19094")
    config = scrape_config(inventory)
    assert config["alerting"] == {
        "alertmanagers": [{"static_configs": [{"targets": ["127.0.0.1:19093"]}]}]}


def test_the_route_groups_by_alert_and_node_and_delivers_resolved_pages_too() -> None:
    config = alertmanager_config(AlertmanagerSettings(url="http://127.0.0.1:19093",
                                                      pager_url="http://127.0.0.1:19094"))
    assert config == {
        "route": {"receiver": "faultkit-pager", "group_by": ["alertname", "node"],
                  "group_wait": "2s", "group_interval": "3s", "repeat_interval": "1h"},
        "receivers": [{"name": "faultkit-pager", "webhook_configs": [
            {"url": "http://127.0.0.1:19094/alerts", "send_resolved": True}]}],
    }
    assert GROUP_WAIT == "2s"
    # without a pager the receiver delivers nowhere; the config stays valid
    bare = alertmanager_config(AlertmanagerSettings(url="http://127.0.0.1:19093"))
    assert bare["receivers"] == [{"name": "faultkit-pager"}]


@pytest.fixture
def amtool() -> str:
    return required_binary("amtool", "prometheus-alertmanager")


@pytest.mark.usefixtures("amtool")
@pytest.mark.parametrize("pager_url", ["http://127.0.0.1:19094", None])
def test_amtool_accepts_the_config(tmp_path: Path, pager_url: str | None) -> None:
    path = tmp_path / "alertmanager.yml"
    settings = AlertmanagerSettings(url="http://127.0.0.1:19093", pager_url=pager_url)
    path.write_text(yaml.safe_dump(alertmanager_config(settings), sort_keys=False))
    subprocess.run(["amtool", "check-config", str(path)], check=True, capture_output=True)


def test_no_alerting_block_without_an_alertmanager() -> None:
    assert "alerting" not in scrape_config(inventory_with(""))


def test_an_alertmanager_behind_https_and_a_prefix_is_addressed_as_given() -> None:
    inventory = inventory_with("alertmanager: {url: 'https://am.example:8443/am'}\n")
    assert scrape_config(inventory)["alerting"] == {"alertmanagers": [{
        "static_configs": [{"targets": ["am.example:8443"]}], "scheme": "https",
        "path_prefix": "/am"}]}


@pytest.mark.parametrize(("url", "message"), [
    ("http://10.0.0.5:9093", "must listen on loopback, not 10.0.0.5"),
    ("http://127.0.0.1", "needs an explicit port"),
])
def test_the_lab_listens_on_loopback_ports_only(url: str, message: str) -> None:
    with pytest.raises(TestbedError, match=re.escape(message)):
        listen_address(url, "Alertmanager")


def test_a_remote_pager_url_is_refused_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path))
    inventory = inventory_with("alertmanager: {url: 'http://127.0.0.1:19093', "
                               "pager_url: 'http://192.0.2.1:9094'}\n")
    with pytest.raises(TestbedError, match=r"pager must listen on loopback, not 192\.0\.2\.1"):
        ensure_alertmanager(inventory, print)
    assert not (tmp_path / "state").exists()
    assert ensure_alertmanager(inventory_with(""), print) is None


def _sleeper(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv])


def test_stop_stops_only_the_processes_the_lab_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path))
    directory = state_dir("alertmanager")
    ours = _sleeper(f"--config.file={directory / 'alertmanager.yml'}")
    stranger = _sleeper("--log", "/elsewhere/notifications.jsonl")  # a PID file gone stale
    try:
        (directory / "alertmanager.pid").write_text(str(ours.pid))
        (directory / "pager.pid").write_text(str(stranger.pid))
        assert stop_alertmanager() == ["Alertmanager"]
        assert ours.wait(5) is not None
        time.sleep(0.2)
        assert stranger.poll() is None  # not the pager the lab started: left alone
        assert not (directory / "alertmanager.pid").exists()
        assert not (directory / "pager.pid").exists()
        assert stop_alertmanager() == []  # idempotent
    finally:
        for proc in (ours, stranger):
            if proc.poll() is None:
                proc.kill()
            proc.wait(5)


def test_is_ours_reads_a_missing_process_as_not_ours() -> None:
    proc = _sleeper()
    proc.kill()
    proc.wait(5)
    assert not is_ours(proc.pid, b"sleep")


@pytest.mark.usefixtures("amtool")
def test_a_config_is_written_once_amtool_accepts_it_and_only_when_it_changed(
        tmp_path: Path) -> None:
    config = tmp_path / "alertmanager.yml"
    good = yaml.safe_dump(alertmanager_config(AlertmanagerSettings(url="http://127.0.0.1:1")))
    assert alertmanager._write_checked(config, good) is True
    assert alertmanager._write_checked(config, good) is False  # unchanged: nothing to reload
    with pytest.raises(TestbedError, match="amtool check-config failed"):
        alertmanager._write_checked(config, "route: {receiver: nobody}\n")
    assert config.read_text() == good  # the refused config never replaced the checked one


@pytest.mark.parametrize(("pager_ready", "code", "word"),
                         [(True, 0, "ready"), (False, 1, "NOT READY")])
def test_status_shows_alertmanager_and_the_pager_and_fails_when_one_is_not_ready(
        monkeypatch: pytest.MonkeyPatch, pager_ready: bool, code: int, word: str) -> None:
    from click.testing import CliRunner

    from testbed import cli as testbed_cli

    class FakeLab:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.inventory = load_inventory(INVENTORY)

        def status(self) -> list[object]:
            return []

        def prometheus_ready(self) -> bool:
            return True

        def paging_ready(self) -> list[tuple[str, str, bool]]:
            return [("Alertmanager", "http://127.0.0.1:19093", True),
                    ("pager", "http://127.0.0.1:19094", pager_ready)]

    monkeypatch.setattr(testbed_cli, "Lab", FakeLab)
    result = CliRunner().invoke(testbed_cli.testbed, ["status"])
    assert result.exit_code == code, result.output
    assert result.output.splitlines()[-2:] == ["Alertmanager http://127.0.0.1:19093: ready",
                                               f"pager http://127.0.0.1:19094: {word}"]
