"""The collector's tick: which PromQL it asks for, from what the lists say."""

import itertools
from typing import Any

from inferscale.adapters.kube import KubeError
from inferscale.adapters.prometheus import FleetSnapshot, PartialAnswer, build_queries
from inferscale.handlers.collector import HISTORY_SPAN, HISTORY_STEP, KIND_GONE_GRACE, Collector, history_window
from inferscale.handlers.metrics import REGISTRY
from inferscale.scaling.forecast import HISTORY_KEPT, HISTORY_STALE
from inferscale.scaling.types import RateSample


def service(name: str, slo: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"model": {"name": "m"}, "scaleTargetRef": {"name": name}, "replicas": {"max": 4}}
    if slo:
        spec["slo"] = slo
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec}


class Kube:
    def __init__(self) -> None:
        self.services: list[dict[str, Any]] = []

    async def list(
        self, gv: str, plural: str, ns: str | None, keep: Any = None, optional: bool = True
    ) -> list[dict[str, Any]]:
        return list(self.services) if plural == "inferenceservices" else []


class Prom:
    def __init__(self) -> None:
        self.snapshots: list[tuple[dict[str, str], bool]] = []
        self.gone: set[str] = set()  # Deployments deleted: no more series

    async def snapshot(self, now: float, selector: dict[str, str], tpot: bool) -> FleetSnapshot:
        self.snapshots.append((selector, tpot))
        return FleetSnapshot(now, {}, frozenset())

    async def rate_history(
        self, start: float, end: float, step: float, selector: dict[str, str]
    ) -> dict[tuple[str, str, str], list[tuple[float, float]]]:
        # each fleet of model m in ns serves its own rate: 10 req/s on pool a, 90 on pool b, 100 together;
        # without a pool, the Deployments llm and llm-canary serve 75 and 25
        if "pool" in selector:
            return {("ns", "m", "llm"): [(end, {"a": 10.0, "b": 90.0}[selector["pool"]])]}
        rates = {"llm": 75.0, "llm-canary": 25.0}
        return {("ns", "m", d): [(end, r)] for d, r in rates.items() if d not in self.gone}


def test_the_per_request_tpot_histogram_is_only_in_the_query_when_asked_for() -> None:
    assert "request_time_per_output_token" in build_queries()["ttft_buckets"]
    without = build_queries(tpot=False)["ttft_buckets"]
    assert "request_time_per_output_token" not in without and "time_to_first_token" in without


async def test_the_tick_reads_per_request_tpot_from_the_first_tick_a_service_sets_its_slo() -> None:
    kube, prom = Kube(), Prom()
    collector = Collector(kube, prom, ["ns"], 15.0)  # type: ignore[arg-type]
    kube.services = [service("a")]
    await collector.refresh()
    assert prom.snapshots == [({}, False)]
    kube.services.append(service("b", {"tpotP95": "50ms"}))
    prom.snapshots.clear()
    await collector.refresh()
    assert prom.snapshots == [({}, False), ({}, True)]  # read again at once, not a tick later
    prom.snapshots.clear()
    await collector.refresh()
    assert prom.snapshots == [({}, True)]
    kube.services.pop()
    prom.snapshots.clear()
    await collector.refresh()
    await collector.refresh()
    assert prom.snapshots == [({}, True), ({}, False)]  # dropped from the tick after the last one left


async def test_an_invalid_spec_costs_no_query_and_competes_for_no_target() -> None:
    kube, prom = Kube(), Prom()
    collector = Collector(kube, prom, ["ns"], 15.0)  # type: ignore[arg-type]
    bad = service("old")  # a dotted key is no Prometheus label: every query of its group would fail to parse
    bad["spec"]["metrics"] = {"selector": {"app.kubernetes.io/name": "vllm"}}
    advisory = service("watcher")
    advisory["spec"]["mode"] = "Advisory"
    for svc in (bad, advisory):
        svc["spec"]["scaleTargetRef"] = {"name": "llm"}
    bad["spec"]["slo"] = {"tpotP95": "50ms"}  # nor does it add the TPOT histogram to the TTFT query
    good = service("llm")
    kube.services = [bad, advisory, good]
    tick = await collector.refresh()
    assert prom.snapshots == [({}, False)]
    assert [name for _, name, _ in tick.services_by_target[("ns", "llm")]] == ["llm"]


