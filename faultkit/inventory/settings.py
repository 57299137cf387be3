"""The inventory's settings models: a node's objectives (:class:`SLOSettings`), a serving
config (:class:`ServingConfig`), and where Prometheus and Alertmanager answer. Every model
forbids unknown keys and is frozen (:class:`FrozenModel`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RestartPolicy = Literal["no", "on-failure", "always", "unless-stopped"]

_MEMORY_RE = re.compile(r"^\d+(\.\d+)?[bkmg]?$", re.IGNORECASE)


class FrozenModel(BaseModel):
    """An inventory model: unknown keys are errors, values never change once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SLOSettings(FrozenModel):
    """Objectives a node is judged against. Defaults suit the testbed and small clusters.

    Latency thresholds should be histogram bucket boundaries of the engine (bucket-ratio
    SLIs are exact only there).
    """

    availability: float = Field(0.99, gt=0, lt=1, description="good/valid requests target")
    error_ratio_max: float = Field(0.01, ge=0, le=1)
    ttft_s: float = Field(2.5, gt=0, description="TTFT threshold (bucket boundary)")
    ttft_target: float = Field(0.95, gt=0, le=1, description="fraction under ttft_s")
    itl_s: float = Field(0.5, gt=0)
    itl_target: float = Field(0.95, gt=0, le=1)
    detection_s_max: float = Field(30.0, gt=0)
    recovery_s_max: float = Field(120.0, gt=0)
    lost_max: int | None = Field(None, ge=0, description="max lost requests; None = no limit")
    page_s_max: float | None = Field(
        None, gt=0, description="max seconds from the fault to a page reaching the pager "
        "(needs alertmanager.pager_url); None = not judged")
    recovery_hold_s: float = Field(5.0, gt=0)
    window_days: int = Field(30, ge=1, le=366)


class ServingConfig(FrozenModel):
    """A named way to run a node's container (used by the rollout fault and the gate)."""

    image: str
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    memory: str | None = Field(None, description="memory limit, e.g. 512m or 24g")
    shm_size: str | None = Field(
        None, description="size of /dev/shm, e.g. 1g (vLLM's shared-memory queues need ~400 MiB)"
    )
    cpu_shares: int | None = Field(
        None, ge=2, le=262144,
        description="relative CPU weight against the host's other containers (Docker's "
        "--cpu-shares; its default is 1024); only matters while the CPU is contended",
    )
    speculative: str | None = Field(
        None, min_length=1,
        description="the speculative decoding this config runs, as its operator names it "
        "(e.g. 'ngram, 4 draft tokens'); unset: none. A candidate whose value differs from "
        "the current config's is judged per workload class by the gate",
    )
    restart: RestartPolicy = "on-failure"
    restart_max_retries: int = Field(0, ge=0, description="for on-failure; 0 = unlimited")
    ready_timeout_s: float = Field(120.0, gt=0)
    description: str = ""
    apply: str | None = Field(None, description="shell command applying this config (compose)")
    rollback: str | None = Field(None, description="shell command restoring the previous one")

    @field_validator("memory", "shm_size")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is not None and not _MEMORY_RE.match(value):
            raise ValueError("must look like 512m, 2g or 1073741824")
        return value

    @model_validator(mode="after")
    def _apply_pairs(self) -> ServingConfig:
        if (self.apply is None) != (self.rollback is None):
            raise ValueError("'apply' and 'rollback' go together: give both or neither")
        return self


class PrometheusSettings(FrozenModel):
    url: str = "http://127.0.0.1:9090"
    scrape_interval_s: float = Field(1.0, gt=0)
    slo_evaluation_interval_s: float = Field(
        30.0, gt=0, le=3600,
        description="how often the SLO recording and burn-rate rules are evaluated; the node "
        "alerts (down, restarted) use Prometheus' global interval, which detection rests on",
    )


class AlertmanagerSettings(FrozenModel):
    """The Alertmanager the inventory's Prometheus sends its alerts to: read through its
    API v2 (alerts, silences), never reconfigured; ``pager_url``, a ``faultkit pager``
    its route delivers to (a webhook receiver), dates each page as it arrived."""

    url: str = Field(description="Alertmanager's base URL, e.g. http://127.0.0.1:9093")
    pager_url: str | None = Field(
        None, description="base URL of a `faultkit pager` that a route of this Alertmanager "
        "delivers to (webhook_configs); without one, no page can be dated, only its state")

    @field_validator("url", "pager_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/") if value is not None else None
