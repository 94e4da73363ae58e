"""`inferscale crd`: print the InferenceService CRD rendered from the API models."""

from __future__ import annotations

import typer

from inferscale.api.crd import crd_yaml


def crd() -> None:
    """Print the InferenceService CustomResourceDefinition (YAML). In a checkout, `make crds` regenerates
    every committed copy (crds/, the chart's, deploy/) and docs/api.md from it."""
    typer.echo(crd_yaml(), nl=False)
