"""The live emulator against a stand-in for the Kubernetes API: pods that come, flap and go, an API server
that stalls, a Deployment that is not there. Real time, real sockets; no cluster."""

from __future__ import annotations

import asyncio
import json
import math
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.polling import until

from inferscale.adapters.kube import KubeError
from inferscale.emulator import Emulator, EmulatorConfig, TargetError
from inferscale.perf import replica_profile
from inferscale.sim.traces import RequestArrays

PROFILE = replica_profile("llama-3.1-8b", "h100-80gb")
DEPLOYMENT = "/apis/apps/v1/namespaces/ns/deployments/llm"


def pod(name: str, ready: bool = True) -> dict[str, Any]:
    status = "True" if ready else "False"
    return {
        "metadata": {"name": name, "labels": {"app": "llm"}},
        "status": {"conditions": [{"type": "Ready", "status": status}]},
    }


class FakeKube:
    """`get` and `list` as KubeApi answers them; `errors` maps a path to the KubeError it raises, and after
    `stall_after` lists every call waits for an answer that never comes."""

    def __init__(self, *names: str) -> None:
        self.pods = [pod(n) for n in names]
        self.errors: dict[str, KubeError] = {}
        self.stall_after: int | None = None
        self.lists = 0

    async def _answer(self, path: str) -> None:
        if self.stall_after is not None and self.lists >= self.stall_after:
            await asyncio.Event().wait()
        if path in self.errors:
            raise self.errors[path]

    async def get(self, path: str) -> dict[str, Any]:
        await self._answer(path)
        return {"spec": {"selector": {"matchLabels": {"app": "llm"}}}}

    async def list(self, group_version: str, plural: str, namespace: str) -> list[dict[str, Any]]:
        await self._answer(f"/api/{group_version}/namespaces/{namespace}/{plural}")
        self.lists += 1
        return list(self.pods)


def config(tmp_path: Path, arrivals: list[float], output_tokens: int = 20, **kw: Any) -> EmulatorConfig:
    a = np.asarray(arrivals, dtype=np.float64)
    reqs = RequestArrays(a, np.full(a.size, 200, np.int64), np.full(a.size, output_tokens, np.int64))
    duration = kw.pop("duration", float(a.max()) if a.size else 1.0)
    return EmulatorConfig("ns", "llm", "m", PROFILE, reqs, duration, tmp_path / "targets", 0.5, 0.05, **kw)


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize(
    ("errors", "message"),
    [
        ({DEPLOYMENT: KubeError(404, 'deployments.apps "llm" not found')}, "deployment ns/llm not found"),
        (
            {DEPLOYMENT: KubeError(404, "not found"), "/api/v1/namespaces/ns": KubeError(404, "not found")},
            "namespace ns not found",
        ),
        (
            {DEPLOYMENT: KubeError(403, 'deployments.apps "llm" is forbidden:\nUser "x" cannot get')},
            'cannot read deployment ns/llm and its pods: HTTP 403: deployments.apps "llm" is forbidden: User "x"',
        ),
        (
            {"/api/v1/namespaces/ns/pods": KubeError(0, "ClientConnectorError: cannot connect")},
            "cannot read deployment ns/llm and its pods: no complete answer from the API server",
        ),
    ],
)
async def test_no_deployment_to_follow_stops_before_the_replay(
    tmp_path: Path, errors: dict[str, KubeError], message: str
) -> None:
    kube = FakeKube("p1")
    kube.errors = errors
    emu = Emulator(config(tmp_path, [0.0, 30.0]), kube)  # type: ignore[arg-type]
    with pytest.raises(TargetError) as e:
        await asyncio.wait_for(emu.run(), 5)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not emu.target_file.exists() and not emu.timeline


