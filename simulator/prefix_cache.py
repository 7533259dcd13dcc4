"""vLLM's automatic prefix caching, reduced to what decides a prefill's length.

vLLM names every full block of a prompt by a hash chained over the blocks before it
(``hash_block_tokens`` in ``vllm/v1/core/kv_cache_utils.py``), so a block's name says the
whole prefix up to its end. A request that ends (or is preempted) gives its blocks back to
the free pool with their names; until the pool hands a block out again, a new request whose
prompt begins with the same blocks takes them as they are and prefills only the rest. The
pool hands out the least recently freed block first, and a request frees its blocks tail
first, so a prefix outlives its own continuation.

What is modelled: the names of the free blocks that still hold KV (:class:`PrefixCache`),
evicted least recently freed first whenever the pool has fewer free blocks than names; a
request's hit is its leading run of named blocks, at most all but its last token (vLLM
computes the last token again to sample from it). What is not: blocks shared by two running
requests at once (a hit is taken only from freed blocks; the batch lane's prefill in pieces,
the use this model serves, sends one line's pieces one after another), the hashes' extra keys
(LoRA, multimodal inputs, ``cache_salt``), and the blocks of output tokens.

Requests that carry no token ids (a trace's arrivals: lengths only) have no names and never
hit, as if every prompt were unique.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def block_names(token_ids: Sequence[int], block_size: int) -> tuple[int, ...]:
    """The chained names of the full blocks of ``token_ids`` (a partial last block has none).

    Python's hash of a tuple of integers (not salted per process, unlike a string's): a
    simulation's runs name the same prompt alike, and a collision in 64 bits, which would
    turn a miss into a hit, is left to chance as vLLM leaves its own.
    """
    names: list[int] = []
    parent = 0
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, *token_ids[start : start + block_size]))
        names.append(parent)
    return tuple(names)


class PrefixCache:
    """The names of free blocks that still hold their KV, least recently freed first."""

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._names)

    def hit_blocks(self, names: Sequence[int], max_blocks: int) -> int:
        """How many of ``names``, from the first, are cached (at most ``max_blocks``)."""
        hits = 0
        for name in names[:max_blocks]:
            if name not in self._names:
                break
            hits += 1
        return hits

    def take(self, names: Sequence[int]) -> None:
        """A request now holds these cached blocks: they are no longer free to evict."""
        for name in names:
            self._names.pop(name, None)

    def keep(self, names: Sequence[int]) -> None:
        """Blocks given back with their KV: named, newest last; the tail is evicted first."""
        for name in reversed(names):
            self._names.pop(name, None)
            self._names[name] = None

    def fit(self, free_blocks: int) -> None:
        """Forget the least recently freed names until no more are named than are free."""
        while len(self._names) > free_blocks:
            self._names.popitem(last=False)
