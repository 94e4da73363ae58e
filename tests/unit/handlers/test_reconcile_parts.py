"""The pure parts of the reconcile step: conditions, the managed Deployment, observed lengths."""

import dataclasses
import math
from typing import Any

import pytest

from inferscale.adapters.workload import (
    Start,
    Starts,
    TargetState,
    Unready,
    conflicting_autoscalers,
    measure_time_to_ready,
    on_their_way,
    parse_time,
    rfc3339,
    selector_matches,
    starts_from_status,
    starts_to_status,
    target_state,
)
from inferscale.api.convert import observed_lengths, prefill_check, reported_lengths, with_observed_prior
from inferscale.api.spec import ModelRef
from inferscale.handlers.collector import slim
from inferscale.handlers.reconcile import managed_deployment
from inferscale.handlers.status import (
    Condition,
    append_history,
    has_news,
    merge_conditions,
    observed,
    prefill_condition,
    refresh_due,
    slo_condition,
    status_number,
    stuck_condition,
)
from inferscale.scaling import Policy, ScalerState, decide
from inferscale.scaling.types import MetricsState, Observation

BODY = {"metadata": {"name": "llm", "namespace": "ns", "uid": "u-1", "generation": 3}}


def test_conditions_keep_their_transition_time_until_the_status_changes() -> None:
    first = merge_conditions(None, [Condition("SLOMet", "True", "WithinSLO", "ok")], 100.0, 3)
    same = merge_conditions(first, [Condition("SLOMet", "True", "WithinSLO", "still ok")], 200.0, 3)
    flipped = merge_conditions(same, [Condition("SLOMet", "False", "SLOViolated", "TTFT")], 300.0, 3)
    assert first[0]["lastTransitionTime"] == same[0]["lastTransitionTime"] == "1970-01-01T00:01:40Z"
    assert same[0]["message"] == "still ok"
    assert flipped[0]["lastTransitionTime"] == "1970-01-01T00:05:00Z" and flipped[0]["observedGeneration"] == 3


def test_history_is_bounded() -> None:
    h: list[dict[str, object]] = []
    for i in range(30):
        h = append_history(h, float(i), i, i + 1, "QueueBacklog", "m")
    assert len(h) == 20 and h[-1]["to"] == 30 and h[0]["from"] == 10


def test_managed_deployment_is_owned_and_selects_its_own_pods() -> None:
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    dep = managed_deployment(BODY, template, 2)
    owner = dep["metadata"]["ownerReferences"][0]
    assert (owner["uid"], owner["controller"], owner["kind"]) == ("u-1", True, "InferenceService")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert labels["app"] == "x" and selector_matches(dep["spec"]["selector"], labels)
    assert dep["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    "edit",
    [
        {"metrics": "Partial"},
        {"metrics": "Stale"},
        {"requestRate": None},
        {"requestRate": 0},
        {"promptTokenRate": "12345"},
        {"generationTokenRate": True},
        {"promptTokenRate": float("inf")},
    ],
)
def test_lengths_read_back_from_status_need_a_complete_observation_of_numbers(edit: dict[str, Any]) -> None:
    observed = {"metrics": "Complete", "requestRate": 10, "promptTokenRate": 12345.0, "generationTokenRate": 2110.0}
    assert reported_lengths(observed) == (1200.0, 210.0)
    assert reported_lengths({**observed, **edit}) is None


def rates(request: float, prompt: float, generation: float, **more: Any) -> Observation:
    """One Ready replica's complete observation finishing `request` requests/s of those token rates."""
    return Observation(
        at=0,
        current_replicas=1,
        ready_replicas=1,
        state=MetricsState.COMPLETE,
        request_rate=request,
        prompt_token_rate=prompt,
        generation_token_rate=generation,
        **more,
    )


def test_the_prompt_length_behind_the_prior_leaves_out_the_prefix_cache_s_hits() -> None:
    obs = rates(10.0, 40000.0, 2000.0, cached_prompt_token_rate=32000.0)
    assert observed_lengths(obs) == (800.0, 200.0)  # 4,000-token prompts, 80% of them cached
    assert observed_lengths(dataclasses.replace(obs, cached_prompt_token_rate=None)) == (4000.0, 200.0)
    # more hits than prompt tokens (windows a scrape apart): all cached, the engine still computes a token
    assert observed_lengths(dataclasses.replace(obs, cached_prompt_token_rate=41000.0)) == (1.0, 200.0)
    observed = {"metrics": "Complete", "requestRate": 10, "promptTokenRate": 40000, "generationTokenRate": 2000}
    assert reported_lengths({**observed, "cachedPromptTokenRate": 32000.0}) == (800.0, 200.0)
    assert reported_lengths({**observed, "cachedPromptTokenRate": None}) == (4000.0, 200.0)
    assert reported_lengths({**observed, "cachedPromptTokenRate": "32000"}) is None


