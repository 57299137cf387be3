"""testbed.gateway_config: LiteLLM's proxy config from typed inputs (pure, no LiteLLM)."""

from __future__ import annotations

import math

import pytest
import yaml

from faultkit.inventory import parse_inventory
from testbed.gateway_config import (
    NO_KEY,
    GatewaySpec,
    RouterPolicy,
    Upstream,
    gateway_spec,
    litellm_config,
    render_yaml,
)

A = Upstream("vllm-a", "http://10.0.0.1:8000", "tiny")
B = Upstream("vllm-b", "http://vllm-b:8000/", "tiny", api_key_env="VLLM_B_KEY")


def test_one_alias_is_put_on_every_upstream() -> None:
    config = litellm_config(GatewaySpec("chat", (A, B)))
    assert [d["model_name"] for d in config["model_list"]] == ["chat", "chat"]
    first, second = config["model_list"]
    assert first["litellm_params"] == {
        "model": "openai/tiny",
        "api_base": "http://10.0.0.1:8000/v1",
        "api_key": NO_KEY,
    }
    assert first["model_info"] == {"id": "vllm-a"}, "the deployment id names the node"
    assert second["litellm_params"]["api_base"] == "http://vllm-b:8000/v1"
    assert second["litellm_params"]["api_key"] == "os.environ/VLLM_B_KEY", "never the key itself"


def test_router_settings_carry_the_policy() -> None:
    policy = RouterPolicy(num_retries=0, allowed_fails=2, cooldown_s=7.5, timeout_s=20)
    settings = litellm_config(GatewaySpec("chat", (A,), policy))["router_settings"]
    assert settings == {
        "routing_strategy": "simple-shuffle",
        "num_retries": 0,
        "allowed_fails": 2,
        "cooldown_time": 7.5,
        "timeout": 20,
    }


def test_metrics_and_keys() -> None:
    default = litellm_config(GatewaySpec("chat", (A,)))
    assert default["litellm_settings"]["callbacks"] == ["prometheus"]
    assert default["litellm_settings"]["require_auth_for_metrics_endpoint"] is False
    assert default["litellm_settings"]["telemetry"] is False
    assert "dangerously_permit_weak_or_unset_master_key" not in default["general_settings"]
    assert "master_key" not in default["general_settings"], "the key comes from the environment"
    closed = litellm_config(GatewaySpec("chat", (A,), metrics_public=False, require_key=False))
    assert closed["litellm_settings"]["require_auth_for_metrics_endpoint"] is True
    assert closed["general_settings"]["dangerously_permit_weak_or_unset_master_key"] is True
    bare = litellm_config(GatewaySpec("chat", (A,), metrics=False))
    assert "callbacks" not in bare["litellm_settings"]


def test_yaml_reads_back_as_the_same_config() -> None:
    config = litellm_config(GatewaySpec("chat", (A, B)))
    text = render_yaml(config)
    assert yaml.safe_load(text) == config
    assert text.startswith("model_list:"), "keys stay in the order built"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: GatewaySpec("chat", ()), "at least one upstream"),
        (lambda: GatewaySpec(" ", (A,)), "alias must not be empty"),
        (lambda: GatewaySpec("chat", (A, A)), r"unique \(repeated: vllm-a\)"),
        (lambda: Upstream("x", "10.0.0.1:8000", "m"), "http:// or https://"),
        (lambda: Upstream("x", "http://h:1", ""), "model must not be empty"),
        (lambda: Upstream("x", "http://h:1", "m", api_key_env="MY KEY"), "variable name"),
        (lambda: RouterPolicy(num_retries=-1), "num_retries must be ≥ 0"),
        (lambda: RouterPolicy(allowed_fails=3), "LiteLLM's default"),
        (lambda: RouterPolicy(cooldown_s=math.nan), "cooldown_s must be a finite number"),
        (lambda: RouterPolicy(timeout_s=math.inf), "timeout_s must be a finite number"),
        (lambda: RouterPolicy(cooldown_s=0), "cooldown_s must be a finite number > 0"),
    ],
)
def test_bad_input_is_refused(build: object, message: str) -> None:
    assert callable(build)
    with pytest.raises(ValueError, match=message):
        build()


INVENTORY = """\
nodes:
  - {name: a, engine: vllm, base_url: "http://127.0.0.1:8000", model: tiny, api_key_env: A_KEY}
  - {name: b, engine: sim, personality: vllm, base_url: "http://127.0.0.1:8001", model: tiny}
  - name: gw
    kind: gateway
    engine: litellm
    base_url: http://127.0.0.1:4000
    model: chat
    upstreams: [b, a]
"""


def test_gateway_spec_follows_the_inventory() -> None:
    inventory = parse_inventory(INVENTORY)
    spec = gateway_spec(inventory, inventory.node("gw"), address=lambda n: f"http://{n.name}:80")
    assert spec.alias == "chat"
    assert spec.upstreams == (
        Upstream("b", "http://b:80", "tiny"),
        Upstream("a", "http://a:80", "tiny", api_key_env="A_KEY"),
    )
    default = gateway_spec(inventory, inventory.node("gw"))
    assert [u.base_url for u in default.upstreams] == [
        "http://127.0.0.1:8001",
        "http://127.0.0.1:8000",
    ]
    with pytest.raises(ValueError, match="'a' is not a gateway"):
        gateway_spec(inventory, inventory.node("a"))
