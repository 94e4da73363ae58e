from prometheus_client.parser import text_string_to_metric_families

from inferscale.perf import replica_profile
from inferscale.sim.engine import EngineConfig, ReplicaEngine
from inferscale.sim.exposition import render
from inferscale.sim.requests import Request


def families(text: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    out: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        out[fam.name] = [(s.name, s.labels, s.value) for s in fam.samples]
    return out


def test_an_engines_metrics_parse_as_vllm_exposes_them() -> None:
    engine = ReplicaEngine(EngineConfig.from_profile(replica_profile("llama-3.1-8b", "h100-80gb")))
    for i in range(20):
        engine.submit(Request(arrival=i * 0.01, input_tokens=500, output_tokens=50), now=i * 0.01)
    engine.advance(0.3)  # some finished, some still running
    fams = families(render(engine, "meta-llama/Llama-3.1-8B-Instruct"))

    running = fams["vllm:num_requests_running"][0]
    assert running[1] == {"engine": "0", "model_name": "meta-llama/Llama-3.1-8B-Instruct"}
    assert running[2] == engine.num_running
    assert fams["vllm:kv_cache_usage_perc"][0][2] == round(engine.kv_usage, 6)
    assert fams["vllm:request_success"][0][2] == engine.request_success_total

    ttft = {s[1].get("le"): s[2] for s in fams["vllm:time_to_first_token_seconds"] if s[0].endswith("_bucket")}
    counts = [ttft[le] for le in ttft]
    assert counts == sorted(counts), "buckets must be cumulative"
    assert ttft["+Inf"] == engine.ttft_count > 0
    total = next(s[2] for s in fams["vllm:time_to_first_token_seconds"] if s[0].endswith("_sum"))
    assert total == engine.ttft_sum

    engine.advance(10.0)  # all finished: one per-request TPOT observation each
    fams = families(render(engine, "meta-llama/Llama-3.1-8B-Instruct"))
    tpot = {
        s[1].get("le"): s[2] for s in fams["vllm:request_time_per_output_token_seconds"] if s[0].endswith("_bucket")
    }
    assert list(tpot.values()) == sorted(tpot.values())
    assert tpot["+Inf"] == sum(engine.tpot_buckets) == engine.request_success_total == 20
