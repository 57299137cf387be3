"""Request bodies of a load profile: the JSON each request sends, built once per run.

Request number ``index`` carries the deterministic prompt of its workload class
(:meth:`RequestBodies.workload`), ``workload_prompt(workload, input_tokens, seed, index)``;
everything around the prompt is the same for every request, so it is encoded once
(:meth:`RequestBodies.template`) and a request costs its prompt and one escape of it — byte
for byte what ``json.dumps(body, separators=(",", ":"))`` gives.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from faultkit.load.profile import LoadProfile, Target
from faultkit.load.prompts import workload_of, workload_prompt

__all__ = ["RequestBodies"]

#: stands for the prompt in the body template (a string no prompt or profile contains)
_PROMPT_MARK = "\x00faultkit:prompt\x00"
#: how ``json.dumps`` (``ensure_ascii``) encodes a string: C-accelerated, the same bytes
_encode_str: Callable[[str], str] = json.encoder.encode_basestring_ascii


class RequestBodies:
    """The bodies of ``profile``'s requests to ``target``."""

    def __init__(self, target: Target, profile: LoadProfile) -> None:
        self.target = target
        self.profile = profile
        self._parts = self.template()

    def workload(self, index: int) -> str:
        """The workload class of request number ``index``."""
        return workload_of(self.profile.workload, index)

    def body(self, index: int) -> bytes:
        """The JSON body of request number ``index`` (deterministic from the profile seed)."""
        p = self.profile
        prompt = workload_prompt(p.workload, p.input_tokens, seed=p.seed, index=index)
        if self._parts is None:
            return _dumps(self.as_dict(prompt))
        head, tail = self._parts
        return head + _encode_str(prompt).encode() + tail

    def as_dict(self, prompt: str) -> dict[str, Any]:
        """The body around ``prompt``, as the object ``json.dumps`` would encode."""
        p = self.profile
        body: dict[str, Any] = {"model": self.target.model, "max_tokens": p.output_tokens}
        if p.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body["stream"] = p.stream
        if p.stream and p.include_usage:
            body["stream_options"] = {"include_usage": True}
        if p.ignore_eos and self.target.supports_ignore_eos:
            body["ignore_eos"] = True
        body.update(p.extra_body)
        return body

    def template(self) -> tuple[bytes, bytes] | None:
        """The encoded body before and after its prompt; None when the prompt does not
        appear exactly once (``extra_body`` replaced it or repeats the marker)."""
        raw = _dumps(self.as_dict(_PROMPT_MARK))
        cut = _encode_str(_PROMPT_MARK).encode()
        if raw.count(cut) != 1:
            return None
        head, _, tail = raw.partition(cut)
        return head, tail


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
