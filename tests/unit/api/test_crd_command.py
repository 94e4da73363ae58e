from __future__ import annotations

import yaml
from typer.testing import CliRunner

from inferscale.api.crd import crd_yaml
from inferscale.cli import app


def test_crd_command_prints_the_rendered_crd() -> None:
    result = CliRunner().invoke(app, ["crd"])
    assert result.exit_code == 0, result.output
    assert result.stdout == crd_yaml()
    assert yaml.safe_load(result.stdout)["kind"] == "CustomResourceDefinition"
