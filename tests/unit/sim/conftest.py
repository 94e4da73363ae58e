from __future__ import annotations

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
