"""Secrets never reach what faultkit writes: redaction forms, known secret values, and the
writers (container.json's log tail and state, the gate's config diff)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from faultkit.experiment import Experiment
from faultkit.gate.decision import config_diff
from faultkit.inventory import Inventory, Node, ServingConfig
from faultkit.load.profile import LoadProfile
from faultkit.rundir import RunDir
from reports.text import REDACTED, is_secret_name, known_secrets, redact, redact_data

SECRET = "token-abc123secret"


@pytest.mark.parametrize("text", [
    f"INFO 01-01 api_server.py:1] args: Namespace(model='m', api_key='{SECRET}', port=8000)",
    f"INFO args: Namespace(model='m', api_key=['{SECRET}'], port=8000)",
    f"vllm serve m --api-key {SECRET} --port 8000",
    f"vllm serve m --api-key={SECRET}",
    f"non-default args: {{'model': 'm', 'api_key': ['{SECRET}'], 'port': 8000}}",
    f'command: ["vllm", "serve", "--api-key", "{SECRET}", "--port", "8000"]',
    f"command: ['vllm', '--api-key', '{SECRET}']",
    f"command: [vllm, --api-key, {SECRET}, --port, '8000']",
    f"command:\n  - vllm\n  - --api-key\n  - {SECRET}\n  - --port\n",
    f"Authorization: Bearer {SECRET}",
    f"HF_TOKEN={SECRET}",
    f"OPENAI_API_KEY={SECRET} other=1",
    f"MY_SERVICE_KEY={SECRET}",
    f"AWS_SECRET={SECRET}",
    f"GH_TOKEN='{SECRET} with spaces'",
    f"env: {{HF_TOKEN: {SECRET}, PYTHONPATH: /opt}}",
    f"X-API-Key: {SECRET}",
])
def test_every_secret_form_is_redacted(text: str) -> None:
    out = redact(text)
    assert SECRET not in out
    assert REDACTED in out


@pytest.mark.parametrize("text", [
    "max_tokens=500 prompt_tokens: 12 n_ctx=4096",
    "--max-num-batched-tokens 8192 --tokenizer hf-internal/x --token-file /run/token",
    "args: Namespace(api_key=None, hf_token=None, tokenizer='x')",
    "PYTHONPATH=/opt/faultkit TOKENIZERS_PARALLELISM=false",
    '{"t_first_token": 1767268796.22, "t_last_token": 1767268797.1, "first_token": true}',
    'command: ["sim", "--kv-bytes-per-token", "131072"] and --prefill-s-per-token 0.001',
    "sent 16384-token prompts from 4 workers",
])
def test_harmless_text_is_kept(text: str) -> None:
    assert redact(text) == text


def test_known_secret_values_are_redacted_anywhere() -> None:
    out = redact(f"connecting with {SECRET}; retry{SECRET}!", extra={SECRET, "ab"})
    assert SECRET not in out
    assert out == f"connecting with {REDACTED}; retry{REDACTED}!"
    assert redact("ab cd", extra={"ab"}) == "ab cd"  # too short to be worth shredding text


def test_secret_names() -> None:
    for name in ("HF_TOKEN", "VLLM_API_KEY", "AWS_SECRET_ACCESS_KEY", "password", "x-api-key",
                 "HUGGING_FACE_HUB_TOKEN", "DB_PASSWD"):
        assert is_secret_name(name), name
    for name in ("PYTHONPATH", "MAX_TOKENS", "TOKENIZERS_PARALLELISM", "MONKEY", "api_key_env",
                 "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "ssl_keyfile"):
        assert not is_secret_name(name), name


def _inventory() -> Inventory:
    return Inventory(
        nodes=[Node(name="n", engine="vllm", base_url="http://127.0.0.1:9", model="m",
                    api_key_env="FK_TEST_API_KEY", docker={"container": "faultkit-test-n"},
                    serving_config="good")],
        serving_configs={
            "good": ServingConfig(image="vllm", command=["serve", "--api-key", "cmd-key-1"],
                                  env={"HF_TOKEN": "hf-planted-1", "PYTHONPATH": "/opt/x"}),
            "candidate": ServingConfig(image="vllm", command=["serve", "--api-key", "cmd-key-2"],
                                       env={"HF_TOKEN": "hf-planted-2", "PYTHONPATH": "/opt/y"}),
        },
    )


def test_known_secrets_are_api_keys_and_secret_env_values() -> None:
    inv = _inventory()
    assert known_secrets(inv, {"FK_TEST_API_KEY": "node-key-123"}) == {
        "node-key-123", "hf-planted-1", "hf-planted-2"}
    assert known_secrets(inv, {}) == {"hf-planted-1", "hf-planted-2"}


def test_redact_data_handles_env_command_and_nesting() -> None:
    data = {
        "env": {"HF_TOKEN": "hf-x", "PYTHONPATH": "/opt", "EMPTY_TOKEN": ""},
        "command": ["vllm", "--api-key", "k-1", "--port", "8000"],
        "nested": [{"password": "p"}, "log api_key=zz-1 and node-key-123"],
        "count": 3,
        "api_key_env": "VLLM_API_KEY",
    }
    out = redact_data(data, {"node-key-123"})
    assert out == {
        "env": {"HF_TOKEN": REDACTED, "PYTHONPATH": "/opt", "EMPTY_TOKEN": ""},
        "command": ["vllm", "--api-key", REDACTED, "--port", "8000"],
        "nested": [{"password": REDACTED}, f"log api_key={REDACTED} and {REDACTED}"],
        "count": 3,
        "api_key_env": "VLLM_API_KEY",
    }


class _FakeHost:
    """What Experiment reads from Docker: a state whose JSON carries env and command."""

    def state(self, name: str) -> Any:
        return SimpleNamespace(to_json=lambda: {
            "name": name, "env": ["HF_TOKEN=hf-planted-1", "PYTHONPATH=/opt/x"],
            "command": ["serve", "--api-key", "node-key-123"],
            "labels": {"note": "started with node-key-123"},
        })

    def logs(self, name: str, *, tail: int = 200, since: float | None = None) -> str:
        return (f"INFO args: Namespace(model='m', api_key=['node-key-123'])\n"
                f"loading with token hf-planted-1\nserving {name}\n")


def test_container_json_parts_are_redacted(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FK_TEST_API_KEY", "node-key-123")
    # where the experiment's container evidence looks docker_host up
    module = importlib.import_module("faultkit.experiment.node_evidence")
    monkeypatch.setattr(module, "docker_host", lambda url: _FakeHost())
    inv = _inventory()
    exp = Experiment(scenario="s", node=inv.nodes[0], inventory=inv, run=RunDir(tmp_path),
                     load_profile=LoadProfile())
    written = repr({"after": exp.evidence.container_state(),
                    "log_tail": exp.evidence.log_tail()})
    for planted in ("node-key-123", "hf-planted-1"):
        assert planted not in written
    assert "serving faultkit-test-n" in written
    assert "PYTHONPATH=/opt/x" in written


def test_gate_config_diff_has_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FK_TEST_API_KEY", "cmd-key-2")
    diff = "\n".join(config_diff(_inventory(), "good", "candidate"))
    for planted in ("hf-planted-1", "hf-planted-2", "cmd-key-1", "cmd-key-2"):
        assert planted not in diff
    assert "-  PYTHONPATH: /opt/x" in diff and "+  PYTHONPATH: /opt/y" in diff
    assert REDACTED in diff
