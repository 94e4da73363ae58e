"""One simulated engine's metrics in vLLM's Prometheus text format (names, labels, buckets), so the
live emulator's pods look to Prometheus and the operator exactly like vLLM pods."""

from __future__ import annotations

from collections.abc import Sequence

from inferscale.sim.engine import ReplicaEngine
from inferscale.sim.vllm_buckets import ITL_BUCKETS, TTFT_BUCKETS


def _histogram(name: str, labels: str, bounds: Sequence[float], counts: Sequence[int], total: float) -> list[str]:
    # The engine counts per bucket (the last slot is above the highest bound); Prometheus wants cumulative.
    lines = [f"# TYPE {name} histogram"]
    acc = 0
    for le, n in zip(bounds, counts, strict=False):
        acc += n
        lines.append(f'{name}_bucket{{{labels},le="{le}"}} {acc}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {sum(counts)}')
    lines.append(f"{name}_sum{{{labels}}} {total}")
    lines.append(f"{name}_count{{{labels}}} {sum(counts)}")
    return lines


def render(engine: ReplicaEngine, model_name: str) -> str:
    labels = f'engine="0",model_name="{model_name}"'
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{labels}}} {engine.num_running}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{labels}}} {engine.num_waiting}",
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{labels}}} {engine.kv_usage:.6f}",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{labels}}} {engine.prompt_tokens_total}",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{labels}}} {engine.generation_tokens_total}",
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{{labels},finished_reason="stop"}} {engine.request_success_total}',
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{labels}}} {engine.num_preemptions_total}",
    ]
    lines += _histogram("vllm:time_to_first_token_seconds", labels, TTFT_BUCKETS, engine.ttft_buckets, engine.ttft_sum)
    lines += _histogram("vllm:inter_token_latency_seconds", labels, ITL_BUCKETS, engine.itl_buckets, engine.itl_sum)
    lines += _histogram(
        "vllm:request_time_per_output_token_seconds", labels, ITL_BUCKETS, engine.tpot_buckets, engine.tpot_sum
    )
    return "\n".join(lines) + "\n"
