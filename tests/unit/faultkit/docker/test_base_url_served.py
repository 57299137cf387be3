"""The node's base_url must be served by its container before a fault that acts on the
container runs: the pure check on realistic `docker inspect` data, and the refusal in
inject() (nothing journaled or done) with the fake fault on a fake Docker host."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from faultkit.docker.baseurl import check_base_url
from faultkit.errors import FaultRefused
from faultkit.faults import base, fault_class
from faultkit.journal import FaultJournal
from faultkit.model.kinds import FAULTS
from faultkit.model.records import Event
from tests.unit.faults_fake import WORLD, FakeFault, node

SOCK = "unix:///var/run/docker.sock"
LAB_IP = "172.20.0.3"


def inspect_attrs(*, bindings: dict[str, list[dict[str, str]]] | None = None,
                  live_ports: dict[str, Any] | None = None, network_mode: str = "faultkit-lab",
                  ip: str = LAB_IP, exposed: tuple[str, ...] = ("8000/tcp",),
                  running: bool = True) -> dict[str, Any]:
    """The parts of `docker inspect faultkit-vllm` the check reads, shaped as Docker 27
    writes them (HostConfig.PortBindings as created; NetworkSettings.Ports once running)."""
    bindings = bindings if bindings is not None else {
        "8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "18000"}]}
    networks: dict[str, Any] = {}
    if network_mode not in ("host", "none") and not network_mode.startswith("container:"):
        networks[network_mode] = {
            "IPAMConfig": None, "Links": None, "Aliases": ["faultkit-vllm", "0f1e2d3c4b5a"],
            "NetworkID": "b4c1" * 16, "Gateway": "172.20.0.1" if running else "",
            "IPAddress": ip if running else "", "IPPrefixLen": 16 if running else 0,
            "IPv6Gateway": "", "GlobalIPv6Address": "", "MacAddress": "02:42:ac:14:00:03",
        }
    return {
        "Id": "57bcf44c5334775ec266460cb636beb7bb6712995bf06efec2d9f1b3fa9de32c",
        "Name": "/faultkit-vllm",
        "State": {"Status": "running" if running else "exited", "Running": running,
                  "Pid": 4242 if running else 0},
        "Config": {"Image": "faultkit/vllm-cpu:0.26",
                   "ExposedPorts": {p: {} for p in exposed}},
        "HostConfig": {"NetworkMode": network_mode, "PortBindings": bindings,
                       "RestartPolicy": {"Name": "on-failure", "MaximumRetryCount": 0}},
        "NetworkSettings": {
            "Bridge": "", "SandboxKey": "/var/run/docker/netns/6b0a4d1f2c3e",
            "Ports": (live_ports if live_ports is not None else bindings) if running else {},
            "IPAddress": "", "GlobalIPv6Address": "", "Networks": networks,
        },
    }


def vllm(base_url: str, host: str = SOCK) -> Any:
    return node("vllm", base_url=base_url,
                docker={"host": host, "container": "faultkit-vllm"})


# `-p 18000:8000`: created with an empty HostIp, bound on v4 and v6
PUBLISHED_EVERYWHERE: dict[str, Any] = {
    "bindings": {"8000/tcp": [{"HostIp": "", "HostPort": "18000"}]},
    "live_ports": {"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "18000"},
                                {"HostIp": "::", "HostPort": "18000"}]},
}


# the pure check ---------------------------------------------------------------------------

@pytest.mark.parametrize(("base_url", "attrs"), [
    ("http://127.0.0.1:18000", {}),                                  # the testbed's way
    ("http://localhost:18000", {}),
    ("http://127.0.0.1:18000", PUBLISHED_EVERYWHERE),
    ("http://[::1]:18000", PUBLISHED_EVERYWHERE),
    ("http://localhost:18000", PUBLISHED_EVERYWHERE),
    ("http://[::1]:18000", {"bindings": {"8000/tcp": [{"HostIp": "::1", "HostPort": "18000"}]}}),
    ("http://127.0.0.1:18000", {"running": False}),                  # stopped: the config says
    ("http://127.0.0.1:32768", {                                     # `-p 127.0.0.1::8000`
        "bindings": {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]},
        "live_ports": {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "32768"}]}}),
    ("http://127.0.0.1:18005", {                                     # a published range
        "bindings": {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "18000-18009"}]}}),
    ("https://127.0.0.1", {"bindings": {"8443/tcp": [{"HostIp": "127.0.0.1", "HostPort": "443"}]},
                           "exposed": ("8443/tcp",)}),
    (f"http://{LAB_IP}:8000", {}),                                   # the container's own IP
])
def test_served(base_url: str, attrs: dict[str, Any]) -> None:
    result = check_base_url(vllm(base_url), inspect_attrs(**attrs))
    assert result.outcome == "served", result.reason
    assert result.proven
    assert "\n" not in result.reason


def test_the_wrong_port_names_what_the_container_publishes() -> None:
    result = check_base_url(vllm("http://127.0.0.1:18001"), inspect_attrs())
    assert result.outcome == "not_served"
    assert not result.proven
    assert result.reason == (
        "node vllm: base_url http://127.0.0.1:18001 is not served by container faultkit-vllm "
        "(it publishes 127.0.0.1:18000 → 8000/tcp); fix the inventory's base_url or "
        "docker.container")


@pytest.mark.parametrize(("base_url", "attrs", "says"), [
    ("http://127.0.0.1:18000", {"bindings": {}}, "(it publishes no port)"),
    ("http://127.0.0.1:18000", {"bindings": {}, "exposed": ()}, "(it publishes no port)"),
    ("http://[::1]:18000", {}, "(it publishes 127.0.0.1:18000 → 8000/tcp)"),
    ("http://127.0.0.2:18000", {}, "(it publishes 127.0.0.1:18000 → 8000/tcp)"),
    ("http://127.0.0.1:18000", {"bindings": {"8000/tcp": [{"HostIp": "::1", "HostPort": "18000"}]}},
     "(it publishes [::1]:18000 → 8000/tcp)"),
    ("http://127.0.0.1:18000", {"bindings": {"8000/udp": [{"HostIp": "", "HostPort": "18000"}]}},
     "(it publishes no port)"),
    (f"http://{LAB_IP}:9000", {}, "does not expose port 9000/tcp (exposes: 8000/tcp)"),
])
def test_not_served(base_url: str, attrs: dict[str, Any], says: str) -> None:
    result = check_base_url(vllm(base_url), inspect_attrs(**attrs))
    assert result.outcome == "not_served", result.reason
    assert says in result.reason
    assert result.reason.endswith("fix the inventory's base_url or docker.container")


@pytest.mark.parametrize(("base_url", "attrs", "says"), [
    ("http://127.0.0.1:18000", {"network_mode": "host", "bindings": {}},
     "shares the host's (--network host) network namespace"),
    ("http://127.0.0.1:18000", {"network_mode": "container:sidecar"},
     "shares container sidecar's (--network container:sidecar) network namespace"),
    ("http://faultkit-vllm:8000", {}, "host faultkit-vllm is neither loopback nor one of"),
    ("http://172.20.0.1:18000", {}, f"container faultkit-vllm's IPs ({LAB_IP})"),  # gateway
    ("http://192.168.1.20:18000", PUBLISHED_EVERYWHERE, "use http://127.0.0.1:<published port>"),
    (f"http://{LAB_IP}:8000", {"running": False}, "IPs (none: it is not running)"),
])
def test_unproven(base_url: str, attrs: dict[str, Any], says: str) -> None:
    result = check_base_url(vllm(base_url), inspect_attrs(**attrs))
    assert result.outcome == "unproven", result.reason
    assert not result.proven
    assert says in result.reason


def test_a_remote_engine_is_reached_by_its_host_name_not_by_loopback() -> None:
    remote = "tcp://gpu-1.lan:2376"
    everywhere = inspect_attrs(**PUBLISHED_EVERYWHERE)
    assert check_base_url(vllm("http://gpu-1.lan:18000", remote), everywhere).proven
    loopback_only = check_base_url(vllm("http://gpu-1.lan:18000", remote), inspect_attrs())
    assert loopback_only.outcome == "not_served"
    tunnel = check_base_url(vllm("http://127.0.0.1:18000", remote), everywhere)
    assert tunnel.outcome == "unproven"
    assert "runs on tcp://gpu-1.lan:2376" in tunnel.reason
    assert "use http://gpu-1.lan:<published port>" in tunnel.reason
    by_ip = check_base_url(vllm("http://10.0.0.2:18000", "ssh://ops@10.0.0.2"), inspect_attrs(
        bindings={"8000/tcp": [{"HostIp": "10.0.0.2", "HostPort": "18000"}]}))
    assert by_ip.proven, by_ip.reason


# the refusal in inject() -------------------------------------------------------------------

class ContainerFault(FakeFault):
    """The fake fault, declared as acting on the node's container."""

    acts_on_container: ClassVar[bool] = True


