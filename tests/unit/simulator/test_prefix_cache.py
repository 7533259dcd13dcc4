"""The prefix cache: a prompt whose leading blocks a freed request left behind prefills the rest.

Driven at the scheduler, step by step, so that every step's prefill tokens are seen.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.prefix_cache import PrefixCache, block_names
from simulator.profiles import EngineProfile
from simulator.requests import Request
from simulator.scheduler import Scheduler
from simulator.settings import EngineSettings

BLOCK = 16


def _scheduler(profile: EngineProfile, **overrides: object) -> Scheduler:
    values: dict[str, object] = {"block_size": BLOCK, "num_gpu_blocks": 4096}
    values.update(overrides)
    return Scheduler(profile, EngineSettings.defaults(profile, **values))


def _serve(scheduler: Scheduler, ids: list[int], *, now: float = 0.0, name: str = "r") -> int:
    """Run one request of ``ids`` with one output token to its end; its prefill tokens."""
    request = Request(name, now, len(ids), 1, block_names=block_names(ids, BLOCK))
    assert scheduler.submit(request, now) is None
    prefilled = 0
    while (plan := scheduler.begin_step(now)) is not None:
        prefilled += plan.prefill_tokens
        scheduler.end_step()
        now = plan.ends_at
    return prefilled


def test_names_chain_so_a_block_is_named_by_its_whole_prefix() -> None:
    first = block_names(list(range(40)), BLOCK)
    assert len(first) == 2  # the last 8 tokens are no full block
    assert block_names(list(range(32)), BLOCK) == first
    changed_early = block_names([99, *range(1, 40)], BLOCK)
    assert changed_early[0] != first[0]
    assert changed_early[1] != first[1]


def test_a_prompt_in_growing_pieces_prefills_each_token_once(profile_8b: EngineProfile) -> None:
    scheduler = _scheduler(profile_8b)
    prompt = list(range(1000, 1000 + 1500))
    pieces = [_serve(scheduler, prompt[:end], name=f"p{end}") for end in (256, 512, 1024)]
    last = _serve(scheduler, prompt, name="whole")
    # Each piece prefills what the one before did not (its full blocks were cached).
    assert pieces == [256, 256, 512]
    assert last == 1500 - 1024
    assert scheduler.counters.prefix_cache_hits == 256 + 512 + 1024
    assert scheduler.counters.prefix_cache_queries == 256 + 512 + 1024 + 1500


def test_a_whole_cached_prompt_still_computes_its_last_token(profile_8b: EngineProfile) -> None:
    scheduler = _scheduler(profile_8b)
    prompt = list(range(64))  # exactly four blocks
    assert _serve(scheduler, prompt, name="a") == 64
    # vLLM hits at most all but the last token: the last full block is computed again.
    assert _serve(scheduler, prompt, name="b") == BLOCK


def test_without_the_cache_or_without_ids_every_prompt_is_prefilled_whole(
    profile_8b: EngineProfile,
) -> None:
    prompt = list(range(512))
    off = _scheduler(profile_8b, enable_prefix_caching=False)
    assert [_serve(off, prompt, name=n) for n in "ab"] == [512, 512]
    assert off.counters.prefix_cache_queries == 0
    lengths_only = _scheduler(profile_8b)
    for name in "ab":
        request = Request(name, 0.0, 512, 1)  # a trace's arrival: no ids, no names
        lengths_only.submit(request, 0.0)
        plan = lengths_only.begin_step(0.0)
        assert plan is not None
        assert plan.prefill_tokens == 512
        lengths_only.end_step()
    assert lengths_only.counters.prefix_cache_hits == 0


def test_a_prefix_the_pool_handed_out_again_is_forgotten(profile_8b: EngineProfile) -> None:
    scheduler = _scheduler(profile_8b, num_gpu_blocks=40, max_num_batched_tokens=8192)
    prompt = list(range(320))  # 20 blocks
    assert _serve(scheduler, prompt, name="a") == 320
    # A stranger of 30 blocks takes 30 of the 40 free ones: the least recently freed go
    # first, and "a" freed its tail first, so its leading 10 blocks are what is left.
    assert _serve(scheduler, list(range(5000, 5000 + 30 * BLOCK)), name="x") == 480
    assert _serve(scheduler, [*prompt, 7], name="b") == 321 - 10 * BLOCK


def test_cache_order_tail_first_and_never_more_names_than_free_blocks() -> None:
    cache = PrefixCache()
    cache.keep([1, 2, 3])
    cache.fit(2)
    assert cache.hit_blocks([1, 2, 3], 3) == 2  # the tail (3) went first
    cache.take([1])
    assert cache.hit_blocks([1, 2], 2) == 0
    assert len(cache) == 1


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(min_value=1, max_value=3000),
    piece=st.integers(min_value=1, max_value=1024),
    blocks=st.integers(min_value=200, max_value=400),
)
def test_pieces_never_compute_more_than_the_prompt_and_a_block_a_piece(
    profile_8b: EngineProfile, length: int, piece: int, blocks: int
) -> None:
    scheduler = _scheduler(profile_8b, num_gpu_blocks=blocks)
    prompt = list(range(length))
    ends = [*range(piece, length, piece), length]
    computed = sum(_serve(scheduler, prompt[:end], name=str(end)) for end in ends)
    # Nothing evicts here (one request at a time in a pool that holds the prompt): each
    # piece recomputes at most its predecessor's partial block and the one token vLLM always
    # computes again.
    assert length <= computed <= length + len(ends) * BLOCK
    assert len(scheduler._prefix or ()) <= scheduler.kv.free
