"""Timing model: how long one engine step takes. Pure; seconds.

    step = step_overhead
         + prefill_s_per_token * prefill_tokens
         + (decode_step_s + decode_s_per_seq * decode_seqs
            + decode_s_per_context_token * context_tokens)      if decode_seqs > 0
         + (spec_verify_s_per_token * k + spec_draft_s_per_seq) * decode_seqs
                                              with speculation (k drafts a step)
    step /= speed            (0 in zero-latency mode)

So TTFT grows with prompt length and queueing, and ITL grows with batch size and context
length, the way a real engine's do. The admin "slow" factor multiplies the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.simnode.config import SimConfig


@dataclass(frozen=True)
class TimingModel:
    step_overhead_s: float = 0.002
    prefill_s_per_token: float = 0.000015
    decode_step_s: float = 0.020
    decode_s_per_seq: float = 0.0008
    decode_s_per_context_token: float = 0.0000005
    speed: float = 1.0
    zero_latency: bool = False
    spec_tokens: int = 0
    spec_verify_s_per_token: float = 0.0
    spec_draft_s_per_seq: float = 0.0

    @classmethod
    def from_config(cls, cfg: SimConfig) -> TimingModel:
        return cls(
            step_overhead_s=cfg.step_overhead_s,
            prefill_s_per_token=cfg.prefill_s_per_token,
            decode_step_s=cfg.decode_step_s,
            decode_s_per_seq=cfg.decode_s_per_seq,
            decode_s_per_context_token=cfg.decode_s_per_context_token,
            speed=cfg.speed,
            zero_latency=cfg.zero_latency,
            spec_tokens=cfg.num_speculative_tokens,
            spec_verify_s_per_token=cfg.spec_verify_s_per_token,
            spec_draft_s_per_seq=cfg.spec_draft_s_per_seq,
        )

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        """Duration of one step computing ``prefill_tokens`` prompt tokens and ``decode_seqs``
        decode tokens, reading ``context_tokens`` tokens of KV for the decodes."""
        if self.zero_latency or (prefill_tokens == 0 and decode_seqs == 0):
            return 0.0
        t = self.step_overhead_s + self.prefill_s_per_token * prefill_tokens
        if decode_seqs:
            t += (
                self.decode_step_s
                + self.decode_s_per_seq * decode_seqs
                + self.decode_s_per_context_token * context_tokens
            )
            if self.spec_tokens:
                t += (self.spec_verify_s_per_token * self.spec_tokens
                      + self.spec_draft_s_per_seq) * decode_seqs
        return t / self.speed
