"""One incarnation of a simulated vLLM V1 engine: its scheduler, KV cache and step loop.

Each step follows ``vllm/v1/core/sched/scheduler.py`` (0.33):

1. Running requests first. Every decoding request takes one token of the budget and, when
   its next token crosses a block boundary, one KV block; a request that cannot get its
   blocks preempts the newest running request (recompute: its KV is dropped, it goes back
   to the front of the waiting queue) until the blocks are free or it has preempted itself.
   Partial prefills then continue in running order, each chunk capped by
   ``long_prefill_token_threshold`` (unless it is the only request) and the budget left.
2. Then, unless the step preempted anything, waiting requests are admitted FCFS while the
   budget, the admission cap (``max_num_active_seqs`` or ``max_num_seqs``) and the KV cache
   allow: the whole prompt must fit in the free blocks (``scheduler_reserve_full_isl``) plus
   the watermark when something is already running. A request that does not fit blocks the
   ones behind it.
3. ``prefill_schedule_interval`` holds every prefill, new or partial, until that many steps
   have passed since the last step that carried one, as long as something decodes and the
   last release drained the queue (vLLM's capacity escape).

With ``--scheduling-policy priority`` three things change, as in vLLM:

- the waiting queue is ordered by (priority, arrival, request id), lower first, and a
  preempted request goes back to its place in that order, not to the front
  (:mod:`simulator.request_queues`);
- a request short of KV blocks preempts the running request with the largest (priority,
  arrival), the least urgent and then the newest, instead of the newest; a victim already
  given a prefill chunk in this step gives its chunk back;
- a partial prefill that had to preempt itself lets the running requests after it still try
  (they may be more urgent and fit in what it freed), where FCFS stops there.

Neither policy preempts a running request to admit a waiting one: priority decides who is
admitted first and who is evicted first, never an eviction for an admission.

Deliberate simplifications: decodes are budgeted before partial prefills (vLLM walks the
running list in order, and a partial prefill is almost always the newest entry, so the two
agree except when a capped long prompt sits ahead of newer decodes); prefix caching only for
requests that carry their token ids, from freed blocks (:mod:`simulator.prefix_cache`); no
async-scheduling overlap. The step's duration comes from the profile.

The cost of a step does not grow with the number of running requests: a decoding request's
progress is derived from the step counter, and only its next block boundary and its end are
events in two heaps. The summed context is kept as an affine function of the step number.
"""

from __future__ import annotations

import heapq

from simulator.kv_cache import BlockPool
from simulator.prefix_cache import PrefixCache
from simulator.profiles import EngineProfile
from simulator.request_queues import waiting_queue
from simulator.requests import FinishedRequest, Outcome, RejectReason, Request, finished_record
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.steps import EngineCounters, StepPlan, StepResult

# (due step, running order, epoch, request): the running order breaks ties, so requests are
# served in vLLM's running-list order and never compared themselves.
_Event = tuple[int, int, int, Request]