async def test_services_told_apart_by_their_selector_forecast_from_their_own_rate_history() -> None:
    kube, prom = Kube(), Prom()
    collector = Collector(kube, prom, ["ns"], 15.0)  # type: ignore[arg-type]
    pools = [service("a"), service("b")]
    for svc, pool in zip(pools, "ab", strict=True):
        svc["spec"]["metrics"] = {"selector": {"pool": pool}}
    kube.services = pools
    await collector.refresh()
    last = {key: buf[-1].value for key, buf in collector.history.items()}
    a, b = (("pool", "a"),), (("pool", "b"),)
    assert last == {
        (a, "ns", "m", "llm"): 10.0,
        (a, "ns", "m", None): 10.0,
        (b, "ns", "m", "llm"): 90.0,
        (b, "ns", "m", None): 90.0,
    }


async def test_each_deployment_of_a_model_has_its_own_rate_history_and_the_model_their_sum() -> None:
    kube, prom = Kube(), Prom()
    collector = Collector(kube, prom, ["ns"], 15.0)  # type: ignore[arg-type]
    kube.services = [service("llm"), service("llm-canary")]
    await collector.refresh()
    at = collector.history[((), "ns", "m", "llm")][-1].at
    assert {key: list(h) for key, h in collector.history.items()} == {
        ((), "ns", "m", "llm"): [RateSample(at, 75.0)],
        ((), "ns", "m", "llm-canary"): [RateSample(at, 25.0)],
        ((), "ns", "m", None): [RateSample(at, 100.0)],  # the model's total
    }


async def test_a_deployment_that_stopped_reporting_is_forgotten_after_the_history_span() -> None:
    kube, prom, clock = Kube(), Prom(), [1_800_000_000.0]
    collector = Collector(kube, prom, ["ns"], 15.0, clock=lambda: clock[0])  # type: ignore[arg-type]
    kube.services = [service("llm")]
    await collector.refresh()
    assert ((), "ns", "m", "llm-canary") in collector.history
    prom.gone = {"llm-canary"}
    clock[0] += HISTORY_SPAN - 60.0
    await collector.refresh()
    assert ((), "ns", "m", "llm-canary") in collector.history  # still inside the span
    clock[0] += 120.0
    await collector.refresh()
    assert ((), "ns", "m", "llm-canary") not in collector.history
    assert ((), "ns", "m", "llm") in collector.history and ((), "ns", "m", None) in collector.history


class HistoryDownProm(Prom):
    """Instant queries answer; range queries fail (a query-frontend down, a range too long for its limits)."""

    def __init__(self) -> None:
        super().__init__()
        self.history_queries = 0

    async def rate_history(
        self, start: float, end: float, step: float, selector: dict[str, str]
    ) -> dict[tuple[str, str, str], list[tuple[float, float]]]:
        self.history_queries += 1
        raise TimeoutError("no answer")

    def describe(self, error: BaseException) -> str:
        return str(error)


class DownProm(HistoryDownProm):
    """A Prometheus that answers nothing: every query of the snapshot failed."""

    async def snapshot(self, now: float, selector: dict[str, str], tpot: bool) -> FleetSnapshot:
        self.snapshots.append((selector, tpot))
        return FleetSnapshot(now, {}, frozenset(build_queries()), ("down",))


async def test_a_prometheus_that_answered_nothing_is_not_asked_for_the_history_too() -> None:
    # a hung Prometheus would cost the tick a second timeout for a history no held service uses
    kube, prom = Kube(), DownProm()
    collector = Collector(kube, prom, ["ns"], 15.0)  # type: ignore[arg-type]
    kube.services = [service("a")]
    await collector.refresh()
    assert prom.snapshots and prom.history_queries == 0
    healthy = Prom()
    collector.prom = healthy  # type: ignore[assignment]
    await collector.refresh()
    assert collector.history  # the history resumes as soon as Prometheus answers


