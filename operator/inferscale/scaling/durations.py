"""Durations as users write them in specs and on the command line: `500ms`, `30s`, `5m`, `1h30m`."""

from __future__ import annotations

import math
import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# ASCII digits: Python's \d also takes other scripts' ("٥s"), which the API server's RE2 does not
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
# Mirrors the CRD's pattern so the CLI and the API server accept the same strings.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"


def parse_duration(text: str) -> float:
    """Seconds in `text`; raises ValueError naming the text and the accepted form."""
    if not isinstance(text, str):
        raise ValueError(f"duration must be a string such as '500ms', '30s' or '5m', not {text!r}")
    s = text.strip()
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s) or not math.isfinite(total):
        raise ValueError(
            f"invalid duration {text!r}: use a number with a unit ms, s, m or h, such as '500ms', '30s', '5m', '1h30m'"
        )
    return total


def format_duration(seconds: float) -> str:
    """A short human form: 0.4123 -> '412ms', 95 -> '1m35s', 420 -> '7m', 5400 -> '1h30m'."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"cannot format duration {seconds!r}")
    if 0 < seconds < 0.0005:  # would round to "0ms", which reads as no value; fixed point, as parse reads it
        ms = seconds * 1000
        return f"{ms:.{1 - math.floor(math.log10(ms))}f}".rstrip("0").rstrip(".") + "ms"
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.3g}s" if seconds < 10 and seconds != int(seconds) else f"{round(seconds)}s"
    whole = round(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"
