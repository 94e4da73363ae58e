"""`inferscale crd`: print the InferenceService CRD rendered from the API models."""

from __future__ import annotations

import typer

from inferscale.api.crd import crd_yaml


def crd() -> None:
    """Print the InferenceService CustomResourceDefinition (YAML). Regenerate the committed copies with
    `inferscale crd > crds/inferscale.dev_inferenceservices.yaml`."""
    typer.echo(crd_yaml(), nl=False)