def test_observed_lengths_need_every_rate() -> None:
    obs = rates(10.0, 12345.0, 2110.0)
    assert observed_lengths(obs) == (1200.0, 210.0)
    for missing in ({"request_rate": None}, {"request_rate": 0.0}, {"prompt_token_rate": None}):
        assert observed_lengths(Observation(**{**obs.__dict__, **missing})) is None
    # prompt tokens of some pods over the requests of all of them: a length of no pod
    assert observed_lengths(Observation(**{**obs.__dict__, "partial_rates": frozenset({"prompt_tokens"})})) is None
    # fewer generated tokens than finished requests (aborts, rate() jitter): a length of 1, not 0.95,
    # which the perf model refuses and which stopped the service's tick
    jitter = Observation(**{**obs.__dict__, "generation_token_rate": 9.5})
    assert observed_lengths(jitter) == (1200.0, 1.0)
    model = ModelRef.model_validate({"name": "m", "profile": "llama-3.1-8b", "gpu": "h100-80gb"})
    assert (with_observed_prior(Policy(1, 4), model, jitter).capacity_prior_rps or 0) > 0
    # a tick without rates sizes at the lengths reported before, not at the typical 1000/200
    blank = Observation(**{**obs.__dict__, "request_rate": None})
    before = with_observed_prior(Policy(1, 4), model, obs).capacity_prior_rps
    assert with_observed_prior(Policy(1, 4), model, blank, (1200.0, 210.0)).capacity_prior_rps == before
    assert with_observed_prior(Policy(1, 4), model, blank).capacity_prior_rps is None  # Policy's own: none
    # the lengths a prior was computed at go with it, for the decision to say
    assert with_observed_prior(Policy(1, 4), model, obs).capacity_prior_at == (1200.0, 210.0)
    assert with_observed_prior(Policy(1, 4), model, blank, (990.0, 52.0)).capacity_prior_at == (990.0, 52.0)
    huge = rates(10.0, 10.0 * 200_000, 2110.0)  # prompts beyond the context: no prior, and no lengths for one
    unfit = with_observed_prior(Policy(1, 4), model, huge)
    assert unfit.capacity_prior_rps is None and unfit.capacity_prior_at is None and unfit.capacity_note


def seconds(ts: TargetState) -> tuple[float, ...]:
    """The start-ups measured on the Ready pods that never restarted (a restarted one counts only if watched)."""
    return tuple(s.seconds for s in ts.starts if not s.restarted)


def pod(name: str, ready: bool, created: str, became: str | None = None, **extra: object) -> dict[str, object]:
    conds = [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": became or created}]
    return {
        "metadata": {"name": name, "labels": {"app": "x"}, "creationTimestamp": created, **extra},
        "status": {"phase": "Running" if ready else "Pending", "conditions": conds},
    }


def test_target_state_counts_ready_pending_and_time_to_ready() -> None:
    dep = {"metadata": {"uid": "d"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "x"}}}}
    pods = [
        pod("a", True, "2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z"),
        pod("b", False, "2026-01-01T00:00:00Z"),
        pod("c", True, "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z", deletionTimestamp="2026-01-01T00:02:00Z"),
        {**pod("d", True, "2026-01-01T00:00:00Z"), "metadata": {"name": "d", "labels": {"app": "other"}}},
    ]
    ts = target_state(dep, pods, now=1e10)
    assert ts.ready_pods == frozenset({"a"}) and ts.pending == 1 and ts.replicas == 3 and ts.restarting == 0
    assert seconds(ts) == (90.0,)
    looping = {**pod("e", False, "2026-01-01T00:00:00Z"), "status": {"phase": "Running", "restarts": 7}}
    ts = target_state(dep, [*pods, looping], now=1e10)
    assert ts.pending == 2 and ts.restarting == 1  # still on its way, as HPA counts it, and named
    # replicas the API server did not default (null, or absent): its default, 1, not a Deployment scaled to 0
    for spec in ({**dep["spec"], "replicas": None}, {"selector": dep["spec"]["selector"]}):
        assert target_state({**dep, "spec": spec}, pods, now=1e10).replicas == 1


