"""``faultkit pager`` (faultkit/pager.py, faultkit/commands/pager.py): pages stored, dated
and filtered by arrival, garbage refused, the log read back (a torn last line skipped), bad
``--listen`` refused before anything starts, and :func:`fetch_notifications` against the
real app on loopback."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from faultkit import pager as pager_module
from faultkit.cli import cli
from faultkit.errors import PagerUnavailable
from faultkit.pager import Notification, PagerLog, fetch_notifications, make_app, parse_listen
from tests.paths import REPO


def webhook(alertname: str = "FaultkitNodeDown", node: str = "n1",
            status: str = "firing") -> dict[str, Any]:
    """A body as Alertmanager 0.25 sends it (version 4)."""
    return {
        "receiver": "faultkit-pager", "status": status, "version": "4",
        "groupKey": f'{{}}:{{alertname="{alertname}", node="{node}"}}',
        "truncatedAlerts": 0,
        "groupLabels": {"alertname": alertname, "node": node},
        "commonLabels": {"alertname": alertname, "node": node, "severity": "page"},
        "commonAnnotations": {}, "externalURL": "http://127.0.0.1:9093",
        "alerts": [{
            "status": status, "labels": {"alertname": alertname, "node": node, "job": node},
            "annotations": {"summary": "down"}, "startsAt": "2026-01-01T00:00:00Z",
            "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": "abc",
        }],
    }


class Clock:
    """A settable clock: the ``t_received`` the app stamps next."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[tuple[TestClient[Any, Any], PagerLog, Clock]]:
    log = PagerLog(tmp_path / "pages.jsonl")
    clock = Clock()
    async with TestClient(TestServer(make_app(log, clock=clock))) as test_client:
        yield test_client, log, clock
    log.close()


