"""The batch limits a Deployment's model server runs with, read from its containers' command and args."""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from inferscale.perf.chunking import ENGINE_FLAGS, UNCHUNKED


def _tokens(container: Mapping[str, Any]) -> Iterator[str]:
    for part in [*(container.get("command") or []), *(container.get("args") or [])]:
        if not isinstance(part, str):
            continue
        # `sh -c "vllm serve ... --max-num-seqs 256"` carries the flags inside one string
        try:
            yield from shlex.split(part) if any(c.isspace() for c in part) else [part]
        except ValueError:  # unbalanced quotes: vLLM would not start either; read the words
            yield from part.split()


# GPUs per replica: vLLM's --tensor-parallel-size (or -tp), SGLang's --tp-size (or --tensor-parallel-size)
TP_FLAGS = {"vllm": ("--tensor-parallel-size", "-tp"), "sglang": ("--tp-size", "--tensor-parallel-size")}


def _value(tokens: list[str], flag: str, off: bool = False) -> int | None:
    """The flag's positive value; with `off`, also -1, which turns SGLang's chunked prefill off."""
    spellings = (flag, "--" + flag[2:].replace("-", "_")) if flag.startswith("--") else (flag,)  # both spellings
    for i, tok in enumerate(tokens):
        for spelling in spellings:
            if tok == spelling and i + 1 < len(tokens):
                text = tokens[i + 1]
            elif tok.startswith(spelling + "="):
                text = tok[len(spelling) + 1 :]
            else:
                continue
            value = _int(text)
            return value if value is not None and (value > 0 or (off and value == UNCHUNKED)) else None
    return None


def _int(text: str) -> int | None:
    """The value as vLLM's argparse reads it (`int()`: '+8', '1_024' and other scripts' digits pass;
    '²' is a digit int() refuses, which took down every tick of the service)."""
    try:
        return int(text)
    except ValueError:
        return None


def engine_limits(deployment: Mapping[str, Any] | None, engine: str = "vllm") -> dict[str, int]:
    """{"max_num_seqs": n, "max_num_batched_tokens": n, "tensor_parallel": n} for the flags the first container
    that sets any of them gives (`engine`'s names: vLLM's --max-num-seqs and --max-num-batched-tokens, SGLang's
    --max-running-requests and --chunked-prefill-size); a flag absent or not a positive integer is left out
    (the default applies). SGLang's --chunked-prefill-size -1 (chunking off) is the budget `UNCHUNKED`."""
    _, budget, seats = ENGINE_FLAGS[engine]
    flags = {"max_num_seqs": seats, "max_num_batched_tokens": budget}
    template = ((deployment or {}).get("spec") or {}).get("template") or {}
    for container in (template.get("spec") or {}).get("containers") or []:
        if not isinstance(container, Mapping):
            continue
        tokens = list(_tokens(container))
        found = {name: _value(tokens, flag, off=engine == "sglang") for name, flag in flags.items()}
        found["tensor_parallel"] = next(
            (v for v in (_value(tokens, f) for f in TP_FLAGS.get(engine, ())) if v is not None), None
        )
        if any(v is not None for v in found.values()):
            return {k: v for k, v in found.items() if v is not None}
    return {}