def unwatched(samples: tuple[float, ...], previous: float | None, prior: float | None = None) -> float | None:
    """The lead from pods Ready for a day before the operator first saw them."""
    starts = tuple(Start(f"p{i}", s, 86_400.0, 86_400.0 - s) for i, s in enumerate(samples))
    ts = TargetState(True, len(samples), frozenset(s.pod for s in starts), 0, 0, None, starts)
    return measure_time_to_ready(ts, Starts(), previous, 10.0, prior).value


def test_the_lead_is_the_slowest_start_and_a_readiness_flap_is_not_a_start() -> None:
    assert unwatched((26.0, 31.0, 40.0), None) == 40.0
    # a pod Ready since yesterday whose probe flapped half an hour after its creation "started" in 30 minutes
    assert unwatched((30.0, 1800.0), None) == 30.0
    assert unwatched((20.0, 40.0), None) == 40.0  # exactly twice the typical start still counts
    assert unwatched((), 37.0) == 37.0 and unwatched((), None) is None
    assert unwatched((0.0, 0.0, 5.0), None) == 0.0


def test_one_adopted_pod_whose_probe_flapped_is_measured_against_the_prior_not_itself() -> None:
    # a 1-replica Deployment adopted three days on: its Ready time is a flap's, 40 minutes after creation
    assert unwatched((2400.0,), None, prior=180.0) is None  # the prior stands until a start is watched
    assert unwatched((2400.0,), 200.0, prior=180.0) == 200.0
    assert unwatched((300.0,), None, prior=180.0) == 300.0  # a slow start within twice the prior counts
    assert unwatched((2400.0, 2400.0, 2400.0), None, prior=180.0) == 2400.0  # a slow model on every pod
    # a last measure hand-edited to 0 does not make a real start read as a flap (and hold the lead at 0)
    assert unwatched((240.0,), 0.0, prior=180.0) == 240.0


def test_a_watched_start_that_crashed_once_during_warm_up_is_still_measured() -> None:
    fast = [fleet_pod("a", 60.0), fleet_pod("b", 60.0)]
    crashed = {**fleet_pod("d", None), "status": {**fleet_pod("d", None)["status"], "restarts": 1}}  # type: ignore[dict-item]
    retried = {**fleet_pod("d", 895.0), "status": {**fleet_pod("d", 895.0)["status"], "restarts": 1}}  # type: ignore[dict-item]
    got = lead([(120.0, [*fast, fleet_pod("d", None)]), (300.0, [*fast, crashed]), (900.0, [*fast, retried])])
    assert got == 895.0  # creation to its first Ready, the retry included: the lead must cover it
    # unwatched, a restarted pod's Ready time may be its restart's: not a start
    assert lead([(900.0, [*fast, retried])]) == 60.0


def test_a_ready_time_a_node_stamped_in_the_future_is_not_a_start() -> None:
    ahead = fleet_pod("n", 1000.0)  # the node's clock 10 minutes ahead of the operator's at T0 + 400
    assert seconds(target_state(DEP, [ahead], T0 + 400.0)) == ()
    assert seconds(target_state(DEP, [fleet_pod("m", 420.0)], T0 + 400.0)) == (420.0,)  # within the slack


def test_a_watched_start_counts_however_slow_and_what_status_keeps_round_trips() -> None:
    starts = (Start("fast", 60.0, 9_000.0, 8_940.0), Start("slow", 400.0, 400.0, 5.0))
    unready = (Unready("new", True), Unready("flapped", False))
    ts = TargetState(True, 4, frozenset({"fast", "slow"}), 2, 0, None, starts, unready=unready)
    got = measure_time_to_ready(ts, Starts(frozenset({"slow", "gone"}), {"fast": 60.0, "deleted": 900.0}), None, 10.0)
    assert got.value == 400.0 and got.samples == 2  # "slow" was not Ready at a tick and is Ready 5 s now
    # the watch is on pods not Ready yet, not on one that lost its readiness
    assert got.kept == Starts(frozenset({"new"}), {"fast": 60.0, "slow": 400.0})
    assert starts_from_status(starts_to_status(got.kept)) == got.kept


def at(offset: float) -> str:
    return rfc3339(T0 + offset)


