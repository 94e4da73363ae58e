"""The PromQL reader's answers as the operator consumes them (the queries themselves run against the
real Prometheus in tests/e2e)."""

import asyncio
from typing import Any

from inferscale.adapters.prometheus import PrometheusReader, build_rate_history_query


class RangeAnswer:
    def __init__(self, result: list[dict[str, Any]]) -> None:
        self.result = result
        self.queries: list[str] = []

    def custom_query_range(self, query: str, **_: Any) -> list[dict[str, Any]]:
        self.queries.append(query)
        return self.result


def series(ns: str, model: str, points: list[tuple[float, str]], **labels: str) -> dict[str, Any]:
    return {"metric": {"namespace": ns, "model_name": model, **labels}, "values": [[t, v] for t, v in points]}


def test_rate_history_adds_both_dialects_of_one_model_and_drops_non_finite_points() -> None:
    reader = PrometheusReader("http://127.0.0.1:1")
    fake = RangeAnswer(
        [
            series("llm", "m", [(60.0, "2"), (120.0, "3"), (180.0, "NaN")]),
            series("llm", "m", [(120.0, "1"), (180.0, "4")], dialect="sglang"),
            series("other", "m", [(60.0, "7")]),
        ]
    )
    reader._client = fake  # type: ignore[assignment]
    out = asyncio.run(reader.rate_history(0.0, 180.0))
    assert out[("llm", "m")] == [(60.0, 2.0), (120.0, 4.0), (180.0, 4.0)]
    assert out[("other", "m")] == [(60.0, 7.0)]
    assert fake.queries == [build_rate_history_query()] and reader.queries_sent == 1
    assert "sglang:num_requests_total" in fake.queries[0]
