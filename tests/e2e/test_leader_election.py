"""Two operators with --leader-elect on the real API server: one holds the Lease and acts, the other stands
by; a SIGKILLed leader is replaced after the lease duration, a SIGTERMed one hands over at once, a leader
that finds someone else in the Lease stops acting and exits, and a leader cut off from the API server stops
before the standby takes over, and what it sent into the partition changes nothing once it heals."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.cluster import Cluster, eventually
from tests.e2e.exporter import Exporter
from tests.e2e.infsvc import replicas, service, status
from tests.e2e.operator_proc import OperatorProcess
from tests.e2e.proxy import Proxy

pytestmark = pytest.mark.usefixtures("crd")


def _lease(cluster: Cluster, namespace: str) -> dict[str, Any]:
    spec: dict[str, Any] = cluster.kubectl_json("get", "lease", "inferscale", "-n", namespace)["spec"]
    return spec


def _leading(op: OperatorProcess) -> bool:
    try:
        return op.healthy() and op.metric_values(timeout=2).get("inferscale_leader") == 1.0
    except OSError:
        return False  # a slow answer: not yet


@pytest.fixture
def candidate(cluster: Cluster, namespace: str) -> Iterator[Callable[..., OperatorProcess]]:
    """Makes candidates for the namespace's Lease (keyword arguments go to OperatorProcess); stops them all."""
    made: list[OperatorProcess] = []

    def make(**kw: Any) -> OperatorProcess:
        args = ["--leader-elect", "--leader-elect-namespace", namespace]
        op = OperatorProcess(cluster, namespace, extra_args=args, **kw)
        made.append(op)
        return op

    yield make
    for op in made:  # all stopped before any assertion, so a failing one leaves no operator running
        if op.proc is not None and op.proc.poll() is None:
            op.proc.send_signal(signal.SIGCONT)  # a test that failed inside a pause
        op.stop()
    for op in made:
        op.assert_no_tracebacks()


@pytest.fixture
def candidates(candidate: Callable[..., OperatorProcess]) -> list[OperatorProcess]:
    return [candidate(), candidate(), candidate()]


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
    _decides_again(cluster, namespace, "the new leader's decisions")

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
    _exits_having_lost(leader, "someone-else holds the lease now")
    assert _lease(cluster, namespace)["holderIdentity"] == "someone-else", "an operator that lost must not release"


def test_a_leader_cut_off_from_the_api_server_stops_before_the_standby_takes_over(
    cluster: Cluster,
    namespace: str,
    target: Exporter,
    proxied: tuple[Proxy, pathlib.Path],  # before `candidate`: torn down after the operators
    candidate: Callable[..., OperatorProcess],
    lease_watch: Callable[[], LeaseWatch],
) -> None:
    # The leader reaches the API server only through the proxy; the standby directly. The partition cuts
    # the leader's every connection, old and new, while Prometheus and its own /metrics stay reachable.
    proxy, kubeconfig = proxied
    leader = candidate(extra_env={"KUBECONFIG": str(kubeconfig)})
    holder, standby = _acting_with_a_standby(cluster, namespace, target, leader, candidate())

    watch = lease_watch()
    with proxy.partition() as frozen:
        cut = time.monotonic()
        assert frozen >= 2, f"only {frozen} connections open: the leader's watches are not through the proxy"
        stopped: float | None = None  # when the leader was seen no longer acting
        took: float | None = None  # when the standby was seen acting
        deadline = cut + 15 + 2 * 2 + 10
        while (stopped is None or took is None) and time.monotonic() < deadline:
            if stopped is None and not _acting(leader):
                stopped = time.monotonic() - cut
            if took is None and _leading(standby):
                took = time.monotonic() - cut
            time.sleep(0.2)  # a sampling period, not a wait for the condition: the loop polls to a deadline
        print(f"cut off: the leader stopped after {stopped}s, the standby took over after {took}s")
        assert stopped is not None, "the cut-off leader still says it leads"
        assert took is not None, "the standby did not take the lease over"
        assert stopped < took, f"two leaders at once: the standby acted at {took:.1f}s, the leader until {stopped:.1f}s"
        assert stopped <= 10 + 2 + 1, f"the leader kept acting {stopped:.1f}s without a renewal (fence: 10 s)"
        assert took >= 15 - 2, f"the standby took over after {took:.1f}s, before the lease (15 s) could expire"
        _exits_having_lost(leader, "the lease could not be renewed for 10s")
        took_by = _lease(cluster, namespace)["holderIdentity"]
        assert took_by not in ("", holder)
        _decides_again(cluster, namespace, "the new leader's decisions")

    # Healed: what the old leader sent into the partition reaches the server now and is carried out. Its
    # renewal carries the resourceVersion it last saw (so do its /scale and status writes), so it is
    # refused: the Lease never names the old leader again, and the new one keeps acting.
    eventually(lambda: proxy.open_connections == 0, 60, "the held connections to be delivered and closed")
    assert proxy.late_answered >= 1, "nothing sent into the partition was carried out: the test proves nothing"
    _decides_again(cluster, namespace, "decisions after the heal")
    watch.stop()
    print(
        f"{proxy.late_answered} held requests answered late; the Lease's holders, version by version: {watch.holders}"
    )
    watch.assert_never_again(holder, after=took_by)
    assert _leading(standby), standby.output()[-2000:]
    assert _lease(cluster, namespace)["holderIdentity"] == took_by