T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def fleet_pod(
    name: str, ready: float | None, not_ready_since: float = 2.0, scheduled: float = 1.0
) -> dict[str, object]:
    """Created at T0, placed `scheduled` s later; Ready since `ready` s, else not Ready since `not_ready_since`."""
    cond = {"type": "Ready", "status": "False", "lastTransitionTime": at(not_ready_since)}
    if ready is not None:
        cond = {"type": "Ready", "status": "True", "lastTransitionTime": at(ready)}
    placed = {"type": "PodScheduled", "status": "True", "lastTransitionTime": at(scheduled)}
    return {
        "metadata": {"name": name, "labels": {"app": "x"}, "creationTimestamp": at(0)},
        "status": {"phase": "Running", "conditions": [placed, cond]},
    }


DEP = {"spec": {"replicas": 4, "selector": {"matchLabels": {"app": "x"}}}}


def lead(
    ticks: list[tuple[float, list[dict[str, object]]]], interval: float = 10.0, ahead: float | None = None
) -> float | None:
    """The lead after `ticks` (offsets on the cluster's clock); `ahead`: the operator's clock runs this far ahead
    of the cluster's and the operator knows when it last ticked (status.scaler.lastTick)."""
    kept, value, last = Starts(), None, None
    for offset, pods in ticks:
        now = T0 + offset + (ahead or 0.0)
        since = now - last if ahead is not None and last is not None else None
        got = measure_time_to_ready(target_state(DEP, pods, now), kept, value, interval, None, since)
        kept, value, last = got.kept, got.value, now
    return value


def test_a_pod_first_seen_starting_late_is_still_watched() -> None:
    # the operator came back (or was upgraded) two minutes into a rollout: the slow pool's pods are 120 s
    # old and not Ready yet, their Ready condition dating from their placement
    fast = [fleet_pod("a", 60.0), fleet_pod("b", 60.0)]
    assert lead([(120.0, [*fast, fleet_pod("c", None), fleet_pod("d", None)]),
                 (400.0, [*fast, fleet_pod("c", 400.0), fleet_pod("d", 395.0)])]) == 400.0  # fmt: skip


def test_a_start_watched_between_two_ticks_counts_with_the_operators_clock_two_minutes_ahead() -> None:
    # a new GPU node, then the model: 480 s on the cluster's clocks. The operator's clock runs 2 minutes ahead, so
    # the pod's Ready time reads 130 s old at the tick that sees it Ready: by the timestamps alone, a flap
    fast = [fleet_pod("a", 60.0), fleet_pod("b", 60.0)]
    ticks = [(470.0, [*fast, fleet_pod("d", None)]), (480.0, [*fast, fleet_pod("d", 480.0)])]
    assert lead(ticks, ahead=120.0) == 590.0  # watched: its age less the 10 s since the last tick, the safe side
    assert lead([(470.0, [*fast, fleet_pod("d", None)]), (480.0, [*fast, fleet_pod("d", 480.0)])]) == 480.0
    # without knowing when it last ticked (a status from an older version), the timestamps decide, as before
    ticks_blind = [(470.0 + 120.0, [*fast, fleet_pod("d", None)]), (480.0 + 120.0, [*fast, fleet_pod("d", 480.0)])]
    assert lead(ticks_blind) == 60.0


def test_a_watched_pod_that_flapped_while_the_operator_was_down_is_measured_as_unwatched() -> None:
    fast = [fleet_pod("a", 60.0), fleet_pod("b", 60.0), fleet_pod("c", 60.0)]
    # watched at 120 s; Ready at 400 s, flapped at 3,000 s, seen again at 3,100 s: its Ready is 100 s old
    got = lead([(120.0, [*fast, fleet_pod("d", None)]), (3100.0, [*fast, fleet_pod("d", 3000.0)])])
    assert got == 60.0  # unwatched, so 3,000 s is tested against the typical start, as a flap
    # an old pod that lost its readiness a day after its placement is no start to watch either
    ts = target_state(DEP, [fleet_pod("e", None, not_ready_since=86_000.0)], T0 + 86_400.0)
    assert measure_time_to_ready(ts, Starts(), None, 10.0).kept.watching == frozenset()