class FakeHost:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs
        self.inspected = 0

    def inspect(self, name: str) -> dict[str, Any]:
        self.inspected += 1
        return self.attrs


@pytest.fixture(autouse=True)
def _fresh() -> None:
    WORLD.clear()


def use_host(monkeypatch: pytest.MonkeyPatch, attrs: dict[str, Any]) -> FakeHost:
    host = FakeHost(attrs)
    monkeypatch.setattr(base, "docker_host", lambda url: host)
    return host


@pytest.mark.parametrize(("base_url", "attrs", "says"), [
    ("http://127.0.0.1:18001", {}, "is not served by container faultkit-vllm (it publishes "
                                   "127.0.0.1:18000 → 8000/tcp)"),
    ("http://127.0.0.1:18000", {"network_mode": "host", "bindings": {}}, "--network host"),
])
async def test_a_container_not_proven_to_serve_the_base_url_is_refused_before_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, base_url: str, attrs: dict[str, Any],
    says: str,
) -> None:
    use_host(monkeypatch, inspect_attrs(**attrs))
    events: list[Event] = []
    fault = ContainerFault(vllm(base_url), journal=FaultJournal(tmp_path), timeline=events.append)
    with pytest.raises(FaultRefused) as refused:
        await fault.inject()
    message = str(refused.value)
    assert message.startswith(f"refused: node vllm: base_url {base_url}")
    assert says in message
    assert message.endswith("Nothing was done.")
    assert WORLD == {}
    assert events == []
    assert FaultJournal(tmp_path).records() == []
    assert FaultJournal(tmp_path).nodes.holders() == []  # the node lock was given back