@pytest.mark.timeout(60)
async def test_a_stalled_api_server_holds_no_request_back(tmp_path: Path) -> None:
    kube = FakeKube("p1", "p2")
    emu = Emulator(config(tmp_path, list(np.arange(0.0, 1.5, 0.05)), sync_every=0.05, drain_grace=5.0), kube)  # type: ignore[arg-type]
    kube.stall_after = 1  # after the first view, the API server never answers again
    # routing that waited on the pod list would wait forever here: every request served is the behaviour (how
    # late they were routed is the machine's load, reported, not asserted)
    summary = await asyncio.wait_for(emu.run(), 20)
    assert summary["finished"] == summary["requests"] == 30
    late = summary["routing_lateness_s"]
    assert late is not None and 0.0 <= late["p50"] <= late["p99"] <= late["max"]


async def test_a_pod_ready_again_after_a_flap_takes_requests_and_is_scraped(tmp_path: Path) -> None:
    kube = FakeKube("p1")
    stop = asyncio.Event()
    emu = Emulator(config(tmp_path, [0.0], duration=60.0, sync_every=0.02), kube)  # type: ignore[arg-type]
    run = asyncio.create_task(emu.run(stop))
    await until(lambda: "p1" in emu.pods and emu.target_file.exists(), "p1 served")
    kube.pods = [pod("p1", ready=False)]
    await until(lambda: emu.pods["p1"].removed_at is not None, "p1 out of rotation")
    assert json.loads(emu.target_file.read_text()) == []
    port = emu.pods["p1"].port
    assert listening(port)  # NotReady, not deleted: the process and its /metrics live on
    kube.pods = [pod("p1")]
    await until(lambda: emu.pods["p1"].removed_at is None, "p1 back in rotation")
    groups = json.loads(emu.target_file.read_text())
    assert [g["labels"]["pod"] for g in groups] == ["p1"] and groups[0]["targets"] == [f"127.0.0.1:{port}"]
    stop.set()
    await asyncio.wait_for(run, 10)


async def test_a_deleted_pod_is_billed_until_drained_then_its_server_closes(tmp_path: Path) -> None:
    kube = FakeKube("p1", "p2")
    # four long streams at once: two per pod, still running when p2 is deleted
    stop = asyncio.Event()
    emu = Emulator(config(tmp_path, [0.0] * 4, output_tokens=150, duration=60.0, sync_every=0.02), kube)  # type: ignore[arg-type]
    run = asyncio.create_task(emu.run(stop))
    await until(lambda: "p2" in emu.pods and emu.pods["p2"].engine.outstanding > 0, "p2 busy")
    p2 = emu.pods["p2"]
    port = p2.port
    kube.pods = [pod("p1")]
    await until(lambda: p2.removed_at is not None, "p2 deleted")
    assert not p2.engine.idle, "p2 drained before the test could see it draining"
    await until(lambda: p2 in emu.retired and not listening(port), "p2 retired, its port closed", timeout=30)
    stop.set()
    summary = await asyncio.wait_for(run, 10)
    assert summary["finished"] == 4 and p2.engine.last_finish_at is not None
    assert p2.engine.last_finish_at > p2.removed_at + 0.1  # type: ignore[operator]
    # p1 for the whole run, p2 until its last request finished: the simulator's fleet bills the drain too
    held = summary["duration_s"] + p2.engine.last_finish_at
    assert summary["gpu_hours"] * 3600 == pytest.approx(held, abs=0.1)


async def test_a_stopped_replay_scores_what_arrived_and_unregisters(tmp_path: Path) -> None:
    kube = FakeKube("p1")
    stop = asyncio.Event()
    results = tmp_path / "results.json"
    emu = Emulator(config(tmp_path, [0.0, 0.01, 600.0], results=results), kube)  # type: ignore[arg-type]
    run = asyncio.create_task(emu.run(stop))
    await until(lambda: emu.outcomes.finished_at[1] == emu.outcomes.finished_at[1], "the first two requests served")
    stop.set()
    summary = await asyncio.wait_for(run, 10)
    assert summary["interrupted"] and summary["requests"] == summary["finished"] == 2
    assert not math.isnan(summary["ttft_p95_s"]) and json.loads(results.read_text())["interrupted"]
    assert not emu.target_file.exists()
