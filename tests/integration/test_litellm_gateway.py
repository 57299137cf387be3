"""A real LiteLLM proxy over two fake upstreams on loopback: routing evidence, and one
upstream SIGKILLed under streaming load. No Docker.

The module runs one experiment (``run``) and the tests read it:

1. the cached LiteLLM venv (:func:`testbed.litellm_node.ensure_litellm_env`; ~2 min the
   first time, from PyPI), two ``faultkit.load.fakeserver`` processes, each behind a
   counting :class:`~tests.integration.gateway_support.Tap`, and the proxy with
   :func:`testbed.gateway_config.litellm_config` (one alias on both upstreams,
   :data:`POLICY`), all on free 127.0.0.1 ports;
2. :data:`WORKERS` closed-loop clients stream short chat completions through the proxy,
   each request naming itself in its prompt (``faultkit-req-<n>``);
3. after :data:`BEFORE_KILL_S`, once :data:`SERVED_BEFORE_KILL` answers came, upstream
   ``up-a`` is SIGKILLed; load goes on for
   :data:`AFTER_KILL_S` (more than two cooldowns).

What a request reached is taken from the taps (what the upstreams were sent), never from
LiteLLM; LiteLLM's own headers are checked *against* the taps. A request is good when
faultkit's stream parser calls it ok (``[DONE]``, no error frame).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from faultkit.load.sse import parse_stream
from slo.profiles import PROFILES
from testbed.gateway_config import GatewaySpec, RouterPolicy, Upstream, litellm_config, render_yaml
from testbed.litellm_node import ensure_litellm_env
from tests.integration.gateway_support import (
    Attempt,
    FakeUpstream,
    LocalProxy,
    Tap,
    marker,
)

pytestmark = pytest.mark.litellm

POLICY = RouterPolicy(num_retries=2, allowed_fails=1, cooldown_s=4.0, timeout_s=10.0)
#: fakeserver mode: 10 content chunks 30 ms apart, so streams are in flight at the kill
MODEL, TOKENS = "slow,delay=0.03", 10
WORKERS = 4
BEFORE_KILL_S = 3.0
#: answers served before the kill (test_the_headers_name_the_upstream_the_taps_saw needs 4),
#: waited for up to WARMUP_DEADLINE_S after BEFORE_KILL_S
SERVED_BEFORE_KILL = 6
WARMUP_DEADLINE_S = 30.0
AFTER_KILL_S = 2.5 * POLICY.cooldown_s + 1.0
#: attempts on the dead upstream closer together than this belong to one burst
BURST_GAP_S = 1.0
#: timing slack for a loaded 2-core machine
SLACK_S = 0.5
NAMES = ("up-a", "up-b")  # up-a is killed


@dataclass(frozen=True)
class Record:
    """One client request through the gateway (times: epoch seconds)."""

    n: int
    t_start: float
    t_end: float
    status: int | None
    model_id: str | None
    api_base: str | None
    retries: int | None
    ok: bool
    error: str | None


@dataclass
class Run:
    records: list[Record]
    taps: dict[str, Tap]
    kill_t: float
    ready_s: float
    metrics: str
    metrics_status: int

    def attempts(self, n: int) -> list[tuple[str, Attempt]]:
        """Every attempt the taps saw for request ``n``, in time order."""
        found = [
            (name, a) for name, tap in self.taps.items() for a in tap.attempts if a.request == n
        ]
        return sorted(found, key=lambda item: item[1].t)

    def dead_attempts_after_kill(self) -> list[float]:
        return sorted(a.t for a in self.taps["up-a"].attempts if a.t >= self.kill_t)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _one(client: httpx.AsyncClient, proxy: LocalProxy, n: int) -> Record:
    body = {
        "model": "chat",
        "messages": [{"role": "user", "content": f"{marker(n)} say something"}],
        "max_tokens": TOKENS,
        "stream": True,
    }
    t_start = time.time()
    status = model_id = api_base = retries = None
    raw = b""
    error: str | None = None
    try:
        async with client.stream(
            "POST", f"{proxy.base_url}/v1/chat/completions", json=body,
            headers={"Authorization": f"Bearer {proxy.key}"},
        ) as resp:  # fmt: skip
            status = resp.status_code
            model_id = resp.headers.get("x-litellm-model-id")
            api_base = resp.headers.get("x-litellm-model-api-base")
            header = resp.headers.get("x-litellm-attempted-retries")
            retries = int(header) if header is not None else None
            async for chunk in resp.aiter_bytes():
                raw += chunk
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    outcome = parse_stream([raw])
    ok = error is None and status == 200 and outcome.ok
    if not ok and error is None:
        error = f"HTTP {status}, {outcome.error_class}: {raw[-300:].decode(errors='replace')}"
    return Record(n, t_start, time.time(), status, model_id, api_base, retries, ok, error)


async def _experiment(venv: Path, workdir: Path) -> Run:
    upstreams = {name: FakeUpstream.start() for name in NAMES}
    taps = {name: Tap(up.port) for name, up in upstreams.items()}
    proxy: LocalProxy | None = None
    try:
        for tap in taps.values():
            await tap.start()
        spec = GatewaySpec(
            alias="chat",
            upstreams=tuple(
                Upstream(name, f"http://127.0.0.1:{taps[name].port}", MODEL) for name in NAMES
            ),
            policy=POLICY,
        )
        config = workdir / "config.yaml"
        config.write_text(render_yaml(litellm_config(spec)))
        proxy = LocalProxy.start(
            venv, config, _free_port(), "sk-" + secrets.token_hex(24), workdir / "proxy.log"
        )
        ready_s = await proxy.wait_ready(timeout_s=90)
        records: list[Record] = []
        counter = iter(range(1, 1_000_000))
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as client:
            stop, warm = asyncio.Event(), asyncio.Event()

            async def worker() -> None:
                while not stop.is_set():
                    records.append(await _one(client, proxy, next(counter)))
                    if sum(1 for r in records if r.ok) >= SERVED_BEFORE_KILL:
                        warm.set()

            async def killer() -> float:
                # at least BEFORE_KILL_S of traffic *and* SERVED_BEFORE_KILL answers: the
                # proxy's first requests are slow (its warm-up: seconds each, so a fixed
                # wait could leave too few served before the kill)
                await asyncio.sleep(BEFORE_KILL_S)
                with contextlib.suppress(TimeoutError):  # then the tests say too little came
                    await asyncio.wait_for(warm.wait(), WARMUP_DEADLINE_S)
                t_kill = upstreams["up-a"].kill()
                await asyncio.sleep(AFTER_KILL_S)
                stop.set()
                return t_kill

            kill = asyncio.create_task(killer())
            await asyncio.gather(*(worker() for _ in range(WORKERS)))
            kill_t = await kill
            scrape = await client.get(f"{proxy.base_url}/metrics/")  # no key: metrics_public
        return Run(records, taps, kill_t, ready_s, scrape.text, scrape.status_code)
    finally:
        if proxy is not None:
            proxy.stop()
        for up in upstreams.values():
            up.stop()
        for tap in taps.values():
            await tap.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    venv = ensure_litellm_env(print)
    result = asyncio.run(_experiment(venv, tmp_path_factory.mktemp("litellm")))
    _report(result)
    return result


def _report(run: Run) -> None:
    """What the experiment found, for the log (docs/gateway.md quotes such runs)."""
    lost = [r for r in run.records if not r.ok]
    print(f"\nproxy ready in {run.ready_s:.1f} s; {len(run.records)} requests, {len(lost)} lost")
    print(
        f"attempts on the dead upstream after the kill (s): "
        f"{[round(t - run.kill_t, 2) for t in run.dead_attempts_after_kill()]}"
    )
    for r in lost:
        where = [(name, round(a.t - run.kill_t, 2), a.refused) for name, a in run.attempts(r.n)]
        print(f"lost #{r.n} at {r.t_start - run.kill_t:+.2f} s: {where} {r.error}"[:400])
    retried = [(r.n, r.retries) for r in run.records if r.retries]
    print(f"retried (request, x-litellm-attempted-retries): {retried}")
    for line in run.metrics.splitlines():
        if (line.startswith(_REPORTED) and 'model_id="up-a"' in line) or line.startswith(
            "litellm_proxy_failed_requests_metric_total"
        ):
            print(line if len(line) < 300 else line[:120] + " … " + line[-160:])


_REPORTED = (
    "litellm_deployment_state",
    "litellm_deployment_cooled_down_total",
    "litellm_deployment_failure_responses_total",
    "litellm_deployment_total_requests_total",
)


def _bursts(times: list[float]) -> list[list[float]]:
    bursts: list[list[float]] = []
    for t in times:
        if bursts and t - bursts[-1][-1] < BURST_GAP_S:
            bursts[-1].append(t)
        else:
            bursts.append([t])
    return bursts


def test_the_headers_name_the_upstream_the_taps_saw(run: Run) -> None:
    served = [r for r in run.records if r.ok and r.t_end < run.kill_t]
    assert len(served) >= 4, f"too little traffic before the kill: {len(served)} requests"
    for r in served:
        assert r.model_id in NAMES, r
        assert r.api_base == f"http://127.0.0.1:{run.taps[r.model_id].port}/v1", r
        assert r.retries == 0, r
        assert [name for name, _ in run.attempts(r.n)] == [r.model_id], (
            f"request {r.n}: LiteLLM says {r.model_id}, the taps saw {run.attempts(r.n)}"
        )
    assert {r.model_id for r in served} == set(NAMES), "simple-shuffle used one upstream only"


def test_retry_header_counts_the_attempts_the_taps_saw(run: Run) -> None:
    after = [r for r in run.records if r.ok and r.t_start > run.kill_t]
    assert after, "no request succeeded after the kill"
    for r in after:
        attempts = run.attempts(r.n)
        assert r.model_id == "up-b", r
        assert r.retries == len(attempts) - 1, (r, attempts)
        assert attempts[-1][0] == "up-b", attempts
        assert all(name == "up-a" for name, _ in attempts[:-1]), attempts
    assert any(r.retries for r in after), "no request was retried: the kill was not seen"


def test_no_request_reaches_the_dead_upstream_while_it_is_cooled_down(run: Run) -> None:
    bursts = _bursts(run.dead_attempts_after_kill())
    assert bursts, "the router never tried the dead upstream after the kill"
    for before, after in itertools.pairwise(bursts):
        quiet = after[0] - before[-1]
        assert quiet >= POLICY.cooldown_s - SLACK_S, (
            f"the dead upstream got a request {quiet:.2f} s after the burst that cooled it down "
            f"(cooldown {POLICY.cooldown_s} s); bursts: {bursts}"
        )
    # while it is cooled down the survivor serves everything at the first attempt
    first_end = bursts[0][-1]
    quiet_until = bursts[1][0] if len(bursts) > 1 else first_end + POLICY.cooldown_s
    inside = [r for r in run.records if first_end + 0.1 < r.t_start and r.t_end < quiet_until]
    assert inside, "no request fell inside the cooldown window"
    assert all(r.ok and [n for n, _ in run.attempts(r.n)] == ["up-b"] for r in inside), inside


def test_the_dead_upstream_is_tried_again_after_each_cooldown(run: Run) -> None:
    bursts = _bursts(run.dead_attempts_after_kill())
    assert len(bursts) >= 2, f"no second burst within {AFTER_KILL_S} s of the kill: {bursts}"
    for before, after in itertools.pairwise(bursts):
        assert after[0] - before[-1] <= POLICY.cooldown_s + 3.0, bursts


def test_losses_are_what_the_retry_config_implies(run: Run) -> None:
    """A lost request either was streaming from up-a when it died (a started stream is
    never retried), or used all ``num_retries + 1`` attempts, every one on the dead
    upstream; none is lost after reaching the survivor."""
    lost = [r for r in run.records if not r.ok]
    in_flight = 0
    for r in lost:
        attempts = run.attempts(r.n)
        names = [name for name, _ in attempts]
        assert "up-b" not in names, f"request {r.n} was lost after reaching the survivor: {r}"
        if len(attempts) == 1 and attempts[0][1].t < run.kill_t:
            in_flight += 1  # on up-a when it was killed
        else:
            assert len(attempts) == POLICY.num_retries + 1, (
                f"request {r.n} was lost after {len(attempts)} attempts, not "
                f"{POLICY.num_retries + 1}: {attempts} {r.error}"
            )
    assert in_flight <= WORKERS
    assert all(r.ok for r in run.records if r.t_end < run.kill_t), "a loss before the kill"


def test_metrics_serve_the_profile_without_a_key(run: Run) -> None:
    """Every metric the profile names is declared on /metrics/ (a counter's series appear
    only once it has counted: the failure counter is absent from a run that lost nothing)."""
    assert run.metrics_status == 200
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", run.metrics, re.MULTILINE))
    profile = PROFILES["litellm"]
    for metric in (profile.requests_total, profile.errors_total, profile.prompt_tokens,
                   profile.generation_tokens, profile.reset_counter):  # fmt: skip
        assert metric is not None and types.get(metric.name) == "counter", metric
    for gauge in (profile.running, profile.process_start):
        assert gauge is not None and types.get(gauge.name) == "gauge", gauge
    for hist in (profile.ttft_hist, profile.e2e_hist):
        assert hist is not None and types.get(hist) == "histogram", hist
    failed_up_a = [line for line in run.metrics.splitlines()
                   if line.startswith("litellm_deployment_failure_responses_total")
                   and 'model_id="up-a"' in line]  # fmt: skip
    assert failed_up_a, "no per-deployment failure counter for the dead upstream"
