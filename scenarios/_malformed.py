"""The bad_input scenario's malformed requests: drawn by hypothesis, sent in a process of
their own.

Why a process of its own: hypothesis' drawing is CPU-bound Python, and in the scenario's
process it competes for the GIL with the load generator's event loop. Every time the loop
gives the GIL up (each socket read), it waits up to a switch interval to get it back, so
the load falls behind its schedule. Measured on the testbed beside the vLLM lane: requests
sent up to 1.97 s after their arrival while the drawing ran in a thread, and one connect
"timed out" after 2 s, where a loopback handshake takes microseconds: the client, not the
node, was late, and a run read it as a lost request. In a child process the
drawing no longer competes with the load's loop for the GIL.

``python -m scenarios._malformed BASE_URL MODEL`` prints the answers as JSON lines
``[body (first 200 bytes), status or exception name]``; :func:`send_malformed_apart` runs it
and reads them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

__all__ = ["malformed_request", "send_malformed", "send_malformed_apart"]

Answer = tuple[str, int | str]
#: the directory that holds the ``scenarios`` package (the child imports it from there)
_ROOT = Path(__file__).resolve().parents[1]


#: strings a lenient validator turns into a valid value: pydantic's lax mode (vLLM, SGLang)
#: reads "5" as 5 and "yes" as True. An engine that accepts them answers a *valid* request,
#: so they are never drawn: which values are malformed must not depend on the random draw.
_BOOL_WORDS = frozenset({"0", "1", "f", "t", "n", "y", "no", "yes", "on", "off", "true", "false"})


def _coercible(text: str) -> bool:
    """Whether a lax validator would accept ``text`` as a number or a boolean."""
    if text.strip().lower() in _BOOL_WORDS:
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


_text = st.text(max_size=20).filter(lambda s: not _coercible(s))
#: JSON values that are not numbers, booleans or null, nor strings that read as one:
#: wrong for every numeric field.
_not_number = st.one_of(
    _text,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
#: Per field: values the OpenAI API defines as invalid (null is valid for most, so never used).
_invalid = {
    "max_tokens": st.one_of(_not_number, st.integers(-(10**6), -1)),
    "temperature": st.one_of(_not_number, st.floats(-100, -0.01)),
    "n": st.one_of(_not_number, st.integers(-5, 0)),
    "stream": st.one_of(
        st.text(max_size=5).filter(lambda s: not _coercible(s)),
        st.integers(2, 9),
        st.lists(st.booleans(), max_size=2),
    ),
    "messages": st.one_of(
        st.text(max_size=10),
        st.integers(),
        st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    ),
}


@st.composite
def malformed_request(draw: st.DrawFn, model: str) -> tuple[str, bytes]:
    """(path, body) of a request the OpenAI API defines as invalid."""
    good: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
    }
    kind = draw(
        st.sampled_from(["not_json", "wrong_type", "missing", "bad_messages", "completion"])
    )
    if kind == "not_json":
        return "/v1/chat/completions", draw(st.sampled_from([b"{", b"[1,2", b"\xff\xfe", b"nul"]))
    if kind == "wrong_type":
        field = draw(st.sampled_from(sorted(_invalid)))
        return "/v1/chat/completions", json.dumps({**good, field: draw(_invalid[field])}).encode()
    if kind == "missing":
        return "/v1/chat/completions", json.dumps({"model": model, "max_tokens": 4}).encode()
    if kind == "bad_messages":
        messages = draw(
            st.sampled_from(
                [[{"content": "x"}], ["hi"], [None], [7], [{"role": "user", "content": "x"}, "hi"]]
            )
        )
        return "/v1/chat/completions", json.dumps({**good, "messages": messages}).encode()
    prompt = draw(
        st.one_of(
            st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
            st.booleans(),
            st.floats(allow_nan=False),
        )
    )
    return "/v1/completions", json.dumps(
        {"model": model, "prompt": prompt, "max_tokens": 4}
    ).encode()


def send_malformed(base_url: str, model: str) -> list[Answer]:
    """Send the 40 malformed requests (the same ones every run); (body, status) of each."""
    answers: list[Answer] = []

    # derandomize: the same 40 requests every run, so a verdict never depends on the draw
    @settings(
        max_examples=40,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(request=malformed_request(model))
    def probe(request: tuple[str, bytes]) -> None:
        path, body = request
        try:
            status: int | str = client.post(
                base_url + path,
                content=body,
                headers={"Content-Type": "application/json"},
            ).status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        answers.append((body[:200].decode(errors="replace"), status))

    # One client, a new connection per request (no keep-alive): a malformed request never
    # shares a connection with the next one. ``httpx.post`` would build a client, and with
    # it an SSL context (the CA bundle parsed), per request: 40 of them took 35 s with the
    # five catalogue lanes starting together, against 1.2 s alone (docs/ci.md).
    with httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        probe()
    return answers


async def send_malformed_apart(base_url: str, model: str) -> list[Answer]:
    """:func:`send_malformed` in a child process (module docstring); killed if cancelled."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scenarios._malformed", base_url, model,
        cwd=_ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        proc.kill()
        await proc.wait()
        raise
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(
            f"the malformed-request sender exited {proc.returncode}: " + " | ".join(tail)
        )
    answers: list[Answer] = []
    for line in out.decode().splitlines():
        body, status = json.loads(line)
        answers.append((str(body), status))
    return answers


def _main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m scenarios._malformed BASE_URL MODEL", file=sys.stderr)
        return 2
    for answer in send_malformed(argv[0], argv[1]):
        print(json.dumps(list(answer)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
