"""KV-cache block allocator: a fixed pool of block ids, allocated all-or-nothing.

Pure, no I/O. Invariant (checked by the hypothesis tests): every block id is either free or
held by exactly one owner; ``num_free + held == num_blocks``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class BlockAllocator:
    """Hands out integer block ids ``0..num_blocks-1``."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 0:
            raise ValueError("num_blocks must be >= 0")
        self.num_blocks = num_blocks
        self._free: deque[int] = deque(range(num_blocks))
        self._held: set[int] = set()

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return len(self._held)

    @property
    def usage(self) -> float:
        """Fraction of blocks in use, 0–1 (vllm:kv_cache_usage_perc, sglang:token_usage)."""
        return len(self._held) / self.num_blocks if self.num_blocks else 0.0

    def allocate(self, n: int) -> list[int] | None:
        """``n`` fresh blocks, or ``None`` (nothing taken) when fewer than ``n`` are free."""
        if n < 0:
            raise ValueError("cannot allocate a negative number of blocks")
        if n > len(self._free):
            return None
        got = [self._free.popleft() for _ in range(n)]
        self._held.update(got)
        return got

    def free(self, blocks: Iterable[int]) -> None:
        """Return blocks to the pool; freeing a block that is not held is a bug and raises."""
        for b in blocks:
            if b not in self._held:
                raise ValueError(f"block {b} freed but not allocated (double free?)")
            self._held.remove(b)
            self._free.append(b)
