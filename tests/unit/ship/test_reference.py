"""docs/reference.md lists every name the operator writes: a reason, condition, Event or metric the code emits
and the page does not name fails here, so the page cannot fall behind the code."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferscale.handlers import metrics
from inferscale.scaling.types import Reason

ROOT = Path(__file__).resolve().parents[3]
PAGE = (ROOT / "docs" / "reference.md").read_text()
HANDLERS = sorted((ROOT / "operator" / "inferscale" / "handlers").glob("*.py"))


def _strings(node: ast.expr) -> Iterator[str]:
    """The literal strings an argument can be: a constant, or either side of a conditional of constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.IfExp):
        yield from _strings(node.body)
        yield from _strings(node.orelse)


def _calls(name: str) -> Iterator[ast.Call]:
    for path in HANDLERS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                yield node


def _condition_names() -> set[str]:
    names = set()
    for call in _calls("Condition"):
        for arg in (call.args[0], call.args[2]) if len(call.args) >= 3 else ():
            names.update(_strings(arg))
    return names


def _event_reasons() -> set[str]:
    return {reason for call in _calls("post_event") if len(call.args) >= 4 for reason in _strings(call.args[3])}


def _metric_names() -> set[str]:
    collectors = [*metrics.REGISTRY.collect(), *metrics.RequestCounts(lambda: 0, lambda: 0).collect()]
    return {m.name + ("_total" if m.type == "counter" else "") for m in collectors}


def test_the_code_emits_what_the_scan_expects_to_find() -> None:
    # a scan that found nothing would pass every check below
    assert {"Ready", "ScaleFailed", "PodsStuck", "NotReadyLongAfterPlacement"} <= _condition_names()
    assert {"ScaleDeferred", "ConcurrentWriter", "TargetChanged", "Created"} <= _event_reasons()
    expected = {"inferscale_decisions_total", "inferscale_leader", "inferscale_kubernetes_requests_total"}
    assert expected <= _metric_names()


@pytest.mark.parametrize(
    ("kind", "names"),
    [
        ("decision reason", {r.value for r in Reason}),
        ("condition type or reason", _condition_names()),
        ("Event reason", _event_reasons()),
        ("metric", _metric_names()),
    ],
)
def test_every_name_the_operator_writes_is_on_the_reference_page(kind: str, names: set[str]) -> None:
    missing = sorted(n for n in names if f"`{n}`" not in PAGE)
    assert not missing, f"docs/reference.md does not name these {kind}s: {', '.join(missing)}"