def test_a_gpu_node_provisioned_for_a_pod_is_part_of_its_start_and_an_hour_without_gpus_is_not() -> None:
    # a new GPU node in 5 minutes, then 3 minutes to Ready: the forecast must lead by all 480 s
    provisioned = fleet_pod("c", 480.0, scheduled=300.0)
    assert seconds(target_state(DEP, [provisioned], T0 + 485.0)) == (480.0,)
    # placed after 50 minutes without GPUs, Ready 400 s later: a start of 400 s plus the 900 s of node
    # provisioning a start may include, not 3,400 s
    stuck = fleet_pod("a", 3400.0, scheduled=3000.0)
    assert seconds(target_state(DEP, [stuck], T0 + 3405.0)) == (1300.0,)
    assert seconds(target_state(DEP, [fleet_pod("b", 100.0, scheduled=90.0)], T0 + 105.0)) == (100.0,)


def test_what_status_keeps_of_the_starts_is_read_tolerantly() -> None:
    garbage = {
        "watching": ["a", 3, None],
        "starts": [{"pod": "b", "seconds": 90}, {"pod": "c", "seconds": -1}, {"pod": "d", "seconds": float("nan")},
                   {"pod": "e", "seconds": 1e9}, {"pod": "f", "seconds": True}, {"seconds": 5}, "x"],
    }  # fmt: skip
    assert starts_from_status(garbage) == Starts(frozenset({"a"}), {"b": 90.0})
    for nothing in (None, [], "x", {"watching": "a", "starts": {"b": 1}}):
        assert starts_from_status(nothing) == Starts()