async def test_pages_are_dated_at_arrival_logged_and_filtered_by_time(
        client: tuple[TestClient[Any, Any], PagerLog, Clock], tmp_path: Path) -> None:
    http, log, clock = client
    for t, node in ((1000.0, "a"), (1010.0, "b"), (1020.0, "c")):
        clock.t = t
        response = await http.post("/alerts", json=webhook(node=node))
        assert response.status == 200
        assert await response.json() == {}
    every = await (await http.get("/notifications")).json()
    assert [(n["t_received"], n["payload"]["groupLabels"]["node"]) for n in every] == [
        (1000.0, "a"), (1010.0, "b"), (1020.0, "c")]
    assert every[0]["payload"] == webhook(node="a")  # the body as sent
    # both bounds inclusive
    middle = await (await http.get("/notifications", params={"since": "1010",
                                                             "until": "1020"})).json()
    assert [n["t_received"] for n in middle] == [1010.0, 1020.0]
    after = await (await http.get("/notifications", params={"since": "1010.5"})).json()
    assert [n["t_received"] for n in after] == [1020.0]
    before = await (await http.get("/notifications", params={"until": "1009.9"})).json()
    assert [n["t_received"] for n in before] == [1000.0]
    lines = (tmp_path / "pages.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == every
    assert len(log) == 3


async def test_oldest_first_even_when_the_clock_stepped_back(
        client: tuple[TestClient[Any, Any], PagerLog, Clock]) -> None:
    http, _, clock = client
    for t in (1005.0, 1001.0):
        clock.t = t
        assert (await http.post("/alerts", json=webhook())).status == 200
    got = await (await http.get("/notifications")).json()
    assert [n["t_received"] for n in got] == [1001.0, 1005.0]


@pytest.mark.parametrize(("body", "reason"), [
    (b"not json", "body is not JSON"),
    (b"[1, 2]", "body is JSON list, not Alertmanager's webhook object"),
    (b'"firing"', "body is JSON str"),
    (b"", "body is not JSON"),
])
async def test_garbage_is_refused_with_one_line_and_nothing_kept(
        client: tuple[TestClient[Any, Any], PagerLog, Clock], tmp_path: Path,
        body: bytes, reason: str) -> None:
    http, log, _ = client
    response = await http.post("/alerts", data=body,
                               headers={"Content-Type": "application/json"})
    assert response.status == 400
    text = await response.text()
    assert text.startswith(reason) and text.count("\n") == 1
    assert len(log) == 0
    assert await (await http.get("/notifications")).json() == []
    assert (tmp_path / "pages.jsonl").read_bytes() == b""


@pytest.mark.parametrize("value", ["abc", "nan", "inf"])
async def test_a_bad_time_bound_is_a_400(
        client: tuple[TestClient[Any, Any], PagerLog, Clock], value: str) -> None:
    http, _, _ = client
    response = await http.get("/notifications", params={"since": value})
    assert response.status == 400
    assert f"since={value}: must be epoch seconds" in await response.text()


async def test_ready(client: tuple[TestClient[Any, Any], PagerLog, Clock]) -> None:
    http, _, _ = client
    assert (await http.get("/-/ready")).status == 200


async def test_a_page_that_cannot_be_logged_is_a_500_and_not_kept(
        client: tuple[TestClient[Any, Any], PagerLog, Clock],
        monkeypatch: pytest.MonkeyPatch) -> None:
    http, log, _ = client

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    response = await http.post("/alerts", json=webhook())
    assert response.status == 500  # Alertmanager retries a 5xx: the page is not lost
    assert "cannot log the page" in await response.text()
    assert len(log) == 0


def test_the_log_is_read_back_and_a_torn_last_line_skipped(tmp_path: Path) -> None:
    path = tmp_path / "pages.jsonl"
    whole = [Notification(1000.0 + i, webhook(node=f"n{i}")) for i in range(2)]
    text = "".join(json.dumps(n.to_json()) + "\n" for n in whole)
    path.write_text(text + '{"t_received": 1002.0, "payl')  # a crash mid-line
    log = PagerLog(path)
    assert log.between() == whole
    assert log.skipped == 1
    log.append(Notification(1003.0, webhook(node="n3")))
    log.close()
    # the next page started a line of its own: nothing after the tear is lost
    again = PagerLog(path)
    assert [n.t_received for n in again.between()] == [1000.0, 1001.0, 1003.0]
    assert again.skipped == 1
    again.close()


def test_a_missing_log_starts_empty_and_is_created(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    log = PagerLog(path)
    assert len(log) == 0 and path.exists()
    log.append(Notification(5.0, {"status": "resolved"}))
    log.close()
    assert path.read_text() == '{"t_received":5.0,"payload":{"status":"resolved"}}\n'


@settings(max_examples=60, deadline=None)
@given(count=st.integers(1, 5), cut=st.floats(0.0, 1.0))
def test_a_log_cut_anywhere_reads_back_a_prefix_and_keeps_what_follows(count: int,
                                                                         cut: float) -> None:
    pages = [Notification(float(i), webhook(node=f"n{i}")) for i in range(count)]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "pages.jsonl"
        log = PagerLog(path)
        for page in pages:
            log.append(page)
        log.close()
        data = path.read_bytes()
        path.write_bytes(data[:int(len(data) * cut)])
        reread = PagerLog(path)
        kept = reread.between()
        assert kept == pages[:len(kept)]
        reread.append(Notification(99.0, {"status": "firing"}))
        reread.close()
        final = PagerLog(path)
        assert final.between() == [*kept, Notification(99.0, {"status": "firing"})]
        final.close()


def test_notification_lists_its_alerts_and_summarises_them() -> None:
    page = Notification(1.0, {**webhook(node="b"), "alerts": [
        *webhook(node="b")["alerts"], *webhook("FaultkitNodeRestarted", node="a")["alerts"],
        "not an alert"]})
    assert [a["labels"]["node"] for a in page.alerts] == ["b", "a"]
    assert page.label_values("alertname") == ["FaultkitNodeDown", "FaultkitNodeRestarted"]
    assert page.summary() == ("receiver=faultkit-pager status=firing "
                              "alerts=FaultkitNodeDown, FaultkitNodeRestarted nodes=a, b")
    assert Notification(1.0, {}).alerts == []


@pytest.mark.parametrize("data", [
    [], {"t_received": "1", "payload": {}}, {"t_received": True, "payload": {}},
    {"t_received": float("nan"), "payload": {}}, {"t_received": 1.0, "payload": []},
])
def test_a_notification_that_is_not_one_is_a_value_error(data: object) -> None:
    with pytest.raises(ValueError, match=r"notification is a JSON object|t_received|payload"):
        Notification.from_json(data)


# --listen -----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:9094", ("127.0.0.1", 9094)),
    ("localhost:0", ("localhost", 0)),
    ("[::1]:9094", ("::1", 9094)),
    ("127.0.0.2:1", ("127.0.0.2", 1)),
])
def test_listen_accepts_loopback(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


def test_listen_beyond_loopback_needs_allow_remote() -> None:
    with pytest.raises(ValueError, match="not a loopback address; pass --allow-remote"):
        parse_listen("0.0.0.0:9094")
    assert parse_listen("0.0.0.0:9094", allow_remote=True) == ("0.0.0.0", 9094)
    assert parse_listen("pager.example:80", allow_remote=True) == ("pager.example", 80)


@pytest.mark.parametrize(("listen", "reason"), [
    ("9094", "expected HOST:PORT, such as 127.0.0.1:9094"),
    (":9094", "expected HOST:PORT"),
    ("127.0.0.1:", "port '' must be a number from 0 to 65535"),
    ("127.0.0.1:http", "port 'http' must be a number from 0 to 65535"),
    ("127.0.0.1:65536", "port '65536' must be a number from 0 to 65535"),
    ("10.0.0.1:9094", "10.0.0.1 is not a loopback address; pass --allow-remote"),
    ("example.com:9094", "example.com is not a loopback address"),
])
def test_the_command_refuses_a_bad_listen_with_one_line_and_exit_2(
        listen: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[object] = []
    monkeypatch.setattr("faultkit.commands.pager.serve", lambda *a: started.append(a))
    log = tmp_path / "pages.jsonl"
    result = CliRunner().invoke(cli, ["pager", "--listen", listen, "--log", str(log)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: --listen {listen}: {reason}")
    assert started == [] and not log.exists()  # nothing started, nothing created


def test_a_log_that_cannot_be_opened_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["pager", "--listen", "127.0.0.1:0",
                                      "--log", str(tmp_path / "no-such-dir" / "p.jsonl")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"Error: --log {tmp_path / 'no-such-dir' / 'p.jsonl'}: cannot open it: "
        "No such file or directory"]


def test_an_address_in_use_exits_1_with_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        result = CliRunner().invoke(cli, ["pager", "--listen", f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: cannot listen on 127.0.0.1:{port}: Address already in use; choose another "
        "--listen port or stop what holds it"]


@pytest.fixture
def pager_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``faultkit pager`` as a user starts it, on a free loopback port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultkit.cli", "pager", "--listen", "127.0.0.1:0",
         "--log", str(tmp_path / "pages.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout is not None
        yield proc, proc.stdout.readline()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def test_the_command_serves_until_sigterm(
        pager_process: tuple[subprocess.Popen[str], str], tmp_path: Path) -> None:
    proc, line = pager_process
    assert line.startswith("pager listening on http://127.0.0.1:")
    assert line.rstrip().endswith(f"(log: {tmp_path / 'pages.jsonl'})")
    url = line.split()[3]
    import httpx

    assert httpx.post(f"{url}/alerts", json=webhook(node="x"), timeout=5).status_code == 200
    got = fetch_notifications(url, 0.0, 4e9)
    assert [n.label_values("node") for n in got] == [["x"]]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert proc.stderr is not None
    err = proc.stderr.read().splitlines()
    assert len(err) == 1 and err[0].endswith(
        "page: receiver=faultkit-pager status=firing alerts=FaultkitNodeDown nodes=x")


# fetch_notifications ------------------------------------------------------------------

async def test_fetch_notifications_from_the_real_app(tmp_path: Path) -> None:
    clock = Clock()
    log = PagerLog(tmp_path / "pages.jsonl")
    runner, port = await pager_module.serve(make_app(log, clock=clock), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        async with httpx.AsyncClient() as http:
            for t in (100.0, 200.0, 300.0):
                clock.t = t
                response = await http.post(f"{url}/alerts", json=webhook(node=f"n{t:.0f}"))
                assert response.status_code == 200
        got = await asyncio.to_thread(fetch_notifications, url + "/", 150.0, 300.0)
        assert [(n.t_received, n.label_values("node")) for n in got] == [
            (200.0, ["n200"]), (300.0, ["n300"])]
        assert got[0].payload == webhook(node="n200")
        assert got[0].alerts[0]["labels"]["alertname"] == "FaultkitNodeDown"
    finally:
        await runner.cleanup()
        log.close()


async def test_fetch_notifications_from_nothing_is_pager_unavailable() -> None:
    runner, port = await pager_module.serve(web.Application(), "127.0.0.1", 0)
    await runner.cleanup()  # the port is free again: connections are refused
    with pytest.raises(PagerUnavailable, match=r"faultkit pager at http://127\.0\.0\.1:\d+: "
                       r"ConnectError.*Check that `faultkit pager` runs there") as caught:
        await asyncio.to_thread(fetch_notifications, f"http://127.0.0.1:{port}", 0.0, 1.0)
    assert caught.value.url == f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(("status", "body", "reason"), [
    (200, '{"not": "a list"}', "not a list of notifications (a JSON dict, not a list)"),
    (200, "<html>", "not a list of notifications"),
    (200, '[{"t_received": "x", "payload": {}}]', "t_received must be a finite number"),
    (404, "404: Not Found", "HTTP 404: 404: Not Found"),
])
async def test_fetch_notifications_from_garbage_is_pager_unavailable(
        status: int, body: str, reason: str) -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(status=status, text=body)

    app = web.Application()
    app.router.add_get("/notifications", answer)
    runner, port = await pager_module.serve(app, "127.0.0.1", 0)
    try:
        with pytest.raises(PagerUnavailable) as caught:
            await asyncio.to_thread(fetch_notifications, f"http://127.0.0.1:{port}", 0.0, 1.0)
        assert reason in caught.value.reason
    finally:
        await runner.cleanup()
