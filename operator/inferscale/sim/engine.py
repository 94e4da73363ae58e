"""One vLLM replica: continuous batching with chunked prefill, a KV-token budget and recompute preemption.

The engine is event-to-event. While no request is prefilling and nothing can be admitted, every step
is a pure decode step whose cost only grows by `c_kv · running` per step, so the engine jumps straight
to the next completion (or KV exhaustion, or the caller's `until`) in closed form; decode sequences are
never touched one by one. Mixed steps (prefill chunks, admissions, preemptions) run one at a time:
their number grows with requests, not with tokens.

Scheduling follows vLLM V1: running requests first in admission order (a decode takes one token of the
`max_num_batched_tokens` budget, a prefill takes a chunk of the rest), then the FCFS waiting queue while
seats (`max_num_seqs`), budget and KV blocks last. When the running requests cannot grow, the newest
one is preempted, frees its KV and goes back to the head of the queue to recompute prompt + output.

The same object serves the live emulator: `submit`/`advance` in wall-clock seconds, plus cumulative
counters and gauges with vLLM's meaning (see `exposition.render_metrics`).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass
from typing import Any

from inferscale.perf.catalog import model_spec
from inferscale.perf.errors import UnknownModel
from inferscale.perf.steptime import StepCoefficients
from inferscale.sim.requests import Request
from inferscale.sim.vllm_buckets import ITL_BUCKETS, TTFT_BUCKETS

_INF = math.inf


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """What a replica's scheduler and step-time model need; built from a `perf.ReplicaProfile`."""

    kv_capacity_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    c0: float  # seconds per step
    c_prefill: float  # seconds per prefill token
    c_decode: float  # seconds per decoding sequence
    c_kv: float = 0.0  # seconds per context token read by decoding sequences
    max_model_len: int | None = None  # prompt + output vLLM accepts (the model's context); None: no limit

    def __post_init__(self) -> None:
        for name in ("kv_capacity_tokens", "max_num_seqs", "max_num_batched_tokens", "block_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"EngineConfig.{name} must be positive, got {getattr(self, name)}")
        if self.c0 <= 0 or min(self.c_prefill, self.c_decode, self.c_kv) < 0:
            raise ValueError("EngineConfig step coefficients must be non-negative and c0 positive")
        if self.max_model_len is not None and self.max_model_len <= 0:
            raise ValueError(f"EngineConfig.max_model_len must be positive, got {self.max_model_len}")
        if self.max_num_seqs > self.max_num_batched_tokens:
            raise ValueError("max_num_seqs above max_num_batched_tokens would starve decodes of the token budget")

    @classmethod
    def from_profile(cls, profile: Any) -> EngineConfig:
        """From `inferscale.perf.ReplicaProfile` (duck-typed so tests can pass a plain namespace)."""
        step = profile.step
        return cls(
            kv_capacity_tokens=int(profile.kv_capacity_tokens),
            max_num_seqs=int(profile.max_num_seqs),
            max_num_batched_tokens=int(profile.max_num_batched_tokens),
            block_size=int(profile.block_size),
            c0=float(step.c0),
            c_prefill=float(step.c_prefill),
            c_decode=float(step.c_decode),
            c_kv=float(getattr(step, "c_kv", 0.0) or 0.0),
            max_model_len=_context_of(getattr(profile, "model", None)),
        )

    @property
    def step(self) -> StepCoefficients:
        """The step-time model this engine runs (its hot loop inlines the same sum)."""
        return StepCoefficients(self.c0, self.c_prefill, self.c_decode, self.c_kv, "engine")

    @property
    def longest_request(self) -> int:
        """Prompt + output tokens above which the engine refuses a request: beyond the model's context (vLLM
        answers 400), or a request that could never fit the KV cache."""
        fits = self.longest_in_cache
        return fits if self.max_model_len is None else min(fits, self.max_model_len)

    def refuses(self, input_tokens: Any, output_tokens: Any) -> Any:
        """Whether the engine refuses a request of these lengths (`longest_request`); elementwise on arrays."""
        return input_tokens + output_tokens > self.longest_request

    @property
    def longest_in_cache(self) -> int:
        """Prompt + output tokens one replica's KV cache holds: a block short of its capacity."""
        return self.kv_capacity_tokens - self.block_size


def _context_of(model: object) -> int | None:
    """The catalog's context window of `model`; None for a name the catalog does not know (a test's profile)."""
    if not isinstance(model, str):
        return None
    try:
        return model_spec(model).context_tokens
    except UnknownModel:
        return None


class Outcomes:
    """Per-request results of an offline run, indexed by request id. NaN = not (yet) known."""

    __slots__ = ("finished_at", "itl", "ttft")

    def __init__(self, n: int) -> None:
        self.ttft = [math.nan] * n
        self.itl = [math.nan] * n  # mean ITL; stays NaN for one-token outputs (no inter-token gap)
        self.finished_at = [math.nan] * n


class _Seq:
    __slots__ = (
        "arrival",
        "computed",
        "first_token_at",
        "g0",
        "generated",
        "heap_key",
        "input_tokens",
        "k0",
        "key",
        "last_token_at",
        "output_tokens",
        "prefill_left",
        "rid",
        "s0",
    )

    def __init__(self, arrival: float, input_tokens: int, output_tokens: int, rid: int, key: int) -> None:
        self.arrival = arrival
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.rid = rid
        self.key = key
        self.prefill_left = input_tokens
        self.computed = 0  # KV tokens held while prefilling
        self.generated = 0
        self.first_token_at = _INF
        self.last_token_at = _INF
        self.s0 = -1  # engine step count when it joined decode; -1 while not decoding
        self.k0 = 0  # KV tokens when it joined decode
        self.g0 = 0  # tokens generated when it joined decode
        self.heap_key = -1


class ReplicaEngine:
    """A vLLM engine core. Time only moves forward through `advance` and `submit`."""

    def __init__(self, cfg: EngineConfig, outcomes: Outcomes | None = None, now: float = 0.0) -> None:
        self.cfg = cfg
        self.outcomes = outcomes
        self.now = now  # end of the step in flight (or the idle clock)
        # Earliest time the number of outstanding requests can change: the router trusts `outstanding`
        # of an engine whose horizon is later than the arrival it is placing.
        self.horizon = _INF
        self.outstanding = 0  # submitted, not finished (running + waiting)
        self._half_block = cfg.block_size // 2  # the mean unused tail of each sequence's last block
        self._waiting: deque[_Seq] = deque()
        self._running: dict[int, _Seq] = {}  # admission order: popitem() yields the preemption victim
        self._prefilling: list[_Seq] = []
        self._heap: list[tuple[int, int, _Seq]] = []  # (finish step, heap key, seq) of decoding seqs
        self._keys = 0
        self._steps = 0  # steps run so far: a decoding sequence gains one token per step
        self._n_decode = 0
        self._decode_offset = 0  # Σ (k0 − s0) over decoding seqs: their KV = offset + n_decode · steps
        self._prefill_kv = 0  # Σ computed over prefilling seqs
        # Submitted since the step in flight was scheduled: vLLM's core holds them in its input queue, outside
        # the scheduler's waiting list that num_requests_waiting counts, until the next step's scheduling.
        self._arrived_in_step = 0
        # Cumulative counters, as vLLM exports them.
        self.busy_seconds = 0.0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.request_success_total = 0
        self.num_preemptions_total = 0
        self.rejected_total = 0  # prompts that can never fit the KV cache (vLLM refuses them)
        self.last_finish_at: float | None = None
        # Requests finished at `last_finish_at`: when that is the end of the step in flight (past the time the router
        # asks at), they are still in flight then (`outstanding_at`).
        self._finished_last = 0
        self.ttft_buckets = [0] * (len(TTFT_BUCKETS) + 1)
        self.ttft_sum = 0.0
        self.ttft_count = 0
        self.itl_buckets = [0] * (len(ITL_BUCKETS) + 1)
        self.itl_sum = 0.0
        self.itl_count = 0
        # vllm:request_time_per_output_token_seconds: one observation per finished request, its mean ITL
        self.tpot_buckets = [0] * (len(ITL_BUCKETS) + 1)
        self.tpot_sum = 0.0

    # -- gauges ---------------------------------------------------------------------------------------

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        """`vllm:num_requests_waiting`: what the last step's scheduling left waiting (preempted included)."""
        return len(self._waiting) - self._arrived_in_step

    @property
    def kv_used_tokens(self) -> int:
        if not self._running:
            return 0
        kv = self._prefill_kv + self._decode_offset + self._n_decode * self._steps
        return kv + len(self._running) * self._half_block

    @property
    def kv_usage(self) -> float:
        """`vllm:kv_cache_usage_perc`: fraction of KV blocks in use, 0..1."""
        return min(1.0, self.kv_used_tokens / self.cfg.kv_capacity_tokens)

    def outstanding_at(self, t: float) -> int:
        """Requests in flight at `t` (no earlier than the last `advance`'s `until`): `outstanding` and the ones the
        step in flight finishes at its end past `t`, which a router at `t` still counts (their responses are not
        complete). Whether the engine was advanced past `t` then does not change what a router sees."""
        last = self.last_finish_at
        return self.outstanding + (self._finished_last if last is not None and last > t else 0)

    @property
    def idle(self) -> bool:
        return self.outstanding == 0

    # -- the two entry points -------------------------------------------------------------------------

    def submit(self, req: Request, now: float, rid: int = -1) -> None:
        """Queue `req` at time `now`; it joins the batch at the next step boundary. TTFT counts from
        `req.arrival`, so time spent in a router queue before `now` is part of it."""
        self.submit_tokens(req.arrival, req.input_tokens, req.output_tokens, now, rid)

    def submit_tokens(self, arrival: float, input_tokens: int, output_tokens: int, now: float, rid: int = -1) -> None:
        """`submit` without building a Request: the offline replay's hot path."""
        if now > self.now:
            self.advance(now)
        if self.cfg.refuses(input_tokens, output_tokens):
            self.rejected_total += 1  # vLLM refuses a prompt that can never fit; the run counts it as a miss
            return
        self._keys += 1
        self.outstanding += 1
        self._waiting.append(_Seq(arrival, input_tokens, output_tokens, rid, self._keys))
        self._arrived_in_step += 1
        self.horizon = self.now  # the new request may be admitted in the very next step

    def advance(self, until: float) -> None:
        """Run every step that starts before `until`. `now` may end past `until` (a step in flight)."""
        while self.now < until:
            if not self._running and not self._waiting:
                self.now = until
                break
            if self._prefilling or self._admissible():
                self._mixed_step()
                continue
            k = self._decode_steps_before(until)
            if k == 0:
                self._mixed_step()  # KV is full: this step preempts
            else:
                self._jump(k)
        self._update_horizon()

    # -- internals ------------------------------------------------------------------------------------

    def _kv_raw(self) -> int:
        return self._prefill_kv + self._decode_offset + self._n_decode * self._steps

    def _admissible(self) -> bool:
        if not self._waiting or len(self._running) >= self.cfg.max_num_seqs:
            return False
        budget = self.cfg.max_num_batched_tokens - self._n_decode
        if budget <= 0:
            return False
        head = self._waiting[0]
        chunk = min(head.prefill_left, budget)
        used = self._kv_raw() + (len(self._running) + 1) * self._half_block + self._n_decode
        return used + chunk <= self.cfg.kv_capacity_tokens

    def _step_sum(self, k: int, first: float) -> float:
        """Duration of k pure decode steps, the first costing `first`: each is c_kv · n_decode longer."""
        return k * first + self.cfg.c_kv * self._n_decode * (k * (k - 1) / 2)

    def _decode_steps_before(self, until: float) -> int:
        """How many pure decode steps to jump: up to the next completion, the KV limit, or `until`."""
        cfg = self.cfg
        n = self._n_decode
        k_finish = self._heap[0][0] - self._steps
        free = cfg.kv_capacity_tokens - self._kv_raw() - len(self._running) * self._half_block
        k_kv = free // n
        k = min(k_finish, k_kv)
        if k <= 0:
            return 0
        first = cfg.c0 + cfg.c_decode * n + cfg.c_kv * (self._decode_offset + n * self._steps)
        remaining = until - self.now
        # Steps j = 0..k-1 start at now + S(j); keep those starting before `until`.
        q = cfg.c_kv * n / 2
        if q <= 0:
            k_until = math.ceil(remaining / first)
        else:
            b = first - q
            k_until = math.ceil((-b + math.sqrt(b * b + 4 * q * remaining)) / (2 * q))
            while k_until > 1 and self._step_sum(k_until - 1, first) >= remaining:
                k_until -= 1
            while self._step_sum(k_until, first) < remaining:
                k_until += 1
        return max(1, min(k, k_until))

    def _jump(self, k: int) -> None:
        self._arrived_in_step = 0  # each of the k steps' scheduling sees the whole waiting list
        cfg = self.cfg
        n = self._n_decode
        first = cfg.c0 + cfg.c_decode * n + cfg.c_kv * (self._decode_offset + n * self._steps)
        dt = self._step_sum(k, first)
        self._observe_itl_run(first, cfg.c_kv * n, k, n)
        self._steps += k
        self.generation_tokens_total += n * k
        self.busy_seconds += dt
        self.now += dt
        self._complete_decodes()

    def _observe_itl_run(self, first: float, slope: float, k: int, n: int) -> None:
        """n sequences each observe the k step durations first, first + slope, ..."""
        buckets = self.itl_buckets
        last = first + slope * (k - 1)
        lo = bisect_left(ITL_BUCKETS, first)
        hi = bisect_left(ITL_BUCKETS, last)
        if lo == hi or slope <= 0:
            buckets[lo] += n * k
        else:
            placed = 0
            for i in range(lo, hi):
                upto = min(k, math.floor((ITL_BUCKETS[i] - first) / slope) + 1)  # steps with duration <= bound
                buckets[i] += n * (upto - placed)
                placed = upto
            buckets[hi] += n * (k - placed)
        self.itl_sum += n * (k * first + slope * k * (k - 1) / 2)
        self.itl_count += n * k

    def _preempt_newest(self) -> _Seq:
        _, seq = self._running.popitem()
        if seq.s0 >= 0:
            generated = seq.g0 + (self._steps - seq.s0)
            self._n_decode -= 1
            self._decode_offset -= seq.k0 - seq.s0
            seq.generated = generated
            seq.last_token_at = self.now  # its last token came out of the step that just ended
            seq.s0 = -1
            seq.heap_key = -1  # its heap entry is now stale
        else:
            self._prefill_kv -= seq.computed
            self._prefilling.remove(seq)
        seq.computed = 0
        seq.prefill_left = seq.input_tokens + seq.generated  # recompute prompt and output so far
        self._waiting.appendleft(seq)
        self.num_preemptions_total += 1
        return seq

    def _mixed_step(self) -> None:
        self._arrived_in_step = 0
        cfg = self.cfg
        cap = cfg.kv_capacity_tokens
        half = self._half_block
        # Running requests first: decodes need one KV slot each, prefills their next chunk.
        while True:
            budget = cfg.max_num_batched_tokens - self._n_decode
            chunks: list[tuple[_Seq, int]] = []
            need = self._n_decode
            for seq in self._prefilling:
                if budget <= 0:
                    break
                c = min(seq.prefill_left, budget)
                chunks.append((seq, c))
                budget -= c
                need += c
            if self._kv_raw() + need + len(self._running) * half <= cap or not self._running:
                break
            self._preempt_newest()
        # Then the waiting queue, FCFS, while seats, budget and KV last.
        used = self._kv_raw() + need + len(self._running) * half
        waiting = self._waiting
        while waiting and budget > 0 and len(self._running) < cfg.max_num_seqs:
            head = waiting[0]
            c = min(head.prefill_left, budget)
            if used + c + half > cap:
                break
            waiting.popleft()
            self._running[head.key] = head
            self._prefilling.append(head)
            chunks.append((head, c))
            budget -= c
            used += c + half
        n = self._n_decode
        prefill_tokens = cfg.max_num_batched_tokens - n - budget
        dt = cfg.c0 + cfg.c_prefill * prefill_tokens + cfg.c_decode * n + cfg.c_kv * self._kv_raw()
        if n:
            self._observe_itl_run(dt, 0.0, 1, n)
            self.generation_tokens_total += n
        self._steps += 1
        end = self.now + dt
        self.busy_seconds += dt
        self.now = end
        for seq, c in chunks:
            seq.computed += c
            seq.prefill_left -= c
            self._prefill_kv += c
            if seq.prefill_left == 0:
                self._prefill_done(seq, end)
        self._complete_decodes()

    def _prefill_done(self, seq: _Seq, end: float) -> None:
        self._prefilling.remove(seq)
        self._prefill_kv -= seq.computed
        if seq.generated == 0:
            ttft = end - seq.arrival
            seq.first_token_at = end
            self.prompt_tokens_total += seq.input_tokens
            self.ttft_buckets[bisect_left(TTFT_BUCKETS, ttft)] += 1
            self.ttft_sum += ttft
            self.ttft_count += 1
            if self.outcomes is not None and seq.rid >= 0:
                self.outcomes.ttft[seq.rid] = ttft
        else:  # resumed after a preemption: the gap since its last token is one (long) inter-token latency
            gap = end - seq.last_token_at
            self.itl_buckets[bisect_left(ITL_BUCKETS, gap)] += 1
            self.itl_sum += gap
            self.itl_count += 1
        seq.generated += 1
        seq.last_token_at = end
        self.generation_tokens_total += 1
        if seq.generated >= seq.output_tokens:
            del self._running[seq.key]
            self._finish(seq, end)
            return
        seq.s0 = self._steps
        seq.k0 = seq.computed
        seq.g0 = seq.generated
        self._n_decode += 1
        self._decode_offset += seq.k0 - seq.s0
        self._keys += 1
        seq.heap_key = self._keys
        heapq.heappush(self._heap, (seq.s0 + seq.output_tokens - seq.generated, self._keys, seq))

    def _complete_decodes(self) -> None:
        heap = self._heap
        steps = self._steps
        end = self.now
        while heap and heap[0][0] <= steps:
            _, key, seq = heapq.heappop(heap)
            if key != seq.heap_key:
                continue  # preempted since it was pushed
            self._n_decode -= 1
            self._decode_offset -= seq.k0 - seq.s0
            seq.s0 = -1
            seq.generated = seq.output_tokens
            seq.last_token_at = end
            del self._running[seq.key]
            self._finish(seq, end)
        # Drop stale heads so `_decode_steps_before` always sees a live sequence on top.
        while heap and heap[0][1] != heap[0][2].heap_key:
            heapq.heappop(heap)

    def _finish(self, seq: _Seq, end: float) -> None:
        self._finished_last = self._finished_last + 1 if end == self.last_finish_at else 1
        self.last_finish_at = end
        self.outstanding -= 1
        self.request_success_total += 1
        tpot = (end - seq.first_token_at) / (seq.output_tokens - 1) if seq.output_tokens > 1 else None
        # vLLM observes every finished request, a one-token answer as 0 (v1/metrics/stats.py)
        self.tpot_buckets[bisect_left(ITL_BUCKETS, tpot or 0.0)] += 1
        self.tpot_sum += tpot or 0.0
        out = self.outcomes
        if out is not None and seq.rid >= 0:
            out.finished_at[seq.rid] = end
            if tpot is not None:
                out.itl[seq.rid] = tpot

    def _update_horizon(self) -> None:
        if not self._running and not self._waiting:
            self.horizon = _INF
        elif self._prefilling or self._admissible() or not self._heap:
            self.horizon = self.now
        else:
            cfg = self.cfg
            n = self._n_decode
            free = cfg.kv_capacity_tokens - self._kv_raw() - len(self._running) * self._half_block
            k = min(self._heap[0][0] - self._steps, free // n)
            first = cfg.c0 + cfg.c_decode * n + cfg.c_kv * (self._decode_offset + n * self._steps)
            self.horizon = self.now + self._step_sum(max(k, 0), first)
