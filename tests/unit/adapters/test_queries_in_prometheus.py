"""The operator's PromQL evaluated by Prometheus's own engine (`promtool test rules`), on series shaped like a
fleet's: a pod scraped twice (a ServiceMonitor and a PodMonitor, or two Prometheus replicas without
deduplication) must read as once, while the series vLLM itself tells apart (data-parallel engines, finished
reasons, buckets) still add up."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from tests.unit.ship.helpers import tool

from inferscale.adapters.prometheus import FAMILY, build_queries, build_rate_history_query

POD = 'namespace="llm",pod="llm-7d9f8c6b5-x2x4q",model_name="m"'
SCRAPES = ('job="pods"', 'job="service",instance="10.0.0.7:8000"')  # one exporter, scraped twice


def _twice(series: str, values: str) -> list[dict[str, str]]:
    name, labels = series.split("{", 1)
    return [{"series": f"{name}{{{labels[:-1]},{scrape}}}", "values": values} for scrape in SCRAPES]


# 15-s samples for 10 minutes; counters grow at the rate (per second) in the comment
INPUT = [
    *_twice(f'vllm:num_requests_waiting{{{POD},engine="0"}}', "3x40"),
    *_twice(f'vllm:num_requests_waiting{{{POD},engine="1"}}', "2x40"),
    *_twice(f'vllm:kv_cache_usage_perc{{{POD},engine="0"}}', "0.5x40"),
    *_twice(f'vllm:request_success_total{{{POD},engine="0",finished_reason="stop"}}', "0+15x40"),  # 1/s
    *_twice(f'vllm:request_success_total{{{POD},engine="0",finished_reason="length"}}', "0+30x40"),  # 2/s
    *_twice(f'vllm:request_success_total{{{POD},engine="1",finished_reason="stop"}}', "0+15x40"),  # 1/s
    # a label of the engine's that inferscale does not know (SGLang's is_streaming, say): its series add up
    *_twice(f'sglang:num_requests_total{{{POD},is_streaming="true"}}', "0+15x40"),  # 1/s
    *_twice(f'sglang:num_requests_total{{{POD},is_streaming="false"}}', "0+15x40"),  # 1/s
    *_twice(f'vllm:time_to_first_token_seconds_bucket{{{POD},engine="0",le="0.1"}}', "0+15x40"),  # 1/s
    *_twice(f'vllm:time_to_first_token_seconds_bucket{{{POD},engine="0",le="+Inf"}}', "0+30x40"),  # 2/s
]


def _expect(promql: str, samples: list[tuple[str, float]]) -> dict[str, Any]:
    return {
        "expr": promql,
        "eval_time": "5m",
        "exp_samples": [{"labels": labels, "value": value} for labels, value in samples],
    }


def _evaluate(
    tmp_path: Path, cases: list[dict[str, Any]], series: list[dict[str, str]] | None = None
) -> subprocess.CompletedProcess[str]:
    promtool = tool("promtool", "make setup (Debian's prometheus)")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": []}))
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": series or INPUT, "promql_expr_test": cases}],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))
    return subprocess.run([promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True)


def test_a_pod_scraped_twice_reads_as_once_and_its_engines_and_reasons_add_up(tmp_path: Path) -> None:
    q = build_queries(tpot=False)
    cases = [
        _expect(
            q["gauges"],
            [
                (f'{{{POD},engine="0",{FAMILY}="vllm:num_requests_waiting"}}', 3),
                (f'{{{POD},engine="1",{FAMILY}="vllm:num_requests_waiting"}}', 2),
                (f'{{{POD},engine="0",{FAMILY}="vllm:kv_cache_usage_perc"}}', 0.5),
            ],
        ),
        # 1 + 2 (engine 0's two reasons) + 1 (engine 1), each scraped twice: 4, not 8
        # vLLM's first, SGLang's (the same pod, in this test only) tagged with its dialect
        _expect(q["requests"], [(f"{{{POD}}}", 4), (f'{{{POD},dialect="sglang"}}', 2)]),
        _expect(
            q["ttft_buckets"],
            [(f'{{{POD},le="0.1"}}', 1), (f'{{{POD},le="+Inf"}}', 2)],
        ),
        _expect(
            build_rate_history_query(),
            [
                ('{namespace="llm",model_name="m",inferscale_deployment="llm"}', 4),
                ('{namespace="llm",model_name="m",inferscale_deployment="llm",dialect="sglang"}', 2),
            ],
        ),
    ]
    result = _evaluate(tmp_path, cases)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_deployment_mid_rollout_between_sglang_builds_counts_every_pod_once(tmp_path: Path) -> None:
    # a newer build exports num_requests_total and the e2e histogram, an older one only the histogram's count:
    # each pod is read from one counter, the Deployment's rate is both pods'
    newer, older = (
        'namespace="llm",pod="sg-7d9f8c6b5-x2x4q",model_name="m"',
        'namespace="llm",pod="sg-7d9f8c6b5-b7kqz",model_name="m"',
    )
    series = [
        {"series": f"sglang:num_requests_total{{{newer}}}", "values": "0+15x40"},  # 1/s
        {"series": f"sglang:e2e_request_latency_seconds_count{{{newer}}}", "values": "0+15x40"},  # the same requests
        {"series": f"sglang:e2e_request_latency_seconds_count{{{older}}}", "values": "0+15x40"},  # 1/s
    ]
    cases = [
        _expect(
            build_queries(tpot=False)["requests"],
            [(f'{{{newer},dialect="sglang"}}', 1), (f'{{{older},dialect="sglang"}}', 1)],
        ),
        _expect(
            build_rate_history_query(),
            [('{namespace="llm",model_name="m",inferscale_deployment="sg",dialect="sglang"}', 2)],
        ),
    ]
    result = _evaluate(tmp_path, cases, series)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_prefix_cache_s_share_of_the_prompts_rides_in_the_prompt_query_set_apart(tmp_path: Path) -> None:
    sglang = 'namespace="llm",pod="sg-7d9f8c6b5-b7kqz",model_name="m"'
    series = [
        *_twice(f"vllm:prompt_tokens_total{{{POD}}}", "0+15000x40"),  # 1,000/s
        *_twice(f"vllm:prompt_tokens_cached_total{{{POD}}}", "0+9000x40"),  # 600/s
        *_twice(f"vllm:prefix_cache_hits_total{{{POD}}}", "0+12000x40"),  # per lookup: not read
        {"series": f"sglang:prompt_tokens_total{{{sglang}}}", "values": "0+3000x40"},  # 200/s
        {"series": f"sglang:cached_tokens_total{{{sglang}}}", "values": "0+1500x40"},  # 100/s
    ]
    cases = [
        _expect(
            build_queries(tpot=False)["prompt_tokens"],
            [
                (f"{{{POD}}}", 1000),
                (f'{{{POD},inferscale_part="cached"}}', 600),
                (f'{{{sglang},dialect="sglang"}}', 200),
                (f'{{{sglang},dialect="sglang",inferscale_part="cached"}}', 100),
            ],
        )
    ]
    result = _evaluate(tmp_path, cases, series)
    assert result.returncode == 0, result.stdout + result.stderr
