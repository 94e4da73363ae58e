"""Pure decision code: observation -> per-signal recommendations -> guards -> Decision.

No I/O and no clock reads: time is an argument. The operator and the simulator call `decide`
every tick with the state read back from status (`state_from_status`) and store the new state
(`state_to_status`).
"""

from inferscale.scaling.decide import decide
from inferscale.scaling.forecast import Forecast, forecast
from inferscale.scaling.inputs import validate_policy
from inferscale.scaling.state import state_from_status, state_to_status
from inferscale.scaling.types import (
    CapacityLow,
    Decision,
    LastTick,
    MetricsState,
    Observation,
    Policy,
    RateSample,
    Reason,
    Recommendation,
    Release,
    ScaleEvent,
    ScalerState,
    ScaleRule,
    Schedule,
    TimedReplicas,
)

__all__ = [
    "CapacityLow",
    "Decision",
    "Forecast",
    "LastTick",
    "MetricsState",
    "Observation",
    "Policy",
    "RateSample",
    "Reason",
    "Recommendation",
    "Release",
    "ScaleEvent",
    "ScaleRule",
    "ScalerState",
    "Schedule",
    "TimedReplicas",
    "decide",
    "forecast",
    "state_from_status",
    "state_to_status",
    "validate_policy",
]
