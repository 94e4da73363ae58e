"""Pure performance model: catalog, KV memory, step time and capacity at an SLO. No I/O, no clock."""

from inferscale.perf.capacity import OperatingPoint, max_concurrency, operating_point, replica_capacity_rps
from inferscale.perf.catalog import GPUSpec, ModelSpec, gpu_spec, known_gpus, known_models, model_spec
from inferscale.perf.chunking import EngineLimits, PrefillStep, advice, prefill_step
from inferscale.perf.errors import DoesNotFit, InvalidParallelism, PerfError, UnknownGPU, UnknownModel
from inferscale.perf.memory import MemoryBreakdown, kv_bytes_per_token
from inferscale.perf.profile import ReplicaProfile, replica_memory, replica_profile
from inferscale.perf.steptime import StepCoefficients

__all__ = [
    "DoesNotFit",
    "EngineLimits",
    "GPUSpec",
    "InvalidParallelism",
    "MemoryBreakdown",
    "ModelSpec",
    "OperatingPoint",
    "PerfError",
    "PrefillStep",
    "ReplicaProfile",
    "StepCoefficients",
    "UnknownGPU",
    "UnknownModel",
    "advice",
    "gpu_spec",
    "known_gpus",
    "known_models",
    "kv_bytes_per_token",
    "max_concurrency",
    "model_spec",
    "operating_point",
    "prefill_step",
    "replica_capacity_rps",
    "replica_memory",
    "replica_profile",
]
