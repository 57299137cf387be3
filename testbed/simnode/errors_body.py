"""Error bodies and over-context messages exactly as vLLM and SGLang send them.

vLLM: ``{"error": {"message", "type", "param", "code"}}``. SGLang (legacy shape):
``{"object": "error", "message", "type", "param", "code"}``. See ../shared/ENGINES.md §2.7.
"""

from __future__ import annotations

from aiohttp import web


def error_body(personality: str, status: int, message: str, etype: str,
               param: str | None = None) -> dict[str, object]:
    inner: dict[str, object] = {"message": message, "type": etype, "param": param,
                                "code": status}
    if personality == "sglang":
        return {"object": "error", **inner}
    return {"error": inner}


def error_response(personality: str, status: int, message: str, etype: str,
                   param: str | None, request_id: str) -> web.Response:
    return web.json_response(error_body(personality, status, message, etype, param),
                             status=status, headers={"X-Request-Id": request_id})


def over_context_message(personality: str, prompt_tokens: int, max_tokens: int | None,
                         max_model_len: int) -> str | None:
    """The engine's 400 message when prompt (+ max_tokens) does not fit, else ``None``."""
    if personality == "sglang":
        if prompt_tokens >= max_model_len:
            return (f"The input ({prompt_tokens} tokens) is longer than the model's context "
                    f"length ({max_model_len} tokens).")
        if max_tokens is not None and prompt_tokens + max_tokens >= max_model_len:
            return (f"Requested token count exceeds the model's maximum context length of "
                    f"{max_model_len} tokens. You requested a total of "
                    f"{prompt_tokens + max_tokens} tokens: {prompt_tokens} tokens from the "
                    f"input messages and {max_tokens} tokens for the completion. Please reduce "
                    "the number of tokens in the input messages or the completion to fit "
                    "within the limit.")
        return None
    if prompt_tokens >= max_model_len:
        return (f"The decoder prompt (length {prompt_tokens}) is longer than the maximum model "
                f"length of {max_model_len}. Make sure that `max_model_len` is no smaller than "
                "the number of text tokens.")
    if max_tokens is not None and prompt_tokens + max_tokens > max_model_len:
        return (f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This "
                f"model's maximum context length is {max_model_len} tokens and your request "
                f"has {prompt_tokens} input tokens ({max_tokens} > {max_model_len} - "
                f"{prompt_tokens}).")
    return None