def test_a_leader_paused_past_its_deadline_does_not_act_again_when_it_resumes(
    cluster: Cluster,
    namespace: str,
    target: Exporter,
    candidate: Callable[..., OperatorProcess],
    lease_watch: Callable[[], LeaseWatch],
) -> None:
    # SIGSTOP, as a long stop-the-world pause or a frozen cgroup: the process keeps its connections and its
    # view, and its monotonic clock runs on. Once resumed it must see that its deadline passed and stop,
    # not renew the Lease the standby took meanwhile. (A VM frozen by its hypervisor may resume with its
    # monotonic clock where it stopped: that pause this fence cannot see.)
    leader = candidate()
    holder, standby = _acting_with_a_standby(cluster, namespace, target, leader, candidate())
    watch = lease_watch()
    assert leader.proc is not None
    leader.proc.send_signal(signal.SIGSTOP)
    paused = time.monotonic()
    try:
        eventually(lambda: _leading(standby), 15 + 2 * 2 + 10, "the standby to take the lease over")
        took_by = _lease(cluster, namespace)["holderIdentity"]
        print(f"the standby took over {time.monotonic() - paused:.1f}s into the pause")
    finally:
        leader.proc.send_signal(signal.SIGCONT)
    _exits_having_lost(leader, "the lease could not be renewed for 10s")
    _decides_again(cluster, namespace, "the new leader's decisions")
    watch.stop()
    watch.assert_never_again(holder, after=took_by)
    assert _leading(standby), standby.output()[-2000:]


def _acting_with_a_standby(
    cluster: Cluster, namespace: str, target: Exporter, leader: OperatorProcess, standby: OperatorProcess
) -> tuple[str, OperatorProcess]:
    """Starts `leader`, then `standby`, and loads the service until the leader scales it; the leader's identity."""
    leader.start()
    eventually(lambda: _leading(leader), 30, "the first operator to hold the lease")
    holder: str = _lease(cluster, namespace)["holderIdentity"]
    standby.start()
    eventually(lambda: "standing by: the lease" in standby.output(), 30, "the second operator to stand by")
    target.set(kv=0.95, waiting=20, running=30)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("llm"))
    eventually(lambda: replicas(cluster, namespace) > 1, 60, "the leader's scale-up")
    return holder, standby


def _exits_having_lost(op: OperatorProcess, why: str) -> None:
    eventually(lambda: op.proc is not None and op.proc.poll() is not None, 60, "the operator that lost to exit")
    assert op.proc is not None and op.proc.returncode == 1
    out = op.output()
    assert f"lost the leader lease ({why}); exiting" in out, out[-2000:]


def _decides_again(cluster: Cluster, namespace: str, what: str) -> None:
    decided = status(cluster, namespace)["decision"]["at"]
    eventually(lambda: status(cluster, namespace)["decision"]["at"] != decided, 30, what)


class LeaseWatch:
    """The holder of every version of the Lease the API server stores while it runs (a watch, so no version
    is missed however briefly it stood)."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        template = 'jsonpath={.metadata.resourceVersion}{" "}{.spec.holderIdentity}{"\\n"}'
        args = [cluster.kubectl_exe, "get", "lease", "inferscale", "-n", namespace, "--watch", "-o", template]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=cluster.env())
        self.holders: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            _, _, who = line.strip().partition(" ")
            self.holders.append(who)

    def assert_never_again(self, old: str, after: str) -> None:
        """No version from the first naming `after` on names `old`: a late write of the old holder was refused."""
        assert after != old and after in self.holders, (old, after, self.holders, self.proc.returncode)
        taken = self.holders.index(after)
        assert old not in self.holders[taken:], f"{old} had the Lease back after {after} took it: {self.holders}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self._thread.join(10)


@pytest.fixture
def lease_watch(cluster: Cluster, namespace: str) -> Iterator[Callable[[], LeaseWatch]]:
    """Starts a LeaseWatch (call it once the Lease exists); stops it at the end whatever happened."""
    started: list[LeaseWatch] = []

    def start() -> LeaseWatch:
        started.append(LeaseWatch(cluster, namespace))
        return started[-1]

    yield start
    for watch in started:
        watch.stop()


def _acting(op: OperatorProcess) -> bool:
    """Whether the process could still write: alive and saying it leads (its /metrics is not partitioned)."""
    if op.proc is None or op.proc.poll() is not None:
        return False
    try:
        return op.metric_values(timeout=2).get("inferscale_leader") == 1.0
    except OSError:
        return True  # no answer is no proof that it stopped
