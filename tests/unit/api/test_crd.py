from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from inferscale.api import rules
from inferscale.api.crd import SchemaError, _Translator, crd, crd_yaml
from inferscale.api.status import InferenceServiceStatus
from inferscale.scaling.durations import DURATION_PATTERN
from inferscale.scaling.schedule import cron_problem

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "crds" / "inferscale.dev_inferenceservices.yaml"
CHART_COPY = ROOT / "charts" / "inferscale" / "crds" / "inferscale.dev_inferenceservices.yaml"
REGENERATE = "run `make crds`"


def _schema() -> dict[str, Any]:
    version = crd()["spec"]["versions"][0]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield f"{path}.{key}", value
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}[{i}]")


def test_committed_crd_matches_the_models() -> None:
    assert COMMITTED.read_text() == crd_yaml(), f"crds/ is stale: {REGENERATE}"


def test_chart_crd_matches_the_committed_one() -> None:
    assert CHART_COPY.read_text() == COMMITTED.read_text(), f"charts/inferscale/crds/ is stale: {REGENERATE}"


def test_the_yaml_is_the_crd() -> None:
    assert yaml.safe_load(crd_yaml()) == crd()


def test_names_scope_and_subresources() -> None:
    body = crd()
    assert body["metadata"]["name"] == "inferenceservices.inferscale.dev"
    names = body["spec"]["names"]
    assert (names["kind"], names["plural"], names["singular"]) == (
        "InferenceService",
        "inferenceservices",
        "inferenceservice",
    )
    assert names["shortNames"] == ["infsvc"]
    assert body["spec"]["scope"] == "Namespaced"
    (version,) = body["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    # The InferenceService is not itself scaled: status only, no scale subresource.
    assert version["subresources"] == {"status": {}}


def test_printer_columns() -> None:
    columns = {c["name"]: c for c in crd()["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert list(columns) == ["Model", "Replicas", "Desired", "TTFT-P95", "KV%", "Waiting", "SLO", "Reason", "Age"]
    assert columns["SLO"]["jsonPath"] == '.status.conditions[?(@.type=="SLOMet")].status'
    assert columns["Reason"]["priority"] == 1
    assert columns["KV%"]["jsonPath"] == ".status.observed.kvCachePercent"
    schema = _schema()
    for column in columns.values():
        if column["name"] in ("Age", "SLO"):
            continue
        node = schema
        for part in column["jsonPath"].strip(".").split("."):
            node = node["properties"][part]  # every column points at a declared field


def test_schema_is_structural() -> None:
    for path, value in _walk(_schema()):
        key = path.rsplit(".", 1)[-1]
        assert key not in ("$ref", "$defs", "title", "default", "const", "additionalProperties") or (
            key == "additionalProperties" and isinstance(value, dict)
        ), path
        assert not key.startswith("x-inferscale"), path
        if key == "anyOf":
            assert value == [{"type": "integer"}, {"type": "string"}], path
        if isinstance(value, dict) and "properties" in value:
            assert value.get("type") == "object", path
            for name, sub in value["properties"].items():
                assert "type" in sub or sub.get("x-kubernetes-int-or-string"), f"{path}.{name}"


def test_spec_has_no_nullable_fields_and_status_has() -> None:
    spec_nullable = [p for p, v in _walk(_schema()["properties"]["spec"]) if p.endswith(".nullable")]
    assert spec_nullable == []  # the server prunes spec nulls, so null == unset, as in Python
    status = _schema()["properties"]["status"]["properties"]
    assert status["observed"]["properties"]["ttftP95"]["nullable"] is True
    assert status["recommendations"]["items"]["properties"]["value"]["nullable"] is True


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model inside `X | None` or `list[X] | None`, and whether it sits in a list."""
    for arg in (annotation, *get_args(annotation)):
        if get_origin(arg) is list:
            (item,) = get_args(arg)
            if isinstance(item, type) and issubclass(item, BaseModel):
                return item, True
        elif isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg, False
    return None, False


def _undeclared(model: type[BaseModel], node: dict[str, Any], path: str) -> Iterator[str]:
    """Every field of the model that the schema would prune (not declared, no preserve-unknown)."""
    for name, field in model.model_fields.items():
        alias = field.alias or name
        sub = node.get("properties", {}).get(alias)
        if sub is None:
            yield f"{path}.{alias}"
            continue
        nested, in_list = _nested_model(field.annotation)
        if nested is not None:
            yield from _undeclared(nested, sub["items"] if in_list else sub, f"{path}.{alias}")


def test_every_status_field_is_declared() -> None:
    status = _schema()["properties"]["status"]
    assert list(_undeclared(InferenceServiceStatus, status, "status")) == []
    props = status["properties"]
    assert props["history"]["maxItems"] == 20
    assert props["scaler"]["x-kubernetes-preserve-unknown-fields"] is True
    assert set(props["observed"]["properties"]) >= {"at", "metrics", "podsReporting", "kvCachePercent", "waiting"}
    assert "from" in props["history"]["items"]["properties"]
    assert "x-kubernetes-preserve-unknown-fields" not in status  # declared, not a catch-all


def test_cel_rules_and_messages() -> None:
    spec = _schema()["properties"]["spec"]
    props = spec["properties"]
    assert rules.ONE_TARGET.schema() in spec["x-kubernetes-validations"]
    assert rules.SCHEDULE_WITHIN_MAX.schema() in spec["x-kubernetes-validations"]
    assert props["replicas"]["x-kubernetes-validations"] == [rules.REPLICA_BOUNDS.schema()]
    assert props["targets"]["properties"]["kvCacheUtilization"]["x-kubernetes-validations"] == [rules.FRACTION.schema()]
    assert props["engine"]["enum"] == ["vllm", "sglang"]
    assert props["mode"]["enum"] == ["Active", "Advisory"]
    kinds = (rules.DURATION.schema(), rules.POSITIVE_DURATION.schema())
    durations = [v for p, v in _walk(spec) if p.endswith(".x-kubernetes-validations") and v[0] in kinds]
    assert len(durations) == 11  # slo 3, interval, scaleUp 2, scaleDown 2, timeToReady, schedule, staleAfter
    # Zero is allowed only where it means "no delay": windows and time-to-ready.
    zero_ok = [p for p, v in _walk(spec) if p.endswith(".x-kubernetes-validations") and v[0] == rules.DURATION.schema()]
    assert sorted(p.split(".")[-2] for p in zero_ok) == ["stabilizationWindow", "stabilizationWindow", "timeToReady"]
    time_to_ready = props["warmup"]["properties"]["timeToReady"]["x-kubernetes-validations"]
    assert time_to_ready == [rules.DURATION.schema(), rules.TIME_TO_READY.schema()]
    all_rules = [r for p, v in _walk(spec) if p.endswith(".x-kubernetes-validations") for r in v]
    assert all_rules and all(set(r) == {"rule", "message"} and r["message"] for r in all_rules)


def _cel_literal(rule: str) -> str:
    """The regex inside `self.matches('...')`, unescaped as CEL would."""
    match = re.search(r"matches\('((?:[^'\\]|\\.)*)'\)", rule)
    assert match, rule
    return re.sub(r"\\(.)", r"\1", match.group(1))


@pytest.mark.parametrize("text", ["500ms", "30s", "1h30m", "1.5s", "0s", "500", " 5s", "5 s", "-1s", "1d", ""])
def test_cel_duration_regex_agrees_with_python(text: str) -> None:
    cel_regex = _cel_literal(rules.DURATION.cel)
    assert cel_regex == DURATION_PATTERN == _cel_literal(rules.POSITIVE_DURATION.cel)
    try:
        rules.check_duration(text)
        python_ok = True
    except ValueError:
        python_ok = False
    assert python_ok == bool(re.search(cel_regex, text))


@pytest.mark.parametrize(
    "text", ["0 9 * * 1-5", "@daily", "*/5 * * * *", "0 9 * *", "every day", "@often", "0 24 * * *", "0 9 * * sun"]
)
def test_cel_cron_shape_agrees_with_python(text: str) -> None:
    cel_ok = bool(re.search(_cel_literal(rules.CRON.cel), text))
    try:
        rules.check_cron(text)
        python_ok = True
    except ValueError:
        python_ok = False
    assert python_ok == cel_ok


FIELDS = (  # (lowest, highest, words croniter reads there) per field
    (0, 59, ("R", "r/2")),
    (0, 23, ("R",)),
    (1, 31, ("L", "15W", "LW", "15-0", "20-00")),  # croniter reads 15-0 as 15-31
    (1, 12, ("jan", "MAR", "jan-jun", "dec", "7-0")),
    (0, 7, ("mon", "SUN", "mon-fri", "1#2", "5L", "fri#3")),
)


def _random_field(rnd: random.Random, low: int, high: int, words: tuple[str, ...], out: bool = False) -> str:
    """A list of items; with `out`, every item is a number, a range or a zero-padded number out of range."""

    def value() -> str:
        return str(rnd.choice([high + 1, high + 7, *([low - 1] if low else [])]) if out else rnd.randint(low, high))

    def item() -> str:
        shape = rnd.choice([2, 3, 5] if out else range(6))
        base = ["*", "?", value(), f"{value()}-{value()}", rnd.choice(words or ("*",)), f"0{value()}"][shape]
        return base + (f"/{rnd.choice([1, 2, 5, 15])}" if rnd.random() < 0.3 and shape != 4 else "")

    return ",".join(item() for _ in range(rnd.choice([1, 1, 1, 2, 3])))


def test_the_cron_pattern_refuses_no_expression_croniter_reads_and_every_number_out_of_range() -> None:
    rnd = random.Random(11)
    pattern, read = re.compile(_cel_literal(rules.CRON.cel)), 0
    for _ in range(3000):
        fields = [_random_field(rnd, low, high, words) for low, high, words in FIELDS]
        text = " ".join(fields)
        if cron_problem(text) is None:
            read += 1
            assert pattern.fullmatch(text), text
        bad = rnd.randrange(5)
        fields[bad] = _random_field(rnd, *FIELDS[bad][:2], (), out=True)
        out = " ".join(fields)
        assert not pattern.fullmatch(out), out  # croniter itself reads some, such as month 0-0
    assert read > 500  # a fair share of the sample is expressions croniter reads


def test_unknown_json_schema_construct_fails_loudly() -> None:
    with pytest.raises(SchemaError, match="oneOf"):
        _Translator({}, nullable=False).node({"type": "object", "oneOf": []}, "x")
    with pytest.raises(SchemaError, match="union"):
        _Translator({}, nullable=False).node(
            {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, "x"
        )


def test_the_condition_types_the_crd_names_include_every_one_the_operator_writes() -> None:
    from inferscale.api import CONDITION_TYPES
    from inferscale.handlers.status import TRUE_IS_BAD, restarting_condition

    written = {restarting_condition(0, "d").type, restarting_condition(2, "d").type, *TRUE_IS_BAD}
    assert written <= set(CONDITION_TYPES)