def test_a_restarted_pod_or_a_ready_time_hours_after_creation_is_not_a_start() -> None:
    dep = {"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "x"}}}}
    restarted = pod("b", True, "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z")
    restarted["status"]["containerStatuses"] = [{"name": "vllm", "restartCount": 1}]  # type: ignore[index]
    pods = [
        pod("a", True, "2026-01-01T00:00:00Z", "2026-01-01T00:03:00Z"),
        restarted,
        pod("c", True, "2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"),  # readiness lost and regained
    ]
    assert seconds(target_state(dep, pods, now=1e10)) == (180.0,)
    # the collector's slim copy keeps the count
    assert slim(restarted, "pods")["status"]["restarts"] == 1
    assert seconds(target_state(dep, [slim(restarted, "pods")], now=1e10)) == ()


def test_an_init_container_that_crash_looped_makes_a_restart_too() -> None:
    """A weight download that crash-loops: the pod is restarting, not a start-up to lead by."""
    dep = {"spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}}}
    looped = pod("b", True, "2026-01-01T00:00:00Z", "2026-01-01T00:20:00Z")
    looped["status"]["initContainerStatuses"] = [{"name": "download-weights", "restartCount": 6}]  # type: ignore[index]
    looped["status"]["containerStatuses"] = [{"name": "vllm", "restartCount": 0}]  # type: ignore[index]
    pods = [pod("a", True, "2026-01-01T00:00:00Z", "2026-01-01T00:03:00Z"), looped]
    assert seconds(target_state(dep, pods, now=1e10)) == (180.0,)
    assert slim(looped, "pods")["status"]["restarts"] == 6
    looping = pod("c", False, "2026-01-01T00:00:00Z")
    looping["status"]["initContainerStatuses"] = [{"name": "download-weights", "restartCount": 3}]  # type: ignore[index]
    assert target_state(dep, [looping], now=1767225600.0 + 600).restarting == 1


def test_unschedulable_gpu_pods_become_capacity_blocked_after_the_timeout() -> None:
    dep = {"spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}}}
    p = pod("b", False, "2026-01-01T00:00:00Z")
    p["status"]["conditions"].append(  # type: ignore[index]
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    )
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    assert target_state(dep, [p], now=start + 30).capacity_blocked == 0
    late = target_state(dep, [p], now=start + 300)
    assert late.capacity_blocked == 1 and "Insufficient nvidia.com/gpu" in (late.capacity_message or "")


def test_other_autoscalers_on_the_same_target_are_found() -> None:
    hpa = {
        "metadata": {"name": "h", "namespace": "ns"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "llm"}},
    }
    so = {"metadata": {"name": "k", "namespace": "ns"}, "spec": {"scaleTargetRef": {"name": "llm"}}}
    elsewhere = {
        "metadata": {"name": "h2", "namespace": "other"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "llm"}},
    }
    assert conflicting_autoscalers("ns", "Deployment", "llm", [hpa, elsewhere], [so]) == [
        "HorizontalPodAutoscaler/h",
        "ScaledObject/k",
    ]
    assert conflicting_autoscalers("ns", "Deployment", "other", [hpa], [so]) == []


def test_candidate_pods_narrow_by_a_label_and_fall_back_to_the_namespace() -> None:
    from inferscale.handlers.collector import Tick

    def p(name: str, **labels: str) -> dict[str, object]:
        return {"metadata": {"name": name, "labels": labels}}

    tick = Tick(at=0.0, seq=1, pods={"ns": [p("a", app="x", tier="gpu"), p("b", app="y"), p("c", tier="gpu")]})
    names = {str(q["metadata"]["name"]) for q in tick.candidate_pods("ns", {"matchLabels": {"app": "x"}})}  # type: ignore[index]
    assert names == {"a"}
    expr = {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    assert len(tick.candidate_pods("ns", expr)) == 3  # no matchLabels: every pod, filtered by the caller
    assert tick.candidate_pods("other", {"matchLabels": {"app": "x"}}) == []


def slo_true() -> list[dict[str, str]]:
    return [{"type": "SLOMet", "status": "True", "reason": "WithinSLO", "message": "TTFT P95 200ms"}]


def test_status_is_written_when_it_says_something_new_and_refreshed_otherwise() -> None:
    old = {
        "observed": {"at": "2025-12-31T23:59:55Z", "metrics": "Complete", "kvCacheUtilization": 0.5, "waiting": 1.0},
        "decision": {"at": "2026-01-01T00:00:00Z", "replicas": 2, "reason": "KVCacheSaturation", "message": "a"},
        "recommendations": [{"signal": "KVCacheSaturation", "replicas": 2, "value": 0.5, "message": "kv 50%"}],
        "conditions": [{"type": "SLOMet", "status": "True", "reason": "WithinSLO", "message": "TTFT P95 200ms"}],
        "desiredReplicas": 2,
        "scaler": {"recommendations": [{"at": 1.0, "replicas": 2}], "lastTick": {"at": 1.0, "ready": 2, "waiting": 0}},
    }
    t0 = parse_time("2026-01-01T00:00:00Z")
    assert t0 is not None
    figures = {
        "observed": {"at": "2026-01-01T00:00:15Z", "metrics": "Complete", "kvCacheUtilization": 0.6, "waiting": 2.0},
        "decision": {"at": "2026-01-01T00:00:15Z", "replicas": 2, "reason": "KVCacheSaturation", "message": "b"},
        "recommendations": [{"signal": "KVCacheSaturation", "replicas": 2, "value": 0.6, "message": "kv 60%"}],
        "conditions": [{"type": "SLOMet", "status": "True", "reason": "WithinSLO", "message": "TTFT P95 210ms"}],
        "desiredReplicas": 2,
        "scaler": {"recommendations": [{"at": 1.0, "replicas": 2}], "lastTick": {"at": 16.0, "ready": 2, "waiting": 3}},
    }
    assert not has_news(old, figures)  # only figures and timestamps moved
    assert not refresh_due(old, figures, t0 + 15)
    assert refresh_due(old, figures, t0 + 30)
    assert refresh_due({}, figures, t0 + 15)
    assert not refresh_due(old, {"conditions": slo_true()}, t0 + 30)  # a problem status carries no figures
    assert has_news(old, {**figures, "desiredReplicas": 3})
    assert has_news(old, {**figures, "observed": {**figures["observed"], "metrics": "Missing"}})
    slo = [{"type": "SLOMet", "status": "False", "reason": "SLOViolated", "message": "TTFT P95 900ms"}]
    assert has_news(old, {**figures, "conditions": slo})
    rec = [{"signal": "KVCacheSaturation", "replicas": 3, "value": 0.9, "message": "kv 90%"}]
    assert has_news(old, {**figures, "recommendations": rec})
    assert has_news(old, {**figures, "scaler": {"recommendations": [{"at": 1.0, "replicas": 3}]}})
    grew = {"recommendations": [{"at": 1.0, "replicas": 2}], "lastTick": {"at": 16.0, "ready": 3, "waiting": 3}}
    assert has_news(old, {**figures, "scaler": grew})
    # a capacity scale-up waiting for its second tick: that tick must read this one's ask from status
    asked = {
        "recommendations": [{"at": 1.0, "replicas": 2}],
        "lastTick": {**figures["scaler"]["lastTick"], "capacityAsk": 3},
    }
    assert has_news(old, {**figures, "scaler": asked})
    assert has_news({**old, "scaler": asked}, figures)  # and the ask withdrawn
    assert has_news({}, figures)


def test_observed_shows_the_figures_the_decision_read_and_none_it_refused() -> None:
    obs = Observation(
        at=0.0, current_replicas=2, ready_replicas=2, pods_reporting=2, state=MetricsState.COMPLETE,
        kv_cache_utilization=math.inf, waiting=1e308 * 10, running=-3.0, request_rate=2.5,
    )  # fmt: skip
    shown = observed(obs, "")
    assert (shown["kvCacheUtilization"], shown["kvCachePercent"], shown["waiting"], shown["running"]) == (None,) * 4
    assert shown["requestRate"] == 2.5


def test_the_per_request_tpot_shows_in_observed_and_in_the_slo_condition_when_it_has_an_slo() -> None:
    obs = Observation(
        at=0.0, current_replicas=2, ready_replicas=2, pods_reporting=2, state=MetricsState.COMPLETE,
        kv_cache_utilization=0.2, running=8.0, ttft_p95=0.2, itl_mean=0.02, tpot_p95=0.0875,
    )  # fmt: skip
    assert observed(obs, "")["tpotP95"] == "88ms"
    policy = Policy(min_replicas=1, max_replicas=8, slo_tpot_p95=0.05)
    cond = slo_condition(decide(obs, policy, ScalerState(), 0.0), obs, 0.5, 0.05, policy.slo_tpot_p95)
    assert (cond.status, cond.reason) == ("False", "SLOViolated")
    assert cond.message.endswith("TPOT P95 88ms (SLO 50ms)")
    unset = Policy(min_replicas=1, max_replicas=8)
    cond = slo_condition(decide(obs, unset, ScalerState(), 0.0), obs, 0.5, 0.05)
    assert cond.status == "True" and "TPOT" not in cond.message
    # set, but the engine exports no per-request histogram: said, not silently left out
    blind = dataclasses.replace(obs, tpot_p95=None)
    cond = slo_condition(decide(blind, policy, ScalerState(), 0.0), blind, 0.5, 0.05, policy.slo_tpot_p95)
    assert cond.message.endswith(
        "TPOT P95 unknown: no vllm:request_time_per_output_token_seconds samples in the window"
    )


def lengths(prompt: float, output: float, rate: float = 10.0) -> Observation:
    return Observation(
        at=0.0, current_replicas=2, ready_replicas=2, pods_reporting=2, state=MetricsState.COMPLETE,
        request_rate=rate, prompt_token_rate=rate * prompt, generation_token_rate=rate * output,
    )  # fmt: skip


def test_a_prefill_step_over_the_itl_slo_is_a_false_condition_that_names_the_budget_that_fits() -> None:
    model = ModelRef(name="m", profile="llama-3.1-8b")
    long = prefill_check(model, lengths(15000, 149), 7.0, 0.05)  # Mooncake's mean lengths
    cond = prefill_condition(long, 0.05)
    assert (cond.type, cond.status, cond.reason) == ("PrefillStepWithinITL", "False", "PrefillStepOverITL")
    assert "over the ITL SLO 50 ms" in cond.message and "--max-num-batched-tokens 1792" in cond.message
    # the engine at that budget, told to the operator: within
    fixed = prefill_check(
        ModelRef(name="m", profile="llama-3.1-8b", max_num_batched_tokens=1792), lengths(15000, 149), 7.0, 0.05
    )
    assert prefill_condition(fixed, 0.05).status == "True"
    assert prefill_condition(prefill_check(model, lengths(1155, 211), 0.5, 0.05), 0.05).reason == "WithinITL"


def test_the_prefill_step_is_unknown_without_a_profile_lengths_or_an_itl_slo() -> None:
    profiled = ModelRef(name="m", profile="llama-3.1-8b")
    assert prefill_check(ModelRef(name="m"), lengths(15000, 149), 7.0, 0.05) is None
    assert prefill_check(profiled, dataclasses.replace(lengths(15000, 149), prompt_token_rate=None), 7.0, 0.05) is None
    assert prefill_check(profiled, lengths(15000, 149), 7.0, None) is None
    cond = prefill_condition(None, 0.05)
    assert (cond.status, cond.reason) == ("Unknown", "NotAssessed")


def test_a_pod_of_another_deployment_that_the_selector_also_matches_is_not_counted() -> None:
    # a canary Deployment whose pods carry the stable one's labels and more: HPA counts them, their queue and their
    # deletion costs are not this Deployment's
    def owned(pod: dict[str, Any], replica_set: str, template_hash: str) -> dict[str, Any]:
        meta = pod["metadata"]
        meta["labels"] = {**meta["labels"], "pod-template-hash": template_hash}
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": replica_set, "controller": True}]
        return pod

    stable = owned(fleet_pod("llm-7d9f8c6b5-x2x4q", 100.0), "llm-7d9f8c6b5", "7d9f8c6b5")
    canary = owned(fleet_pod("llm-canary-5c8d7f9b4-q2w5z", 100.0), "llm-canary-5c8d7f9b4", "5c8d7f9b4")
    adopted = fleet_pod("bare", 100.0)  # no controller: its ReplicaSet would adopt it
    # another kind of controller's pods with the same labels: a StatefulSet's, a Job's (no deletion costs on them)
    stateful = fleet_pod("llm-0", 100.0)
    stateful["metadata"]["ownerReferences"] = [{"kind": "StatefulSet", "name": "llm", "controller": True}]
    job = fleet_pod("llm-bench-x2x4q", 100.0)
    job["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "llm-bench", "controller": True}]
    deployment = {**DEP, "metadata": {"name": "llm"}}
    ts = target_state(deployment, [stable, canary, adopted, stateful, job], T0 + 200.0)
    assert ts.ready_pods == {"llm-7d9f8c6b5-x2x4q", "bare"}
    kept = slim(canary, "pods")["metadata"]
    assert kept["ownerReferences"] == [{"kind": "ReplicaSet", "name": "llm-canary-5c8d7f9b4", "controller": True}]


def test_a_figure_status_cannot_carry_is_left_out_not_written_as_infinity() -> None:
    assert status_number(1.234567) == 1.2346 and status_number(None) is None
    assert status_number(float("inf")) is None and status_number(float("nan")) is None  # json.dumps: Infinity, NaN


def test_replicas_on_their_way_are_no_more_than_the_deployment_asks_and_none_stuck_long_after_placement() -> None:
    lead = 120.0  # stuck past max(2 x 120 s, 120 s + 5 min) = 7 min on a node
    ready = [fleet_pod(f"r{i}", 100.0) for i in range(3)]
    starting = fleet_pod("starting", None)  # on a node for 2 minutes at T0 + 121
    stuck = fleet_pod("stuck", None)  # the same pod, an hour later: an image that does not pull
    looping = {**fleet_pod("looping", None), "status": {"phase": "Running", "restarts": 9}}
    waiting = {**fleet_pod("waiting", None), "status": {"phase": "Pending", "conditions": []}}  # for a node

    def coming(pods: list[dict[str, object]], replicas: int, now: float) -> tuple[int, tuple[str, ...]]:
        return on_their_way(target_state({**DEP, "spec": {**DEP["spec"], "replicas": replicas}}, pods, now), lead)

    assert coming([*ready, starting], 4, T0 + 121.0) == (1, ())
    assert coming([*ready, stuck], 4, T0 + 3600.0) == (0, ("stuck",))
    assert coming([*ready, stuck], 4, T0 + 420.0) == (1, ())  # 7 min on its node: not yet
    # a crash loop still counts, as HPA counts it (PodsRestarting names it), and so does a pod waiting for a node
    assert coming([*ready, looping, waiting], 5, T0 + 3600.0) == (2, ())
    # a rollout's surge: two new pods beside three Ready old ones, for 4 replicas: one more to come, not two
    assert coming([*ready, starting, fleet_pod("surge", None)], 4, T0 + 121.0) == (1, ())
    assert coming([*ready, starting], 3, T0 + 121.0) == (0, ())  # a pod on its way out
    # a pod that served for a day and lost its readiness (a probe timing out under load) is not stuck on a start
    blip = fleet_pod("blip", None, not_ready_since=86_380.0)
    assert coming([*ready, blip], 4, T0 + 86_400.0) == (1, ())


def test_a_stuck_pod_is_named_in_a_condition() -> None:
    ts = target_state(DEP, [*(fleet_pod(f"r{i}", 100.0) for i in range(3)), fleet_pod("stuck", None)], T0 + 3600.0)
    cond = stuck_condition(ts, "llm", 120.0)
    assert (cond.status, cond.reason) == ("True", "NotReadyLongAfterPlacement")
    assert cond.message.startswith(
        "1 pod(s) of Deployment llm (stuck) have been on a node for more than 7m (the time-to-ready of 2m, twice over "
        "or 5m past it) without becoming Ready, and no longer count as replicas on their way"
    )
    assert stuck_condition(ts, "llm", 3600.0).status == "False"  # within twice a slow model's hour
