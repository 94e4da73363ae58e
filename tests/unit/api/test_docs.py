from __future__ import annotations

from pathlib import Path

from inferscale.api.docs import api_markdown
from inferscale.api.spec import InferenceServiceSpec
from inferscale.api.status import InferenceServiceStatus

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def test_committed_docs_match_the_models() -> None:
    assert DOC.read_text() == api_markdown(), "docs/api.md is stale: run `python -m inferscale.api.docs > docs/api.md`"


def test_every_field_has_a_row_with_type_default_and_description() -> None:
    text = api_markdown()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for model in (InferenceServiceSpec, InferenceServiceStatus):
        for name, field in model.model_fields.items():
            assert any(row.startswith(f"| `{field.alias or name}` |") for row in rows), name
    assert all(row.count(" | ") >= 3 and not row.rstrip("| ").endswith("|") for row in rows)
    assert "| `ttftP95` | duration | `500ms` |" in text
    assert "| `maxDecrease` | integer or percent | `50%` |" in text
    assert "| `engine` | `vllm` \\| `sglang` | `vllm` |" in text
    assert "| `replicas` | [Replicas](#replicas) | required |" in text


def test_every_linked_section_exists() -> None:
    text = api_markdown()
    import re

    anchors = {h.removeprefix("### ").lower() for h in text.splitlines() if h.startswith("### ")}
    links = set(re.findall(r"\]\(#([a-z0-9]+)\)", text))
    assert links and links <= anchors