class GridProm(Prom):
    """Answers a range query as Prometheus does: a point at start and every step after it, up to end."""

    def __init__(self) -> None:
        super().__init__()
        self.ranges: list[tuple[float, float]] = []

    async def rate_history(
        self, start: float, end: float, step: float, selector: dict[str, str]
    ) -> dict[tuple[str, str, str], list[tuple[float, float]]]:
        self.ranges.append((start, end))
        n = int((end - start) // step)
        return {("ns", "m", "llm"): [(start + i * step, 100.0) for i in range(n + 1)]}


async def test_ticks_that_run_long_keep_the_history_on_its_grid_and_its_span_whole() -> None:
    kube, prom, clock = Kube(), GridProm(), [1_800_000_000.4]
    collector = Collector(kube, prom, ["ns"], 15.0, clock=lambda: clock[0])  # type: ignore[arg-type]
    kube.services = [service("llm")]
    for _ in range(int(HISTORY_SPAN / HISTORY_STEP) + 100):
        await collector.refresh()
        clock[0] += HISTORY_STEP + 0.37  # each tick a little late: the old query start moved with it
    history = collector.history[((), "ns", "m", "llm")]
    gaps = {b.at - a.at for a, b in itertools.pairwise(history)}
    assert gaps == {HISTORY_STEP}
    assert clock[0] - history[0].at >= HISTORY_SPAN  # what the seasonal forecast needs


def test_a_range_query_after_failures_starts_no_earlier_than_the_span() -> None:
    now = 1_800_000_000.0
    first = history_window(None, now)
    assert first is not None and first[0] % HISTORY_STEP == 0 and now - first[0] <= HISTORY_KEPT
    assert history_window(first[1], first[1] + HISTORY_STEP - 1) is None  # no new point due yet
    week_later = history_window(first[1], now + 7 * 86400)
    assert week_later is not None and week_later[1] - week_later[0] <= HISTORY_KEPT


def test_the_tick_is_exported_for_the_stall_alert_to_measure_against() -> None:
    # the chart's InferscaleOperatorStalled waits three of these; without the gauge it falls back to 5 minutes
    Collector(Kube(), Prom(), ["ns"], 600.0)  # type: ignore[arg-type]
    assert REGISTRY.get_sample_value("inferscale_tick_interval_seconds") == 600.0


class Forbidden(Kube):
    """Two watched namespaces; b was deleted and its Role with it: every list there is a 403."""

    both = False  # a's lists fail too

    async def list(
        self, gv: str, plural: str, ns: str | None, keep: Any = None, optional: bool = True
    ) -> list[dict[str, Any]]:
        if ns == "b" or (ns == "a" and self.both):
            raise KubeError(403, f'{plural} is forbidden: cannot list resource "{plural}" in the namespace "{ns}"')
        if plural == "inferenceservices":
            return [{**service("llm"), "metadata": {"name": "llm", "namespace": ns}}]
        if plural == "pods":
            return [{"metadata": {"name": "llm-abcdef7-xyzwv", "namespace": ns}, "status": {}}]
        return []


async def test_a_namespace_that_cannot_be_listed_holds_its_services_and_not_the_others() -> None:
    kube = Forbidden()
    collector = Collector(kube, Prom(), ["a", "b"], 10.0)  # type: ignore[arg-type]
    tick = await collector.refresh()
    assert tick.kube_error is None and collector.last_success == tick.at  # /healthz stays healthy
    assert [s["metadata"]["namespace"] for s in tick.services] == ["a"] and list(tick.pods) == ["a"]
    assert set(tick.unreadable) == {"b"} and "403" in tick.unreadable["b"]
    assert REGISTRY.get_sample_value("inferscale_namespace_unreadable", {"namespace": "b"}) == 1
    assert REGISTRY.get_sample_value("inferscale_namespace_unreadable", {"namespace": "a"}) == 0
    # nothing answers: the tick fails as before, and no service is decided on a view it does not have
    kube.both = True
    failed = await collector.refresh()
    assert failed.kube_error is not None and failed.services == [] and collector.last_success == tick.at
    assert REGISTRY.get_sample_value("inferscale_namespace_unreadable", {"namespace": "a"}) == 1


async def test_the_only_watched_namespace_unreadable_is_named_by_the_gauge() -> None:
    # the usual install watches one namespace: the tick fails, and the alert must still say which one and why
    kube = Forbidden()
    await Collector(kube, Prom(), ["b"], 10.0).refresh()  # type: ignore[arg-type]
    assert REGISTRY.get_sample_value("inferscale_namespace_unreadable", {"namespace": "b"}) == 1


class PartialProm(Prom):
    """A Thanos querier with one store down: every answer comes with a warning."""

    async def snapshot(self, now: float, selector: dict[str, str], tpot: bool) -> FleetSnapshot:
        return FleetSnapshot(now, {}, frozenset(), partial=frozenset({"requests", "gauges"}), warnings=("store down",))

    async def rate_history(
        self, start: float, end: float, step: float, selector: dict[str, str]
    ) -> dict[tuple[str, str, str], list[tuple[float, float]]]:
        raise PartialAnswer("answered in part: store down")

    def describe(self, e: BaseException) -> str:
        return str(e)


async def test_partial_answers_are_counted_apart_from_failed_queries() -> None:
    # the answers are read (no scale-down on them), so they are no query errors; their own counter feeds the alert
    # that says why every service has stopped scaling down
    def count(name: str) -> float:
        return REGISTRY.get_sample_value(name) or 0.0

    partial, errors = (
        count("inferscale_prometheus_partial_answers_total"),
        count("inferscale_prometheus_query_errors_total"),
    )
    await Collector(Kube(), PartialProm(), ["ns"], 10.0).refresh()  # type: ignore[arg-type]
    assert count("inferscale_prometheus_partial_answers_total") == partial + 3  # two families and the history
    assert count("inferscale_prometheus_query_errors_total") == errors


class Restarted(Kube):
    """An API server that answers 404 for the kinds in `gone`, as a restarted one does for custom resources until
    it has their CRDs (kubernetes#115241), or as a cluster without KEDA does for ScaledObjects."""

    def __init__(self) -> None:
        super().__init__()
        self.services = [service("llm")]
        self.gone: set[str] = set()

    async def list(
        self, gv: str, plural: str, ns: str | None, keep: Any = None, optional: bool = True
    ) -> list[dict[str, Any]]:
        if plural in self.gone:
            if optional:
                return []
            raise KubeError(404, f"the server could not find the requested resource ({plural})")
        return await super().list(gv, plural, ns, keep, optional)


async def test_a_crd_the_api_server_does_not_serve_is_its_failure_not_an_empty_list() -> None:
    # read as no services, the tick would strip every deletion cost and drop every service's series
    kube = Restarted()
    now = [1_000_000.0]
    collector = Collector(kube, Prom(), ["ns"], 10.0, clock=lambda: now[0])  # type: ignore[arg-type]
    kube.gone = {"inferenceservices"}
    tick = await collector.refresh()
    assert tick.kube_error is not None and "404" in tick.kube_error and tick.services == []
    # a cluster without KEDA: its ScaledObjects are not served, and that is no failure
    kube.gone = {"scaledobjects"}
    tick = await Collector(kube, Prom(), ["ns"], 10.0, clock=lambda: now[0]).refresh()  # type: ignore[arg-type]
    assert tick.kube_error is None and len(tick.services) == 1
    # KEDA served and then gone: a restart's 404 for a while (the namespace is held), then taken for an uninstall
    kube.gone = set()
    await collector.refresh()
    kube.gone = {"scaledobjects"}
    now[0] += KIND_GONE_GRACE / 2
    assert (await collector.refresh()).kube_error is not None
    now[0] += KIND_GONE_GRACE
    assert (await collector.refresh()).kube_error is None


async def test_a_selector_group_no_service_uses_any_more_loses_its_history_after_the_span() -> None:
    # a spec.metrics.selector edited on every release: each old group's histories would stay for good
    kube, prom = Kube(), Prom()
    now = [1_800_000_000.0]
    collector = Collector(kube, prom, ["ns"], 15.0, clock=lambda: now[0])  # type: ignore[arg-type]
    pooled = service("a")
    pooled["spec"]["metrics"] = {"selector": {"pool": "a"}}
    kube.services = [pooled]
    await collector.refresh()
    assert {key[0] for key in collector.history} == {(("pool", "a"),)}
    kube.services = [service("a")]  # the selector edited away
    now[0] += HISTORY_SPAN / 2
    await collector.refresh()
    assert {key[0] for key in collector.history} == {(("pool", "a"),), ()}  # kept while it may come back
    now[0] += HISTORY_SPAN
    await collector.refresh()
    assert {key[0] for key in collector.history} == {()}


async def test_a_restarted_operator_without_its_history_says_so_until_it_reads_it_or_would_have_lost_it() -> None:
    kube, clock = Kube(), [1_800_000_000.0]
    collector = Collector(kube, HistoryDownProm(), ["ns"], 15.0, clock=lambda: clock[0])  # type: ignore[arg-type]
    kube.services = [service("a")]
    assert (await collector.refresh()).history_unread == {()}
    clock[0] += HISTORY_STALE - 1
    assert (await collector.refresh()).history_unread == {()}
    # by now the process it replaced would have no forecast either: the load seen sizes alone
    clock[0] += 1
    assert (await collector.refresh()).history_unread == frozenset()
    young = Collector(kube, Prom(), ["ns"], 15.0, clock=lambda: clock[0])  # type: ignore[arg-type]
    assert (await young.refresh()).history_unread == frozenset()  # read at its first tick, even if empty


async def test_a_standby_that_takes_the_lease_an_hour_in_starts_without_its_history_too() -> None:
    kube, clock = Kube(), [1_800_000_000.0]
    collector = Collector(kube, HistoryDownProm(), ["ns"], 15.0, clock=lambda: clock[0])  # type: ignore[arg-type]
    collector.informers = {}  # no watches in this test
    kube.services = [service("a")]
    clock[0] += 3600.0  # waiting for the Lease: it read nothing meanwhile
    collector.start()
    assert (await collector.refresh()).history_unread == {()}
