"""The bad_input scenario's requests are malformed even for a lenient server.

vLLM and SGLang validate requests with pydantic in its lax mode, which turns ``"5"`` into 5
and ``"yes"`` into True. A request the scenario calls malformed must fail that validation
too, or an engine that answers it 200 is judged on the luck of the draw (CI saw one such
request on the vLLM node). The check is pydantic's own, independent of the scenario's filter.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scenarios._malformed import malformed_request


class Message(BaseModel):
    role: str
    content: str


class ChatRequest(BaseModel):
    """The fields the scenario breaks, with the OpenAI API's constraints, in lax mode."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    n: int | None = Field(default=None, ge=1)
    stream: bool | None = None


class CompletionRequest(BaseModel):
    model: str
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(default=None, ge=1)


def _valid_for_a_lenient_server(path: str, body: bytes) -> bool:
    try:
        data: Any = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    model = ChatRequest if path.endswith("/chat/completions") else CompletionRequest
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(request=malformed_request("m"))
def test_every_malformed_request_fails_lax_validation(request: tuple[str, bytes]) -> None:
    path, body = request
    assert not _valid_for_a_lenient_server(path, body), body


@pytest.mark.parametrize("value", ["5", " 7 ", "1e3", "inf", "yes", "On", "0"])
def test_coercible_strings_are_valid_for_a_lenient_server(value: str) -> None:
    """The premise: such strings do pass lax validation, so drawing them would be wrong."""
    field = "stream" if value.strip().lower() in ("yes", "on", "0") else "temperature"
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                       field: value}).encode()
    assert _valid_for_a_lenient_server("/v1/chat/completions", body)
