"""Two operators with --leader-elect on the real API server: one holds the Lease and acts, the other stands
by; a SIGKILLed leader is replaced after the lease duration, a SIGTERMed one hands over at once, and a leader
that finds someone else in the Lease stops acting and exits."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.cluster import Cluster, eventually
from tests.e2e.exporter import Exporter
from tests.e2e.infsvc import replicas, service, status
from tests.e2e.operator_proc import OperatorProcess

pytestmark = pytest.mark.usefixtures("crd")


def _lease(cluster: Cluster, namespace: str) -> dict[str, Any]:
    spec: dict[str, Any] = cluster.kubectl_json("get", "lease", "inferscale", "-n", namespace)["spec"]
    return spec


def _leading(op: OperatorProcess) -> bool:
    return op.healthy() and op.metric_values().get("inferscale_leader") == 1.0


@pytest.fixture
def candidates(cluster: Cluster, namespace: str) -> Iterator[list[OperatorProcess]]:
    made: list[OperatorProcess] = []

    def make() -> OperatorProcess:
        op = OperatorProcess(cluster, namespace, extra_args=["--leader-elect", "--leader-elect-namespace", namespace])
        made.append(op)
        return op

    yield [make(), make(), make()]
    for op in made:
        op.stop()
        op.assert_no_tracebacks()


def test_one_of_two_operators_acts_and_the_standby_takes_over_when_the_leader_goes(
    cluster: Cluster, namespace: str, target: Exporter, candidates: list[OperatorProcess]
) -> None:
    first, second, third = candidates
    first.start()
    eventually(lambda: _leading(first), 30, "the first operator to hold the lease")
    second.start()
    eventually(lambda: "standing by: the lease" in second.output(), 30, "the second operator to stand by")
    assert second.metric_values().get("inferscale_leader") == 0.0

    target.set(kv=0.95, waiting=20, running=30)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("llm"))
    eventually(lambda: replicas(cluster, namespace) > 1, 60, "the leader's scale-up")
    assert not any(k.startswith("inferscale_decisions_total") for k in second.metric_values()), "the standby decided"

    # SIGKILL: no release. The standby waits out the lease, then acts.
    first.kill()
    killed = time.monotonic()
    eventually(lambda: _leading(second), 15 + 2 * 2 + 10, "the standby to take the lease over")
    print(f"a SIGKILLed leader was replaced after {time.monotonic() - killed:.1f}s")
    lease = _lease(cluster, namespace)
    assert lease["leaseTransitions"] == 1
    decided = status(cluster, namespace)["decision"]["at"]
    eventually(lambda: status(cluster, namespace)["decision"]["at"] != decided, 30, "the new leader's decisions")

    # SIGTERM: the leader releases the lease on its way out, so the handover does not wait for it to expire.
    third.start()
    eventually(lambda: "standing by: the lease" in third.output(), 30, "a new standby")
    termed = time.monotonic()
    second.stop()
    assert second.proc is not None and second.proc.returncode == 0, second.output()[-2000:]
    eventually(lambda: _leading(third), 10, "the standby to take a released lease before it would expire (15 s)")
    print(f"a SIGTERMed leader handed over after {time.monotonic() - termed:.1f}s")
    assert "released the lease" in second.output()


def test_a_leader_that_finds_another_holder_in_the_lease_stops_and_exits(
    cluster: Cluster, namespace: str, target: Exporter, candidates: list[OperatorProcess]
) -> None:
    leader = candidates[0].start()
    eventually(lambda: _leading(leader), 30, "the operator to hold the lease")
    cluster.kubectl("patch", "lease", "inferscale", "-n", namespace, "--type=merge",
                    "-p", '{"spec": {"holderIdentity": "someone-else"}}')  # fmt: skip
    assert leader.proc is not None
    eventually(lambda: leader.proc is not None and leader.proc.poll() is not None, 30, "the operator to exit")
    assert leader.proc.returncode == 1
    out = leader.output()
    assert "lost the leader lease (someone-else holds the lease now); exiting" in out, out[-2000:]
    assert _lease(cluster, namespace)["holderIdentity"] == "someone-else", "an operator that lost must not release"
