"""The paged KV cache as vLLM's block pool sees it: a count of blocks, used and free.

No prefix caching is modelled (the traces carry no shared prefixes), so a block is either
held by exactly one running request or free, and only counts matter.
"""

from __future__ import annotations


class BlockPool:
    """Fixed number of KV blocks of ``block_size`` tokens each.

    Args:
        num_blocks: Blocks in the pool.
        block_size: Tokens per block.
        watermark: Fraction of the blocks that admission keeps free (vLLM's ``watermark``).
    """

    __slots__ = ("block_size", "num_blocks", "used", "watermark_blocks")

    def __init__(self, num_blocks: int, block_size: int, watermark: float = 0.0) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        # vLLM: int(watermark * num_blocks) (KVCacheManager.__init__).
        self.watermark_blocks = int(watermark * num_blocks)
        self.used = 0

    @property
    def free(self) -> int:
        """Blocks not held by any request."""
        return self.num_blocks - self.used

    @property
    def usage(self) -> float:
        """Share of blocks in use, 0-1 (``vllm:kv_cache_usage_perc``)."""
        return self.used / self.num_blocks

    def blocks_for(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` tokens."""
        return -(-tokens // self.block_size)

    def take(self, blocks: int) -> bool:
        """Take ``blocks`` if that many are free; say whether it did."""
        if blocks > self.num_blocks - self.used:
            return False
        self.used += blocks
        return True

    def give_back(self, blocks: int) -> None:
        """Return ``blocks`` to the pool."""
        self.used -= blocks
