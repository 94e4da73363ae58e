"""Writes the kwok stage configuration for the local cluster.

Nodes: kwok's own fast node stages (initialize + lease heartbeat), read from the kwok module so
nothing of kwok's is copied into this repository. Pods: kwok's "general" lifecycle with instant
create/complete/delete, and a Ready transition delayed by the pod's own annotations:

  pod-ready.stage.kwok.x-k8s.io/delay:        "90s"   fixed delay (the model-load time)
  pod-ready.stage.kwok.x-k8s.io/jitter-delay: "120s"  optional: uniform between delay and this

Pods without the annotation become Ready at once. kwok's stock pod-ready stage defaults to a 1-5 s
jitter and ignores a lone `delay` (jitter <= delay wins), so the delay fields are replaced here.

Usage: make_stages.py <kwok-module-dir> <out.yaml>
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import yaml

ANNOTATION = "pod-ready.stage.kwok.x-k8s.io"


def _load(root: pathlib.Path, rel: str) -> dict[str, Any]:
    doc = yaml.safe_load((root / rel).read_text())
    assert isinstance(doc, dict), rel
    return doc


def stages(kwok_dir: pathlib.Path) -> list[dict[str, Any]]:
    root = kwok_dir / "kustomize" / "stage"
    docs = [
        _load(root, "node/fast/node-initialize.yaml"),
        _load(root, "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"),
    ]
    instant = ["pod-create", "pod-init-container-running", "pod-init-container-completed", "pod-complete"]
    for name in instant:
        stage = _load(root, f"pod/general/{name}.yaml")
        stage["spec"]["delay"] = {"durationMilliseconds": 0}
        docs.append(stage)
    ready = _load(root, "pod/general/pod-ready.yaml")
    ready["spec"]["delay"] = {
        "durationMilliseconds": 0,
        "durationFrom": {"expressionFrom": f'.metadata.annotations["{ANNOTATION}/delay"]'},
        "jitterDurationFrom": {"expressionFrom": f'.metadata.annotations["{ANNOTATION}/jitter-delay"]'},
    }
    docs.append(ready)
    docs.append(_load(root, "pod/general/pod-delete.yaml"))
    docs[-1]["spec"]["delay"] = {"durationMilliseconds": 0}
    return docs


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: make_stages.py <kwok-module-dir> <out.yaml>", file=sys.stderr)
        return 2
    out = pathlib.Path(argv[2])
    out.write_text(yaml.safe_dump_all(stages(pathlib.Path(argv[1])), sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
