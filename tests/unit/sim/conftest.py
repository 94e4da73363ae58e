from __future__ import annotations

from pathlib import Path

import pytest

from inferscale.sim.engine import EngineConfig


@pytest.fixture
def engine_cfg() -> EngineConfig:
    """Round numbers: 5 ms per step, 10 µs per prefill token, 1 ms per decoding sequence, no KV term."""
    return EngineConfig(
        kv_capacity_tokens=100_000,
        max_num_seqs=64,
        max_num_batched_tokens=2048,
        block_size=16,
        c0=0.005,
        c_prefill=10e-6,
        c_decode=1e-3,
        c_kv=0.0,
    )


@pytest.fixture
def azure_trace(tmp_path: Path) -> Path:
    """Ten minutes of 2 requests/s."""
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens\n"]
    for i in range(1200):
        m, s = divmod(i * 0.5, 60)
        lines.append(f"2023-11-16 18:{10 + int(m):02d}:{s:09.6f},{300 + 7 * (i % 50)},{20 + i % 40}\n")
    path = tmp_path / "azure.csv"
    path.write_text("".join(lines))
    return path
