"""The simulated node's HTTP behaviour, in-process on loopback (fast settings)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from tests.unit.simnode_helpers import events_named, parse_sse, running_node

FAST = {"speed": 50.0}
CHAT = {"messages": [{"role": "user", "content": "Tell me about caches."}]}


async def test_chat_non_streaming_shape_usage_and_determinism(tmp_path: Path) -> None:
    async with running_node(tmp_path, **FAST) as n, httpx.AsyncClient(base_url=n.url) as c:
        body = {**CHAT, "model": "sim-model", "max_tokens": 7, "ignore_eos": True}
        r1 = await c.post("/v1/chat/completions", json=body)
        r2 = await c.post("/v1/chat/completions", json=body)
        assert r1.status_code == 200
        d = r1.json()
        assert d["object"] == "chat.completion"
        assert d["id"].startswith("chatcmpl-")
        choice = d["choices"][0]
        assert choice["finish_reason"] == "length"
        assert choice["message"]["role"] == "assistant"
        assert len(choice["message"]["content"].split()) == 7
        assert d["usage"]["completion_tokens"] == 7
        assert d["usage"]["total_tokens"] == d["usage"]["prompt_tokens"] + 7
        assert r2.json()["choices"][0]["message"]["content"] == choice["message"]["content"]
        models = (await c.get("/v1/models")).json()
        assert models["data"][0]["id"] == "sim-model"


async def test_natural_stop_without_ignore_eos(tmp_path: Path) -> None:
    async with running_node(tmp_path, **FAST) as n, httpx.AsyncClient(base_url=n.url) as c:
        r = await c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 1000})
        d = r.json()
        assert d["choices"][0]["finish_reason"] == "stop"
        assert 0 < d["usage"]["completion_tokens"] < 1000


@pytest.mark.parametrize("chat", [True, False])
async def test_streaming_frames_usage_and_done(tmp_path: Path, chat: bool) -> None:
    path = "/v1/chat/completions" if chat else "/v1/completions"
    payload = {**(CHAT if chat else {"prompt": "hello"}), "max_tokens": 12, "stream": True,
               "ignore_eos": True, "stream_options": {"include_usage": True}}
    async with running_node(tmp_path, **FAST) as n, httpx.AsyncClient(base_url=n.url) as c:
        r = await c.post(path, json=payload, headers={"X-Request-Id": "req-42"})
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["x-request-id"] == "req-42"
        frames = parse_sse(r.text)
        assert frames[-1] == "[DONE]"
        chunks = [json.loads(f) for f in frames[:-1]]
        usage_chunk = chunks[-1]
        assert usage_chunk["choices"] == []
        assert usage_chunk["usage"]["completion_tokens"] == 12
        content = [ch for ch in chunks[:-1]
                   if (ch["choices"][0].get("delta", {}).get("content")
                       if chat else ch["choices"][0]["text"])]
        assert len(content) == 12
        assert content[-1]["choices"][0]["finish_reason"] == "length"
        assert all(ch["choices"][0]["finish_reason"] is None for ch in content[:-1])
        if chat:
            assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        events = n.truth_events()
        assert events_named(events, "request_accepted", lambda e: e["id"] == "req-42")
        done = events_named(events, "request_finished", lambda e: e["id"] == "req-42")
        assert done
        assert done[0]["output_tokens"] == 12


async def test_stream_without_usage_option_has_no_usage_chunk(tmp_path: Path) -> None:
    async with running_node(tmp_path, **FAST) as n, httpx.AsyncClient(base_url=n.url) as c:
        r = await c.post("/v1/completions", json={"prompt": "x", "max_tokens": 3, "stream": True})
        frames = parse_sse(r.text)
        assert frames[-1] == "[DONE]"
        assert all("usage" not in json.loads(f) for f in frames[:-1])


async def test_over_context_400_vllm_body(tmp_path: Path) -> None:
    async with running_node(tmp_path, max_model_len=256, **FAST) as n, \
            httpx.AsyncClient(base_url=n.url) as c:
        r = await c.post("/v1/completions", json={"prompt": "word " * 200, "max_tokens": 100})
        assert r.status_code == 400
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["type"] == "BadRequestError"
        assert err["code"] == 400
        assert "maximum context length is 256 tokens" in err["message"]
        assert "200 input tokens" in err["message"]
        r = await c.post("/v1/completions", json={"prompt": "word " * 300})
        assert r.status_code == 400
        assert "maximum model length of 256" in r.json()["error"]["message"]
        r = await c.post("/v1/completions", json={"prompt": "x", "model": "nope"})
        assert r.status_code == 404
        assert r.json()["error"]["type"] == "NotFoundError"
        rejected = events_named(n.truth_events(), "rejected")
        assert [e["status"] for e in rejected] == [400, 400, 404]
        metrics = (await c.get("/metrics")).text
        assert 'http_requests_total{handler="/v1/completions",method="POST",status="4xx"} 3.0' \
            in metrics


async def test_over_context_400_sglang_legacy_body(tmp_path: Path) -> None:
    async with running_node(tmp_path, personality="sglang", max_model_len=256, **FAST) as n, \
            httpx.AsyncClient(base_url=n.url) as c:
        r = await c.post("/v1/chat/completions",
                         json={"messages": [{"role": "user", "content": "w " * 200}],
                               "max_tokens": 100})
        assert r.status_code == 400
        body = r.json()
        assert body["object"] == "error"
        assert body["code"] == 400
        assert body["type"] == "BadRequestError"
        assert "error" not in body
        assert "maximum context length of 256 tokens" in body["message"]
        r = await c.post("/v1/completions", json={"prompt": "w " * 300})
        assert "longer than the model's context length (256 tokens)" in r.json()["message"]


async def test_hang_stops_tokens_while_vllm_health_stays_200(tmp_path: Path) -> None:
    async with running_node(tmp_path, **FAST) as n, \
            httpx.AsyncClient(base_url=n.url, timeout=10) as c:
        assert (await c.post("/admin/hang")).status_code == 200
        task = asyncio.create_task(c.post("/v1/completions", json={"prompt": "x",
                                                                    "max_tokens": 5}))
        await asyncio.sleep(0.3)
        assert not task.done()  # no tokens while hung
        assert (await c.get("/health")).status_code == 200  # vLLM's /health cannot see it
        state = (await c.get("/admin/state")).json()
        assert state["hung"] is True
        assert state["waiting"] + state["running"] == 1
        await c.post("/admin/resume")
        r = await asyncio.wait_for(task, 5)
        assert r.json()["usage"]["completion_tokens"] >= 1
        r = await c.post("/admin/slow", params={"factor": "3"})
        assert r.json() == {"slow_factor": 3.0}
        assert n.node.engine is not None
        assert n.node.engine.slow_factor == 3.0
        assert (await c.post("/admin/slow", params={"factor": "-1"})).status_code == 400


async def test_sglang_health_fails_when_engine_hangs(tmp_path: Path) -> None:
    async with running_node(tmp_path, personality="sglang", health_check_timeout_s=0.2,
                            **FAST) as n, httpx.AsyncClient(base_url=n.url) as c:
        assert (await c.get("/health_generate")).status_code == 200
        await c.post("/admin/hang")
        assert (await c.get("/health")).status_code == 503
        await c.post("/admin/resume")
        assert (await c.get("/health")).status_code == 200


async def test_admin_is_off_by_default(tmp_path: Path) -> None:
    async with running_node(tmp_path, admin=False) as n, httpx.AsyncClient(base_url=n.url) as c:
        assert (await c.post("/admin/hang")).status_code == 404
        assert (await c.get("/version")).status_code == 200


async def test_kv_pressure_preempts_and_all_requests_complete(tmp_path: Path) -> None:
    # a pool of ~200 tokens: six 20+100-token requests cannot all stay resident
    kv = int(4.6 * (1 << 30) / 200)
    async with running_node(tmp_path, kv_bytes_per_token=kv, max_model_len=160,
                            zero_latency=True) as n, httpx.AsyncClient(base_url=n.url) as c:
        body = {"prompt": "word " * 20, "max_tokens": 100, "ignore_eos": True}
        rs = await asyncio.gather(*(c.post("/v1/completions", json=body) for _ in range(6)))
        assert all(r.json()["usage"]["completion_tokens"] == 100 for r in rs)
        text = (await c.get("/metrics")).text
        line = next(x for x in text.splitlines() if x.startswith("vllm:num_preemptions_total{"))
        assert float(line.split()[-1]) > 0


async def test_oom_in_process_error_frame_health_503_and_exit(tmp_path: Path) -> None:
    async with running_node(tmp_path, gpu_memory_utilization=0.99, enable_chunked_prefill=False,
                            max_model_len=4096, oom_exit_delay_s=0.3, **FAST) as n, \
            httpx.AsyncClient(base_url=n.url, timeout=10) as c:
        async def stream() -> str:
            r = await c.post("/v1/completions", json={"prompt": "short", "max_tokens": 2000,
                                                      "ignore_eos": True, "stream": True},
                             headers={"X-Request-Id": "victim"})
            return r.text

        victim = asyncio.create_task(stream())
        await asyncio.sleep(0.2)
        big = await c.post("/v1/completions", json={"prompt": "word " * 2500, "max_tokens": 5},
                           headers={"X-Request-Id": "big"})
        assert big.status_code == 500
        assert big.json()["error"]["code"] == 500
        frames = parse_sse(await victim)
        assert frames[-1] == "[DONE]"
        assert "error" in json.loads(frames[-2])
        assert (await c.get("/health")).status_code == 503
        await asyncio.sleep(0.5)
        assert n.exits == [1]
        events = n.truth_events()
        names = [e["event"] for e in events]
        assert names.index("oom") < names.index("dead")
        dropped = {e["id"] for e in events_named(events, "request_dropped")}
        assert dropped == {"victim", "big"}
        assert events_named(events, "dead")[0]["exit_code"] == 1


async def test_client_disconnect_drops_request_and_frees_kv(tmp_path: Path) -> None:
    async with running_node(tmp_path, **FAST) as n, \
            httpx.AsyncClient(base_url=n.url, timeout=10) as c:
        async with c.stream("POST", "/v1/completions",
                            json={"prompt": "x", "max_tokens": 3000, "ignore_eos": True,
                                  "stream": True}, headers={"X-Request-Id": "gone"}) as r:
            async for _ in r.aiter_bytes():
                break
        engine = n.node.engine
        assert engine is not None
        for _ in range(100):
            if events_named(n.truth_events(), "request_dropped"):
                break
            await asyncio.sleep(0.02)
        dropped = events_named(n.truth_events(), "request_dropped")
        assert [(e["id"], e["reason"]) for e in dropped] == [("gone", "client_disconnect")]
        assert engine.allocator.num_used == 0
        assert not engine.scheduler.has_work