async def test_every_inject_checks_the_container_afresh(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
) -> None:
    """A proof is not remembered: the container may be recreated under the same name with
    other ports (a rollout, a redeploy), and then the next fault must be refused."""
    host = use_host(monkeypatch, inspect_attrs())
    async with ContainerFault(vllm("http://127.0.0.1:18000"), journal=FaultJournal(tmp_path),
                              key="a"):
        assert WORLD["a"] == "broken"
    host.attrs = inspect_attrs(bindings={})  # recreated: it publishes nothing now
    with pytest.raises(FaultRefused, match="is not served"):
        await ContainerFault(vllm("http://127.0.0.1:18000"), journal=FaultJournal(tmp_path),
                             key="b").inject()
    assert host.inspected == 2 and "b" not in WORLD


async def test_faults_that_do_not_act_on_the_container_are_not_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
) -> None:
    host = use_host(monkeypatch, inspect_attrs(bindings={}))
    async with FakeFault(vllm("http://127.0.0.1:18001"), journal=FaultJournal(tmp_path)):
        assert WORLD["a"] == "broken"
    async with ContainerFault(node(), journal=FaultJournal(tmp_path), key="b"):  # no docker:
        assert WORLD["b"] == "broken"
    assert host.inspected == 0


def test_only_the_request_faults_send_requests_without_touching_the_container() -> None:
    request_faults = {kind for kind in FAULTS if not fault_class(kind).acts_on_container}
    assert request_faults == {"flood", "oversized_context"}


def test_an_engine_on_loopback_serves_its_published_loopback_port() -> None:
    """The testbed's second host: engine tcp://127.0.0.1:18100, its node published on
    0.0.0.0:18101 there and forwarded to this machine's 127.0.0.1:18101."""
    everywhere = inspect_attrs(
        bindings={"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "18101"}]})
    near = vllm("http://127.0.0.1:18101", "tcp://127.0.0.1:18100")
    assert check_base_url(near, everywhere).outcome == "served"
    assert check_base_url(vllm("http://127.0.0.1:18102", "tcp://127.0.0.1:18100"),
                          everywhere).outcome == "not_served"