class Scheduler:
    """The scheduler, KV cache and step loop of one engine incarnation.

    The driver owns the clock: it submits requests and starts and ends steps at times it
    chooses (virtual or real), and the scheduler never reads a clock itself.

    Args:
        profile: Step costs and KV pool of the model and GPU.
        settings: The settings this incarnation runs with.
    """

    def __init__(self, profile: EngineProfile, settings: EngineSettings) -> None:
        self.profile = profile
        self.settings = settings
        self.kv = BlockPool(settings.num_gpu_blocks, settings.block_size, settings.watermark)
        self.counters = EngineCounters()
        self._prefix = PrefixCache() if settings.enable_prefix_caching else None
        self._waiting = waiting_queue(settings.scheduling_policy)
        self._by_priority = settings.scheduling_policy == SchedulingPolicy.PRIORITY
        # Insertion-ordered: the running list of vLLM, oldest admission first.
        self._running: dict[Request, None] = {}
        self._prefilling: dict[Request, None] = {}
        self._num_decoding = 0
        # Summed context of decoding requests before step n is _context_base + n * _num_decoding.
        self._context_base = 0
        self._block_events: list[_Event] = []
        self._finish_events: list[_Event] = []
        self._running_seq = 0
        self._steps_done = 0
        self._executed_steps = 0
        self._last_prefill_step = -settings.prefill_schedule_interval
        self._capacity_bound = False
        self._prefill_backlog_tokens = 0
        self._last_step_end: float | None = None
        self._plan: StepPlan | None = None
        self._planned: list[tuple[Request, int]] = []
        self._planned_tokens = 0
        self._preempted_in_step = False

    # -- observation -------------------------------------------------------------------

    @property
    def num_running(self) -> int:
        """Requests in the running list (``vllm:num_requests_running``)."""
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        """Requests waiting, preempted ones included (``vllm:num_requests_waiting``)."""
        return len(self._waiting)

    @property
    def num_preempted_waiting(self) -> int:
        """Waiting requests that were preempted (``num_requests_waiting_by_reason``)."""
        return sum(1 for request in self._waiting if request.num_preemptions)

    @property
    def has_work(self) -> bool:
        """Whether any request is running or waiting."""
        return bool(self._running or self._waiting)

    @property
    def in_step(self) -> bool:
        """Whether a step has begun and not yet ended."""
        return self._plan is not None

    def generated_tokens(self, request: Request) -> int:
        """Output tokens ``request`` has received so far (for streaming)."""
        if request.decoding:
            return request.generated + self._steps_done - request.decode_anchor_step
        return request.generated

    def in_flight(self) -> list[Request]:
        """Running then waiting requests, in the scheduler's order."""
        return [*self._running, *self._waiting]

    # -- arrivals ----------------------------------------------------------------------

    def submit(self, request: Request, now: float) -> FinishedRequest | None:
        """Hand a new request to the engine; return its record if it is rejected at once."""
        reason = self._reject_reason(request)
        if reason is not None:
            if reason in (RejectReason.MAX_NUM_QUEUED_REQS, RejectReason.MAX_NUM_QUEUED_TOKENS):
                self.counters.admission_rejections[reason.value] += 1
            return finished_record(request, now, Outcome.REJECTED, reason)
        self._waiting.add(request)
        self._prefill_backlog_tokens += request.prompt_tokens
        return None

    def _reject_reason(self, request: Request) -> RejectReason | None:
        limit = self.settings.max_num_queued_reqs
        if limit is not None and len(self._running) + len(self._waiting) + 1 > limit:
            return RejectReason.MAX_NUM_QUEUED_REQS
        token_limit = self.settings.max_num_queued_tokens
        if token_limit is not None and self._prefill_backlog_tokens >= token_limit:
            return RejectReason.MAX_NUM_QUEUED_TOKENS
        # The last sampled token never needs a slot: a request holds at most
        # prompt + output - 1 tokens of KV. One that cannot fit alone could never finish.
        peak_tokens = request.prompt_tokens + request.max_tokens - 1
        if self.kv.blocks_for(peak_tokens) > self.kv.num_blocks:
            return RejectReason.TOO_LONG
        # Without chunked prefill vLLM requires max_model_len <= max_num_batched_tokens, so a
        # longer request fails validation before it reaches the scheduler.
        too_long_for_a_step = peak_tokens + 1 > self.settings.max_num_batched_tokens
        if not self.settings.enable_chunked_prefill and too_long_for_a_step:
            return RejectReason.TOO_LONG
        return None

    # -- one step ----------------------------------------------------------------------

    def begin_step(self, now: float) -> StepPlan | None:
        """Schedule the next step at ``now``; None when there is nothing to compute."""
        if self._plan is not None:
            msg = "begin_step called while a step is in progress"
            raise RuntimeError(msg)
        step = self._steps_done + 1
        self._planned = []
        self._planned_tokens = 0
        self._preempted_in_step = False
        num_eligible = len(self._running) + len(self._waiting)
        self._grow_decodes(step, now)
        threshold = self._prefill_cap(num_eligible)
        defer = self._defer_prefills()
        if not defer:
            self._continue_prefills(threshold, now)
            if not self._preempted_in_step:
                self._admit_waiting(threshold, now)
                # vLLM's escape from the prefill cadence: a release step that could not drain
                # the queue lifts the hold until one does.
                self._capacity_bound = bool(self._waiting)
        prefill_tokens = self._planned_tokens
        if self._num_decoding == 0 and prefill_tokens == 0:
            return None
        context = self._context_base + step * self._num_decoding
        context += sum(request.computed for request, _ in self._planned)
        self._executed_steps += 1
        if self._planned:
            self._last_prefill_step = self._executed_steps
        self._plan = StepPlan(
            number=step,
            started_at=now,
            duration_s=self.profile.step_time_s(prefill_tokens, self._num_decoding, context),
            prefill_tokens=prefill_tokens,
            decode_tokens=self._num_decoding,
            context_tokens=context,
            num_prefills=len(self._planned),
        )
        return self._plan

    def end_step(self) -> StepResult:
        """Finish the step in progress: its tokens come out at ``plan.ends_at``."""
        plan = self._plan
        if plan is None:
            msg = "end_step called with no step in progress"
            raise RuntimeError(msg)
        self._plan = None
        now = plan.ends_at
        self._steps_done = plan.number
        self.counters.steps += 1
        self.counters.busy_s += plan.duration_s
        itl: list[tuple[float, int]] = []
        if plan.decode_tokens:
            since = self._last_step_end if self._last_step_end is not None else plan.started_at
            itl.append((now - since, plan.decode_tokens))
        self._last_step_end = now
        generated = plan.decode_tokens
        first_tokens = 0
        ttfts: list[float] = []
        finished: list[FinishedRequest] = []
        for request, chunk in self._planned:
            request.computed += chunk
            if request.computed < request.num_tokens:
                continue
            generated += 1
            request.generated += 1
            if request.first_token_at is None:
                request.first_token_at = now
                first_tokens += 1
                ttfts.append(now - request.arrived_at)
                self.counters.prompt_tokens += request.prompt_tokens
                self._prefill_backlog_tokens -= request.prompt_tokens
            elif request.last_token_at is not None:
                itl.append((now - request.last_token_at, 1))
            del self._prefilling[request]
            if request.generated >= request.max_tokens:
                finished.append(self._finish(request, now))
            else:
                self._start_decoding(request, plan.number)
        self._planned = []
        while self._finish_events and self._finish_events[0][0] <= plan.number:
            _, _, epoch, request = heapq.heappop(self._finish_events)
            if request.epoch == epoch:
                self._stop_decoding(request, plan.number)
                finished.append(self._finish(request, now))
        self.counters.generation_tokens += generated
        return StepResult(plan, generated, first_tokens, tuple(finished), tuple(itl), tuple(ttfts))

    def abort(self, request: Request, now: float) -> FinishedRequest | None:
        """Abort one request between steps (a client went away); None if it already ended."""
        if self._plan is not None:
            msg = "abort called while a step is in progress: abort after end_step"
            raise RuntimeError(msg)
        if request in self._running:
            if request.decoding:
                self._stop_decoding(request, self._steps_done)
            else:
                del self._prefilling[request]
            del self._running[request]
        elif request in self._waiting:
            self._waiting.remove(request)
        else:
            return None
        return self._aborted(request, now)

    def abort_all(self, now: float) -> list[FinishedRequest]:
        """Abort every request in flight (shutdown without, or past, its drain)."""
        if self._plan is not None:
            msg = "abort_all called while a step is in progress"
            raise RuntimeError(msg)
        records = []
        for request in self.in_flight():
            if request.decoding:
                self._stop_decoding(request, self._steps_done)
            records.append(self._aborted(request, now))
        self._running.clear()
        self._prefilling.clear()
        self._waiting.clear()
        return records

    def _aborted(self, request: Request, now: float) -> FinishedRequest:
        """Free what an aborted request held and count it; it is already off every queue."""
        request.epoch += 1
        self._release(request)
        if request.first_token_at is None:
            self._prefill_backlog_tokens -= request.prompt_tokens
        self.counters.finished["abort"] += 1
        return finished_record(request, now, Outcome.ABORTED)

    # -- the parts of a step -----------------------------------------------------------

    def _grow_decodes(self, step: int, now: float) -> None:
        """Give a block to every decode whose next token crosses a block boundary."""
        while self._block_events and self._block_events[0][0] <= step:
            _, _, epoch, request = heapq.heappop(self._block_events)
            if request.epoch != epoch or not self._take_blocks(request, 1, now):
                continue
            self._push_block_event(request)

    def _continue_prefills(self, threshold: int, now: float) -> None:
        for request in list(self._prefilling):
            if request not in self._prefilling:
                continue  # preempted by an older prefill's allocation in this loop
            budget = self._budget_left()
            if budget <= 0:
                break
            chunk = request.num_tokens - request.computed
            if 0 < threshold < chunk:
                chunk = threshold
            chunk = min(chunk, budget)
            needed = self.kv.blocks_for(request.computed + chunk) - request.blocks
            if needed > 0 and not self._take_blocks(request, needed, now):
                if self._by_priority:
                    continue  # the least urgent preempted itself; the next may fit
                break
            self._plan_chunk(request, chunk)

    def _admit_waiting(self, threshold: int, now: float) -> None:
        settings = self.settings
        kv = self.kv
        while self._waiting:
            budget = self._budget_left()
            if budget <= 0 or len(self._running) >= settings.admission_cap:
                break
            request = self._waiting.peek()
            cached = self._cached_tokens(request)
            chunk = request.num_tokens - cached
            if 0 < threshold < chunk:
                chunk = threshold
            if not settings.enable_chunked_prefill and chunk > budget:
                break
            chunk = min(chunk, budget)
            # vLLM applies the watermark only when something is already running.
            watermark = kv.watermark_blocks if self._running else 0
            if (
                settings.scheduler_reserve_full_isl
                and kv.blocks_for(request.num_tokens) + watermark > kv.free
            ):
                break
            needed = kv.blocks_for(cached + chunk)
            if needed + watermark > kv.free:
                break
            self._waiting.pop()
            kv.take(needed)
            self._take_cached(request, cached)
            request.blocks = needed
            request.running_seq = self._running_seq
            self._running_seq += 1
            self._running[request] = None
            self._prefilling[request] = None
            if request.first_scheduled_at is None:
                request.first_scheduled_at = now
            self._plan_chunk(request, chunk)

    def _plan_chunk(self, request: Request, chunk: int) -> None:
        self._planned.append((request, chunk))
        self._planned_tokens += chunk

    def _take_blocks(self, request: Request, blocks: int, now: float) -> bool:
        """Allocate for a running request, preempting as vLLM does until the blocks are free.

        The victim is the newest running request (FCFS), or the one with the largest
        (priority, arrival) (priority; the first in running order among equals, as ``max``).
        Returns False when ``request`` itself had to be preempted.
        """
        while not self.kv.take(blocks):
            if self._by_priority:
                victim = max(self._running, key=_urgency)
            else:
                victim = next(reversed(self._running))
            self._preempt(victim, now)
            if victim is request:
                return False
        if self._prefix is not None:
            self._prefix.fit(self.kv.free)
        request.blocks += blocks
        return True

    def _cached_tokens(self, request: Request) -> int:
        """Tokens of ``request``'s prompt whose KV the cache still holds (0 without one).

        At most all but the last token: vLLM computes that one again to sample from it.
        """
        if self._prefix is None or not request.block_names:
            return 0
        max_blocks = (request.num_tokens - 1) // self.kv.block_size
        return self._prefix.hit_blocks(request.block_names, max_blocks) * self.kv.block_size

    def _take_cached(self, request: Request, cached: int) -> None:
        """``request`` is admitted with ``cached`` tokens found in the cache; count the query."""
        if self._prefix is None:
            return
        self.counters.prefix_cache_queries += request.num_tokens
        self.counters.prefix_cache_hits += cached
        hits = cached // self.kv.block_size
        self._prefix.take(request.block_names[:hits])
        self._prefix.fit(self.kv.free)
        request.computed = cached

    def _release(self, request: Request) -> None:
        """Give ``request``'s blocks back; the cache keeps the names of its computed prompt."""
        self.kv.give_back(request.blocks)
        request.blocks = 0
        if self._prefix is not None and request.block_names:
            computed_blocks = request.computed // self.kv.block_size
            self._prefix.keep(request.block_names[:computed_blocks])

    def _preempt(self, request: Request, now: float) -> None:
        if request.decoding:
            self._stop_decoding(request, self._steps_done)
            # Its last token came out when the previous step ended.
            request.last_token_at = now
        else:
            del self._prefilling[request]
            self._unplan(request)
        del self._running[request]
        self._release(request)
        request.computed = 0
        request.epoch += 1
        request.num_preemptions += 1
        self.counters.preemptions += 1
        self._preempted_in_step = True
        self._waiting.prepend(request)

    def _unplan(self, request: Request) -> None:
        """Give back the chunk a preempted prefill was given in this step, if any.

        Only a priority victim can have one: under FCFS the victim is the newest running
        request, which the prefill loop has not reached yet.
        """
        for index, (planned, chunk) in enumerate(self._planned):
            if planned is request:
                del self._planned[index]
                self._planned_tokens -= chunk
                return

    def _budget_left(self) -> int:
        return self.settings.max_num_batched_tokens - self._num_decoding - self._planned_tokens

    def _prefill_cap(self, num_eligible: int) -> int:
        """``long_prefill_token_threshold`` as vLLM applies it this step (0: no cap)."""
        threshold = self.settings.long_prefill_token_threshold
        if num_eligible <= 1:
            return 0
        if threshold > 0 and self.settings.long_prefill_token_threshold_adaptive:
            threshold = max(threshold, self.settings.max_num_batched_tokens // num_eligible)
        return threshold

    def _defer_prefills(self) -> bool:
        interval = self.settings.prefill_schedule_interval
        return (
            interval > 1
            and not self._capacity_bound
            and self._executed_steps + 1 - self._last_prefill_step < interval
            and self._num_decoding > 0
        )

    # -- decode bookkeeping ------------------------------------------------------------

    def _start_decoding(self, request: Request, step: int) -> None:
        """``request`` sampled a token at the end of ``step`` and decodes from now on."""
        request.decoding = True
        request.decode_anchor_step = step
        self._num_decoding += 1
        self._context_base += request.prompt_tokens + request.generated - step - 2
        finish_step = step + request.max_tokens - request.generated
        heapq.heappush(
            self._finish_events, (finish_step, request.running_seq, request.epoch, request)
        )
        self._push_block_event(request)

    def _stop_decoding(self, request: Request, steps_done: int) -> None:
        """Take ``request`` out of the decoding set, making ``generated`` current."""
        anchor = request.decode_anchor_step
        self._context_base -= request.prompt_tokens + request.generated - anchor - 2
        self._num_decoding -= 1
        request.generated += steps_done - anchor
        request.decoding = False

    def _push_block_event(self, request: Request) -> None:
        """Schedule the step at which a decoding request needs its next block, if any."""
        anchor = request.decode_anchor_step
        capacity = request.blocks * self.kv.block_size
        # Before step m it needs prompt + generated + (m - 1 - anchor) slots.
        step = capacity - request.prompt_tokens - request.generated + anchor + 2
        finish_step = anchor + request.max_tokens - request.generated
        if step <= finish_step:
            heapq.heappush(self._block_events, (step, request.running_seq, request.epoch, request))

    def _finish(self, request: Request, now: float) -> FinishedRequest:
        del self._running[request]
        self._release(request)
        request.epoch += 1
        self.counters.finished["stop"] += 1
        return finished_record(request, now, Outcome.COMPLETED)


def _urgency(request: Request) -> tuple[int, float]:
    """The key vLLM's priority policy preempts by: the largest goes first."""
    return (request.priority, request.arrived_at)
