"""One InferenceService, one tick: validate, find the target, observe, decide, act, explain.

Idempotent and level-triggered: everything it needs from the past is in the object's status
(`status.scaler`), so a restart or a re-run of the same tick changes nothing it should not.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from inferscale.adapters.engine_args import engine_limits
from inferscale.adapters.kube import KubeApi, KubeError
from inferscale.adapters.observation import Workload, observe, pod_loads
from inferscale.adapters.prometheus import deployment_of, deployment_pods
from inferscale.adapters.workload import (
    Starts,
    TimeToReadyMeasure,
    conflicting_autoscalers,
    measure_time_to_ready,
    on_their_way,
    parse_time,
    rfc3339,
    starts_from_status,
    starts_to_status,
    target_state,
)
from inferscale.api.convert import (
    TYPICAL_LENGTHS,
    capacity_prior,
    noting_a_missing_prior,
    observed_lengths,
    prefill_check,
    reported_lengths,
    with_engine_limits,
    with_observed_prior,
)
from inferscale.api.models import API_VERSION, KIND, PLURAL, InvalidSpec
from inferscale.api.spec import InferenceServiceSpec
from inferscale.handlers import metrics
from inferscale.handlers.collector import HistoryKey, Tick, add_pod_rate, as_selector
from inferscale.handlers.runtime import Runtime, ScaleRefusal, post_event
from inferscale.handlers.scale_down import steer_scale_down
from inferscale.handlers.status import (
    LAST_DECISION,
    TRUE_IS_BAD,
    Condition,
    append_history,
    condition_changed,
    condition_reworded,
    decision_status,
    has_news,
    held,
    merge_conditions,
    metrics_condition,
    observed,
    prefill_condition,
    recommendations,
    recreate_count,
    refresh_due,
    restarting_condition,
    slo_condition,
    status_number,
    stuck_condition,
    target_changed,
    untold_scale,
)
from inferscale.scaling import decide, state_from_status, state_to_status
from inferscale.scaling.durations import format_duration
from inferscale.scaling.telling import Told, worth_telling
from inferscale.scaling.types import Decision, MetricsState, Observation, Policy, ScaleEvent, ScalerState

MANAGED_BY = "app.kubernetes.io/managed-by"
TEMPLATE_HASH = "inferscale.dev/template-hash"
SERVICE_LABEL = "inferscale.dev/inferenceservice"


def _cr_path(ns: str, name: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{ns}/{PLURAL}/{name}"


async def write_status(kube: KubeApi, path: str, body: Mapping[str, Any], logger: logging.Logger) -> bool:
    """Whether it was written. A refresh's resourceVersion precondition failing (409) is not an error:
    the status changed since the tick read it, and the refresh is moot."""
    try:
        await kube.merge_patch(path, body, answer=False)
        return True
    except KubeError as e:
        if e.status == 409 and "resourceVersion" in (body.get("metadata") or {}):
            return False
        return _status_failed(path, e, logger)


def _status_failed(path: str, e: KubeError, logger: logging.Logger) -> bool:
    metrics.KUBE_ERRORS.labels("status").inc()
    logger.warning("could not write status %s: %s", path, e)
    return False


def _identity(meta: Any) -> tuple[Any, Any]:
    return (meta.get("uid"), meta.get("generation")) if isinstance(meta, Mapping) else (None, None)


def _event_key(event: ScaleEvent) -> tuple[float, int, int]:
    return event.at, event.from_replicas, event.to_replicas


def _scale_events(status: Any) -> frozenset[tuple[float, int, int]]:
    """The (at, from, to) of each scale event a status's scaler records, as the rate limits read them."""
    scaler = status.get("scaler") if isinstance(status, Mapping) else None
    return frozenset(_event_key(e) for e in state_from_status(scaler).scale_events)


RATE_HISTORY = "rate_history"  # the failed query a decision names while a restarted operator has no history yet

CONTENDED = (
    "another writer recorded a scale of this service after this tick read it (a second inferscale without "
    "leader election, or a second install watching this namespace?): this process does not write its status "
    "over that record, and decides again on it next tick"
)


async def _write_own_status(
    rt: Runtime, body: Mapping[str, Any], path: str, status: Mapping[str, Any], now: float, keep: Sequence[str] = ()
) -> bool | None:
    """The tick's status write, on the resourceVersion the tick read (or its own last write left): a write
    that reaches the server late, sent into a network partition and carried out after another leader wrote,
    is refused instead of putting older state over newer. Refused while this process may still write (the
    fence let it through: a refresh landing since the list, a label), it is sent once more on the version
    read then, if the spec is the one decided on. An edit of the spec since the list (a new generation: mode
    Advisory, a lower max) or a new object under the name gives None: nothing is written, and the next tick
    decides on what the user now says; but the fields named in `keep` (the record of a scale made or taken
    back), which no edit of the spec undoes, are still sent on their own. Each write's answer moves the version
    on for the tick's next write."""
    meta = body.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None

    async def send(version: str | None) -> dict[str, Any]:
        patch = {"metadata": {"resourceVersion": version}, "status": status} if version else {"status": status}
        if "scaler" in status:
            # as sent, not as confirmed: a write whose answer was lost may land after the next tick's list, and
            # this process's own record must not read as another writer's then
            _own(rt, body, status, now)
        return await rt.kube.merge_patch(path, patch)

    try:
        try:
            answer = await send(version)
        except KubeError as e:
            if e.status != 409 or not version:
                raise
            current = await rt.kube.get(path.removesuffix("/status"))
            fresh = current.get("metadata") or {}
            if _identity(fresh) != _identity(meta):
                rt.logger.info("%s: the spec changed since the tick read it; deciding again next tick", path)
                if not keep or _identity(fresh)[0] != _identity(meta)[0]:
                    return None
                status = {k: status[k] for k in keep if k in status}
            if "scaler" in status and await _contended(rt, body, current, status, now):
                return None
            answer = await send(fresh.get("resourceVersion"))
    except KubeError as e:
        return _status_failed(path, e, rt.logger)
    written = (answer.get("metadata") or {}).get("resourceVersion")
    if written and isinstance(meta, dict):
        meta["resourceVersion"] = written
    return True


OWN_EVENTS_KEPT = 3600.0  # seconds a scale event this process wrote is remembered as its own: past any period


def _own(rt: Runtime, body: Mapping[str, Any], status: Mapping[str, Any], now: float) -> None:
    """Remember the scale events `status` adds to those the tick read: the ones this process made."""
    key = _service_key(body.get("metadata") or {})
    kept = {e for e in rt.written_events.get(key, frozenset()) if e[0] > now - OWN_EVENTS_KEPT}
    rt.written_events[key] = frozenset(kept | (_scale_events(status) - _scale_events(body.get("status"))))


async def _contended(
    rt: Runtime, body: Mapping[str, Any], current: Mapping[str, Any], status: Mapping[str, Any], now: float
) -> bool:
    """Whether the status now on the server records a scale that neither the tick read, nor this write carries,
    nor this process wrote: another process records scales of this service. Its record is what the rate limits
    count from; a second write over it would let both processes scale within one period. Told once an Event."""
    meta = body.get("metadata") or {}
    key = _service_key(meta)
    known = _scale_events(body.get("status")) | _scale_events(status) | rt.written_events.get(key, frozenset())
    if not _scale_events(current.get("status")) - known:
        return False
    rt.logger.warning("%s/%s: %s", meta.get("namespace"), meta.get("name"), CONTENDED)
    if key not in rt.told_contention:
        rt.told_contention.add(key)
        await post_event(rt, body, "Warning", "ConcurrentWriter", CONTENDED, now)
    return True


async def _patch_status(
    rt: Runtime,
    body: Mapping[str, Any],
    status: Mapping[str, Any],
    now: float,
    force: bool = False,
    keep: Sequence[str] = (),
) -> None:
    """Write `status` in the tick when it says something new (or `force`), else leave it or queue a refresh.
    `keep`: the fields written even over an edited spec (`_write_own_status`)."""
    meta = body.get("metadata") or {}
    old = body.get("status") or {}
    path = _cr_path(meta["namespace"], meta["name"]) + "/status"
    if force or has_news(old, status):
        metrics.STATUS_WRITES.labels("written").inc()
        await _write_own_status(rt, body, path, status, now, keep)
    elif not refresh_due(old, status, now):
        metrics.STATUS_WRITES.labels("unchanged").inc()
    elif rt.refresher is not None:
        version = meta.get("resourceVersion")
        body = {"metadata": {"resourceVersion": version}, "status": status} if version else {"status": status}
        written = parse_time((old.get("decision") or {}).get("at"))
        rt.refresher.submit(path, body, written if written is not None else -math.inf)
    else:
        metrics.STATUS_WRITES.labels("refreshed").inc()
        await _write_own_status(rt, body, path, status, now)


async def _problem(
    rt: Runtime, body: Mapping[str, Any], now: float, conditions: list[Condition], event_reason: str, message: str
) -> None:
    """A state in which nothing is scaled: say so in conditions, and once in an Event (again when the problem
    is worded differently: another HPA in the way, another error). The figures of the last decision go from
    status, as from the operator's gauges (`metrics.forget_figures`): printed as today's, they would say the
    service is being scaled on them."""
    status = body.get("status") or {}
    previous = status.get("conditions")
    meta = body.get("metadata") or {}
    # an edited spec that still has a problem (perhaps another one) is announced again
    edited = status.get("observedGeneration") not in (None, meta.get("generation"))
    problems = [c for c in conditions if c.status != "True" or c.type == "Conflict"]
    reworded = any(condition_reworded(previous, c) for c in problems)
    told = (event_reason, message, meta.get("generation"))
    news = edited or reworded or any(condition_changed(previous, c) for c in problems)
    # status writes refused for good leave `previous` where it was: told once by this process, not every tick
    key = _service_key(meta)
    if news and rt.told_problems.get(key) != told:
        await post_event(rt, body, "Warning", event_reason, message, now)
    rt.told_problems[key] = told
    # the engine's assessment outlives a problem with the target, so it is not announced again when that clears
    engine = held(previous, prefill_condition(None, None, lengths_known=False))
    if engine.status != "Unknown":
        conditions = [*conditions, engine]
    await _patch_status(
        rt,
        body,
        {
            "conditions": merge_conditions(previous, conditions, now, meta.get("generation")),
            "observedGeneration": meta.get("generation"),
            **dict.fromkeys(LAST_DECISION),
        },
        now,
        force=reworded,
    )
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    metrics.set_conditions(ns, name, ((c.type, c.status == "True", c.reason) for c in conditions))
    metrics.forget_figures(ns, name)


def _template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def managed_deployment(body: Mapping[str, Any], template: Mapping[str, Any], replicas: int) -> dict[str, Any]:
    """The Deployment an InferenceService owns in managed mode; deleting the service deletes it (GC)."""
    meta = body.get("metadata") or {}
    name = meta["name"]
    selector = {SERVICE_LABEL: name}
    pod_meta = dict(template.get("metadata") or {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **selector}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {MANAGED_BY: "inferscale", SERVICE_LABEL: name},
            "annotations": {TEMPLATE_HASH: _template_hash(template)},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "name": name,
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {"metadata": pod_meta, "spec": template.get("spec") or {}},
        },
    }


def _template_update(
    body: Mapping[str, Any], template: Mapping[str, Any], deployment: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The JSON patch that puts the spec's pod template on the managed Deployment, whole: a merge patch kept
    every key the user took out (a nodeSelector, a priorityClassName), while the hash said it was applied.
    Never replicas: that is the decision's."""
    desired = managed_deployment(body, template, 1)
    ops: list[dict[str, Any]] = [{"op": "replace", "path": "/spec/template", "value": desired["spec"]["template"]}]
    if (deployment.get("metadata") or {}).get("annotations"):
        key = TEMPLATE_HASH.replace("~", "~0").replace("/", "~1")
        ops.append(
            {
                "op": "add",
                "path": f"/metadata/annotations/{key}",
                "value": desired["metadata"]["annotations"][TEMPLATE_HASH],
            }
        )
    else:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": desired["metadata"]["annotations"]})
    return ops


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("controller") for r in refs)


def _competing_services(tick: Tick, body: Mapping[str, Any], target: str, every: bool = False) -> list[str]:
    """Older Active InferenceServices on the same target win; this one stands down. `every`: all the other
    Active ones, older or newer (an Advisory service names whoever scales its target)."""
    meta = body.get("metadata") or {}
    mine = (parse_time(meta.get("creationTimestamp")) or 0.0, str(meta.get("name")))
    return [
        f"InferenceService/{name}"
        for created, name, uid in tick.services_by_target.get((str(meta.get("namespace", "")), target), ())
        if uid != meta.get("uid") and (every or (created, name) < mine)
    ]


def _history_key(selector: Mapping[str, str], ns: str, model: str, target: str, pods: Iterable[str]) -> HistoryKey:
    """The target's own rate history; the model's total in the namespace when its pod names do not say their
    Deployment (see `prometheus.DEPLOYMENT_POD`), as a long Deployment name's pods' do not. A new Deployment
    has none (it does not inherit another's traffic): the forecast is then unknown, and the observed rate sizes
    alone, as it does once the history has stopped (`forecast.HISTORY_STALE`)."""
    names = list(pods)
    own = not names or any(deployment_of(p) == target for p in names)
    return as_selector(selector), ns, model, target if own else None


async def _record_ahead(rt: Runtime, body: Mapping[str, Any], state: ScalerState, now: float) -> bool:
    """Write the scaler's state, with the scale event it is about to make, before the scale: the rate limits
    are counted from recorded events, so an operator killed between the scale and the status write (an OOM
    kill) would restart without the event and scale again within the same period. Killed between this write
    and the scale, it restarts with an event that did not happen and waits one period longer: the safe side.
    Nothing is scaled when the record cannot be written."""
    meta = body.get("metadata") or {}
    path = _cr_path(meta["namespace"], meta["name"]) + "/status"
    metrics.STATUS_WRITES.labels("ahead").inc()
    written = await _write_own_status(rt, body, path, {"scaler": state_to_status(state)}, now)
    uid = _service_key(meta)
    if written or written is None:  # None: edited since the list, so the decision is not the spec's: no warning
        rt.deferred_scales.discard(uid)
        return bool(written)
    if uid not in rt.deferred_scales:  # once while the writes are refused, not every tick
        rt.deferred_scales.add(uid)
        msg = "could not record the scale event in status, so nothing is scaled until it can (the log has the error)"
        await post_event(rt, body, "Warning", "ScaleDeferred", msg, now)
    return False


CONFLICTS_TOLD = 3  # scales refused as conflicts in a row before Ready says so: one is a race, three a pattern


def _refused(refusal: ScaleRefusal) -> str:
    return f"{refusal.message}; tried again every {format_duration(refusal.delay)} while it is refused"


def _unrecorded(decision: Decision, now: float) -> ScalerState:
    """The decision's state without the scale event it assumed: used when nothing was written."""
    events = tuple(e for e in decision.state.scale_events if e.at != now)
    return replace(decision.state, scale_events=events)


async def _conflict(rt: Runtime, body: Mapping[str, Any], now: float, reason: str, msg: str) -> None:
    conditions = [Condition("Ready", "False", "Conflict", msg), Condition("Conflict", "True", reason, msg)]
    await _problem(rt, body, now, conditions, "Conflict", msg)


async def _ensure_managed(
    rt: Runtime,
    body: Mapping[str, Any],
    now: float,
    spec: InferenceServiceSpec,
    initial_replicas: int,
    deployment: Mapping[str, Any] | None,
) -> Mapping[str, Any] | None:
    """Managed mode: the Deployment this service owns, created or brought to the spec's template.
    None when it cannot be (the problem is reported)."""
    meta = body.get("metadata") or {}
    ns, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
    assert spec.template is not None
    template = spec.template.model_dump(by_alias=True, exclude_none=True)
    if deployment is None:
        try:
            created = await rt.kube.create(
                f"/apis/apps/v1/namespaces/{ns}/deployments",
                managed_deployment(body, template, initial_replicas),
                strict=True,
            )
        except KubeError as e:
            if e.status == 409:
                return None  # created since the cluster was read (the cache lags): the next tick sees it
            metrics.KUBE_ERRORS.labels("create").inc()
            msg = f"could not create Deployment {name}: {e}"
            await _problem(rt, body, now, [Condition("Ready", "False", "CreateFailed", msg)], "CreateFailed", msg)
            return None
        await post_event(
            rt,
            body,
            "Normal",
            "Created",
            f"created Deployment {name} with {initial_replicas} replica{'' if initial_replicas == 1 else 's'}",
            now,
        )
        return created
    if not _owned_by(deployment, uid):
        msg = f"Deployment {name} exists and is not owned by this InferenceService; refusing to adopt it"
        await _conflict(rt, body, now, "NotOwned", msg)
        return None
    if ((deployment.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_HASH) != _template_hash(template):
        wanted = _template_hash(template)
        try:
            await rt.kube.json_patch(
                f"/apis/apps/v1/namespaces/{ns}/deployments/{name}", _template_update(body, template, deployment), True
            )
            rt.refused_templates.pop(uid, None)
            await post_event(rt, body, "Normal", "Updated", f"updated the pod template of Deployment {name}", now)
        except KubeError as e:
            metrics.KUBE_ERRORS.labels("update").inc()
            rt.logger.warning("could not update Deployment %s/%s: %s", ns, name, e)
            # the pods keep the old template: the user must hear why their change did not roll out, once per
            # template (every tick tries again, and an Event each time would bury everything else)
            if rt.refused_templates.get(uid) != wanted:
                rt.refused_templates[uid] = wanted
                msg = f"could not update the pod template of Deployment {name} (the pods keep the old one): {e}"
                await post_event(rt, body, "Warning", "UpdateFailed", msg, now)
    return deployment


async def report_failure(rt: Runtime, body: Mapping[str, Any], now: float, error: BaseException) -> None:
    """A bug or an answer nothing expected stopped this service's tick: the count is held, and the user
    reads so in status and an Event rather than only in the operator's log."""
    msg = f"the operator failed in this service's tick ({type(error).__name__}: {error}); it tries again next tick"
    ready = Condition("Ready", "False", "ReconcileError", msg)
    # the other conditions still say what the last good tick saw: kept, or a merge patch would drop them and
    # the next good tick would announce them again
    kept = [
        Condition(str(c["type"]), str(c.get("status", "")), str(c.get("reason", "")), str(c.get("message", "")))
        for c in (body.get("status") or {}).get("conditions") or []
        if isinstance(c, Mapping) and c.get("type") not in (None, "Ready")
    ]
    try:
        await _problem(rt, body, now, [ready, *kept], "ReconcileError", msg)
    except Exception as e:  # the API server may be why: the log has both
        rt.logger.warning("could not report the failure in status: %s", e)


async def reconcile(rt: Runtime, tick: Tick, body: Mapping[str, Any]) -> Decision | None:
    meta = body.get("metadata") or {}
    ns, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
    now = tick.at
    status = body.get("status") or {}

    parsed = tick.parsed(body, rt.default_interval)
    if isinstance(parsed, InvalidSpec):
        msg = str(parsed)
        await _problem(rt, body, now, [Condition("Ready", "False", "InvalidSpec", msg)], "InvalidSpec", msg)
        return None
    spec, policy = parsed

    last = rt.last_decided.get(uid)
    unchanged = status.get("observedGeneration") == meta.get("generation")
    if last is not None and now - last < policy.interval - 0.5 and unchanged:
        return None  # this service decides less often than the operator ticks
    rt.last_decided[uid] = now

    managed = spec.template is not None
    target = spec.scale_target_ref.name if spec.scale_target_ref is not None else name
    deployment: Mapping[str, Any] | None = tick.deployments.get((ns, target))
    if tick.kube_error is not None:
        return None  # without a fresh view of the cluster, acting could undo someone else's change
    if managed:
        initial = recreate_count(status, policy.min_replicas, policy.max_replicas)
        deployment = await _ensure_managed(rt, body, now, spec, initial, deployment)
        if deployment is None:
            return None
    elif deployment is None:
        msg = f"Deployment {target} not found in namespace {ns}"
        await _problem(rt, body, now, [Condition("Ready", "False", "TargetNotFound", msg)], "TargetNotFound", msg)
        return None

    if (deployment.get("spec") or {}).get("replicas") == 0:
        # replicas.min is at least 1, so zero is a person's (draining a bad model): HPA's rule, hands off
        msg = (
            f"Deployment {target} is scaled to 0 replicas, which inferscale never does: it is left alone, "
            "as HPA leaves one; scale it to 1 or more to hand it back"
        )
        await _problem(rt, body, now, [Condition("Ready", "False", "ScalingDisabled", msg)], "ScalingDisabled", msg)
        return None
    advisory = spec.mode == "Advisory"
    others = conflicting_autoscalers(ns, "Deployment", target, tick.hpas, tick.scaled_objects)
    others += _competing_services(tick, body, target, every=advisory)
    if others and not advisory:
        msg = f"{', '.join(others)} already scales Deployment {target}; inferscale will not fight it"
        await _conflict(rt, body, now, "OtherAutoscaler", msg)
        return None
    # Advisory writes nothing, so it decides beside whatever scales the target: the comparison it is for

    # the batch limits the pods run with, where the spec does not give them: the prior sizes those replicas
    model = with_engine_limits(spec.model, engine_limits(deployment, spec.engine))
    if model is not spec.model:
        fitted = capacity_prior(model, policy.slo_ttft_p95 or 0.5, policy.slo_itl_mean or 0.05)
        # the spec's own note is answered
        at = TYPICAL_LENGTHS if fitted is not None else None
        policy = replace(policy, capacity_prior_rps=fitted, capacity_prior_at=at, capacity_note=None)
    pods = tick.candidate_pods(ns, (deployment.get("spec") or {}).get("selector"))
    ts = target_state(deployment, pods, now)
    moved = target_changed(status, target, ts.uid)
    prior = state_from_status(None if moved else status.get("scaler"))
    if moved:
        rt.refused_scales.pop(uid, None)  # the old Deployment's refusal (a 404 as it went) is not the new one's
        msg = f"{moved}: the decision state starts afresh (a scale-down from {ts.replicas} waits a window)"
        await post_event(rt, body, "Normal", "TargetChanged", msg, now)
    starts = Starts() if moved else starts_from_status(status.get("timeToReady"))
    # a service ticks at its own interval, but no more often than the operator does
    interval = max(policy.interval, rt.default_interval)
    last = prior.last_tick.at if prior.last_tick is not None else None
    since_last = now - last if last is not None else None
    ttr = measure_time_to_ready(ts, starts, prior.time_to_ready, interval, policy.time_to_ready_prior, since_last)
    state = replace(prior, time_to_ready=ttr.value)
    state, unsettled = _settle_unconfirmed(rt, uid, state, ts.replicas)
    coming, _ = on_their_way(ts, _lead(ttr, policy))
    workload = Workload(ns, ts.replicas, ts.ready_pods, coming, ts.capacity_blocked)
    obs, why = observe(
        tick.snapshot_for(spec.metrics.selector), workload, spec.model.name, policy.stale_after, spec.engine
    )
    if as_selector(spec.metrics.selector) in tick.history_unread and obs.state is not MetricsState.MISSING:
        obs = replace(obs, failed_queries=obs.failed_queries | {RATE_HISTORY})
        why += "; the forecast's rate history not read yet since the operator started"
    key = _history_key(spec.metrics.selector, ns, spec.model.name, target, ts.ready_pods)
    if spec.metrics.pod_port is not None and obs.state in (MetricsState.MISSING, MetricsState.STALE) and ts.ready_pods:
        obs, why = await _from_pods(rt, tick, spec, workload, pods, policy.stale_after, (obs, why))
        # every Ready pod's rate, on the target's own history: a model's total is not one Deployment's
        if obs.state is MetricsState.COMPLETE and obs.request_rate is not None and key[3] is not None:
            add_pod_rate(rt.history, key, now, obs.request_rate)
    if policy.slo_tpot_p95 is None:
        # read only while some service sets the SLO: shown for none that does not, so it never comes and goes
        obs = replace(obs, tpot_p95=None)
    # what the engines last reported; after a restart, what the last status says they did
    reported = None if moved else reported_lengths(status.get("observed"))
    lengths = observed_lengths(obs) or rt.last_lengths.get(uid) or reported
    rt.last_lengths[uid] = lengths
    policy = noting_a_missing_prior(with_observed_prior(policy, model, obs, lengths), model)
    prefill = held(
        status.get("conditions"),
        prefill_condition(
            prefill_check(model, obs, policy.slo_ttft_p95, policy.slo_itl_mean),
            policy.slo_itl_mean,
            model.profile is None or observed_lengths(obs) is not None,
            spec.engine,
        ),
    )
    rates = rt.history.get(key) or ()
    decision = decide(obs, policy, state, now, rates)
    metrics.set_model(ns, name, spec.model.name, deployment_pods(target))

    acted = ahead = unconfirmed = False
    failed: Condition | None = None
    steer: str | None = ""
    refusal = rt.refused_scales.get(uid)
    if decision.changed and not advisory and refusal is not None and now < refusal.retry_at:
        failed = Condition("Ready", "False", refusal.reason, _refused(refusal))  # not tried again yet
    elif decision.changed and not advisory:
        ahead = await _record_ahead(rt, body, _with_event(decision.state, unsettled), now)
    if ahead and rt.deletion_cost and decision.replicas < decision.current:
        loads = pod_loads(
            tick.snapshot_for(spec.metrics.selector), workload, spec.model.name, policy.stale_after, spec.engine
        )
        steer = await steer_scale_down(rt, body, now, ts, loads, pods, decision.replicas)
    if ahead and steer is not None:
        patch: dict[str, Any] = {"spec": {"replicas": decision.replicas}}
        version = (deployment.get("metadata") or {}).get("resourceVersion")
        if version:
            # The decision starts from the watch cache's count; if the Deployment moved since (our own
            # last write not yet seen, a kubectl scale), the server refuses and the next tick decides again.
            patch["metadata"] = {"resourceVersion": version}
        try:
            answer = await rt.kube.merge_patch(f"/apis/apps/v1/namespaces/{ns}/deployments/{target}/scale", patch)
            rt.scale_conflicts.pop(uid, None)
            got = (answer.get("spec") or {}).get("replicas")
            if isinstance(got, int) and not isinstance(got, bool) and got != decision.replicas:
                # a mutating webhook or policy set another count: asked again every tick, it was a scale Event,
                # a history entry and a status that said the asked count, every tick
                metrics.KUBE_ERRORS.labels("scale_altered").inc()
                why = f"asked Deployment {target} for {decision.replicas} replicas, the API server set {got}"
                why += " (a mutating webhook or policy on deployments/scale?)"
                refusal = rt.refuse_scale(uid, now, why, "ScaleAltered")
                failed = Condition("Ready", "False", refusal.reason, _refused(refusal))
            else:
                acted = True
                rt.refused_scales.pop(uid, None)
        except KubeError as e:
            if e.status == 409 and version:
                metrics.KUBE_ERRORS.labels("scale_conflict").inc()
                rt.logger.info("%s/%s: Deployment %s changed since the cache read it; deciding again", ns, name, target)
                streak = rt.scale_conflicts[uid] = rt.scale_conflicts.get(uid, 0) + 1
                if streak >= CONFLICTS_TOLD:
                    msg = (
                        f"scaling {target} to {decision.replicas} was refused {streak} ticks in a row: the Deployment "
                        "changed each time since the operator's cache read it (another writer of it, or a watch "
                        "that lags)"
                    )
                    failed = Condition("Ready", "False", "ScaleConflict", msg)
            elif e.status == 0 or e.status >= 500:
                # no answer, or the server's own failure (a 504, etcd timing out): the write may have landed. Its
                # record stays until the next tick reads the target (`_settle_unconfirmed`): taken back now, a scale
                # that landed would leave the rate limits counting from its new count (a second step within the
                # period); kept for good, one that did not land would hold its retry a period
                metrics.KUBE_ERRORS.labels("scale").inc()
                unconfirmed = True
                rt.unconfirmed[uid] = decision.state.scale_events[-1]
                msg = (
                    f"scaling {target} to {decision.replicas} got no clear answer ({e}); the next tick reads whether "
                    "it landed"
                )
                failed = Condition("Ready", "False", "ScaleUnconfirmed", msg)
            else:
                metrics.KUBE_ERRORS.labels("scale").inc()
                refusal = rt.refuse_scale(uid, now, f"could not scale {target} to {decision.replicas}: {e}")
                failed = Condition("Ready", "False", "ScaleFailed", _refused(refusal))
    new_state = decision.state if acted or unconfirmed else _unrecorded(decision, now)
    if (
        unsettled is not None
        and not acted
        and now - unsettled.at < max(policy.scale_up.period, policy.scale_down.period)
    ):
        # the target showed its old count, and no scale has gone through since: a cache that lags a write that
        # landed reads the same, so the record stays (counted against the limits) until a tick settles it
        new_state = _with_event(new_state, unsettled)
        rt.unconfirmed.setdefault(uid, unsettled)
    # a scale recorded ahead and then refused must be taken back whatever else the status says, or the next
    # tick counts a scale that never happened against the rate limit
    retract = ahead and not (acted or unconfirmed)
    await _write(
        rt, body, now, spec.mode, policy, obs, why, decision, ts, ttr, new_state, target, acted, prefill,
        retract=retract, others=others, steer=steer or "", failed=failed,
    )  # fmt: skip
    return decision


async def _from_pods(
    rt: Runtime,
    tick: Tick,
    spec: InferenceServiceSpec,
    workload: Workload,
    pods: Sequence[Mapping[str, Any]],
    stale_after: float,
    seen: tuple[Observation, str],
) -> tuple[Observation, str]:
    """The engines' own /metrics while Prometheus cannot give them (spec.metrics.podPort); what Prometheus gave
    (`seen`) when the pods do not answer either."""
    port = spec.metrics.pod_port
    ips = {(p.get("metadata") or {}).get("name"): (p.get("status") or {}).get("podIP") for p in pods}
    targets = [
        (workload.namespace, pod, f"http://{_host(ip)}:{port}/metrics")
        for pod in sorted(workload.ready_pods)
        if isinstance(ip := ips.get(pod), str) and ip
    ]
    obs, why = seen
    if not targets:
        return obs, f"{why}; no Ready pod has an IP to read port {port} at"
    snap, errors = await rt.pod_reads.snapshot(tick.at, targets, tick.began)
    direct, said = observe(snap, workload, spec.model.name, stale_after, spec.engine)
    if direct.state not in (MetricsState.COMPLETE, MetricsState.PARTIAL):
        return (
            obs,
            f"{why}; the pods' /metrics on port {port} gave nothing usable either: {'; '.join(errors[:2]) or said}",
        )
    read = len(targets) - len(errors)
    text = f"{why}; read {read} of {len(workload.ready_pods)} Ready pods' /metrics on port {port} directly ({said})"
    return direct, text + (f"; {errors[0]}" if errors else "")


LANDED = "its /scale got no clear answer; the Deployment shows it landed"

# Seconds a scale recorded ahead may go without its account before another process tells it: a process alive
# writes its account within the tick (a second operator acting beside it must not tell its scale in flight),
# while one killed between the scale and the account is replaced no sooner than a pod restart or a Lease
# takeover.
LOST_AFTER = 30.0


async def _tell(
    rt: Runtime, body: Mapping[str, Any], history: Any, event: ScaleEvent, told: str, now: float
) -> list[dict[str, Any]]:
    """A scale not told when it was made: its Event now, and its history entry at its own time."""
    verb = "ScaledUp" if event.to_replicas > event.from_replicas else "ScaledDown"
    message = f"{event.from_replicas} → {event.to_replicas} ({event.reason}): {told}"
    await post_event(rt, body, "Normal", verb, message, now)
    return append_history(history, event.at, event.from_replicas, event.to_replicas, event.reason, told)


def _settle_unconfirmed(
    rt: Runtime, uid: str, state: ScalerState, replicas: int
) -> tuple[ScalerState, ScaleEvent | None]:
    """The scale whose /scale got no clear answer, read on the target now. At its new count it landed: its record
    stays, and it is told (`_lost_scale`, or beside this tick's own scale). At its old count it seems not to have:
    the decision is made without its record, so it retries at once, and the record is given back unless a
    scale goes through (returned as unsettled). Any other count is someone else's: the record stays."""
    event = rt.unconfirmed.pop(uid, None)
    if event is None or event not in state.scale_events:
        return state, None
    if replicas == event.from_replicas:
        return replace(state, scale_events=tuple(e for e in state.scale_events if e != event)), event
    if replicas == event.to_replicas:
        rt.landed[uid] = event
    return state, None


def _with_event(state: ScalerState, event: ScaleEvent | None) -> ScalerState:
    if event is None or event in state.scale_events:
        return state
    return replace(state, scale_events=tuple(sorted((*state.scale_events, event), key=lambda e: e.at)))


def _lost_scale(
    rt: Runtime, meta: Mapping[str, Any], state: ScalerState, status: Mapping[str, Any], replicas: int, now: float
) -> tuple[ScaleEvent, str] | None:
    """A scale not told when it was made, and how to tell it (once): one whose /scale answer was lost and that the
    target now shows, or one another process made and could not tell (`untold_scale`); never one of this
    process's own that it told."""
    lost = untold_scale(state.scale_events, status, replicas)
    key = _service_key(meta)
    if lost is None or rt.told_lost.get(key) == lost.at:
        return None
    if rt.landed.get(key) == lost:
        del rt.landed[key]
        return lost, LANDED
    if now - lost.at < LOST_AFTER or _event_key(lost) in rt.written_events.get(key, frozenset()):
        return None
    return lost, f"made at {rfc3339(lost.at)} by the operator before it stopped, whose account of it was lost with it"


def _service_key(meta: Mapping[str, Any]) -> str:
    """What the runtime keeps a service's memory under: its uid, else its namespace/name."""
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


def _lead(ttr: TimeToReadyMeasure, policy: Policy) -> float:
    """The time-to-ready the decision leads by: measured, else the spec's."""
    return ttr.value if ttr.value is not None else policy.time_to_ready_prior


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


def _log_decision(rt: Runtime, uid: str, who: str, decision: Decision, acted: bool, now: float) -> None:
    """One log line per scale and per change of what the operator decides, and one a minute while the SLO is
    missed, not one per tick: `kubectl logs` then reads as the service's scaling history, and a steady service
    stays quiet (`scaling.telling`)."""
    if not acted and not worth_telling(decision, rt.last_told.get(uid), now):
        return
    rt.last_told[uid] = Told.of(decision, now)
    if decision.replicas == decision.current:
        what = f"holds {decision.current}"
    else:
        what = f"{'scaled' if acted else 'would scale'} {decision.current} → {decision.replicas}"
    rt.logger.info("%s: %s (%s): %s", who, what, decision.reason.value, decision.message)


async def _write(
    rt: Runtime,
    body: Mapping[str, Any],
    now: float,
    mode: str,
    policy: Any,
    obs: Observation,
    why: str,
    decision: Decision,
    ts: Any,
    ttr: TimeToReadyMeasure,
    state: ScalerState,
    target: str,
    acted: bool,
    prefill: Condition,
    retract: bool = False,
    others: Sequence[str] = (),
    steer: str = "",
    failed: Condition | None = None,
) -> None:
    """`failed`: Ready=False for a scale the API server refused or did not answer; announced once, when it
    begins (a webhook or RBAC that refuses every tick would otherwise post an Event every tick)."""
    meta = body.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    status = body.get("status") or {}
    previous = status.get("conditions")
    direction = "up" if decision.replicas > decision.current else "down"

    deciding = f"deciding for Deployment {target}"
    conditions = [
        failed or Condition("Ready", "True", "Scaling" if mode == "Active" else "Advising", deciding),
        metrics_condition(obs, why),
        slo_condition(decision, obs, policy.slo_ttft_p95 or 0.0, policy.slo_itl_mean or 0.0, policy.slo_tpot_p95),
        Condition(
            "ScalingLimited",
            "True" if decision.limits else "False",
            decision.limits[-1].value if decision.limits else "NotLimited",
            decision.message if decision.limits else "the recommendation was applied as computed",
        ),
        Condition(
            "CapacityBlocked",
            "True" if ts.capacity_blocked else "False",
            "InsufficientResources" if ts.capacity_blocked else "Schedulable",
            f"{ts.capacity_blocked} pod(s) unschedulable: {ts.capacity_message}"
            if ts.capacity_blocked
            else "all pods scheduled",
        ),
        restarting_condition(ts.restarting, target),
        stuck_condition(ts, target, _lead(ttr, policy)),
        Condition(
            "Advisory",
            "True" if mode == "Advisory" else "False",
            "AdvisoryMode" if mode == "Advisory" else "ActiveMode",
            f"would scale to {decision.replicas}; the target is not changed"
            + (f" ({', '.join(others)} scales it)" if others else "")
            if mode == "Advisory"
            else "decisions are applied",
        ),
        Condition(
            "Conflict",
            "False",
            "AdvisoryBesideAutoscaler" if others else "NoConflict",
            f"{', '.join(others)} scales Deployment {target}; Advisory mode writes nothing, so there is no conflict"
            if others
            else "no other autoscaler targets this workload",
        ),
        prefill,
    ]
    # what this process last saw of each condition: with status writes refused for good `previous` stays where
    # it was, and each tick would announce the same conditions again
    seen = rt.seen_conditions.setdefault(_service_key(meta), {})
    rt.told_problems.pop(_service_key(meta), None)
    for c in conditions:
        watched = c.type in ("Ready", "MetricsAvailable", *TRUE_IS_BAD, prefill.type)
        if watched and condition_changed(previous, c) and seen.get(c.type) != (c.status, c.reason):
            bad = (c.status == "True") if c.type in TRUE_IS_BAD else (c.status == "False")
            if bad:
                await post_event(rt, body, "Warning", c.reason, c.message, now)
        seen[c.type] = (c.status, c.reason)
    metrics.set_conditions(ns, name, ((c.type, c.status == "True", c.reason) for c in conditions))

    history = status.get("history")
    told_late = False  # a scale made earlier and not told then, told now (`_lost_scale`)
    new_status: dict[str, Any] = {
        "replicas": decision.replicas if acted else ts.replicas,
        "readyReplicas": len(ts.ready_pods),
        "pendingReplicas": ts.pending,
        "restartingReplicas": ts.restarting,
        "desiredReplicas": decision.replicas,
        "observedGeneration": meta.get("generation"),
        "targetName": target,
        "targetUID": ts.uid,
        "observed": observed(obs, why),
        "recommendations": recommendations(decision),
        "forecast": {
            "requestRate": status_number(decision.forecast_rps),
            "horizon": format_duration(decision.horizon),
            "method": decision.forecast_method,
        },
        "timeToReady": {
            "measured": format_duration(ttr.value) if ttr.value is not None else None,
            "samples": ttr.samples,
            **starts_to_status(ttr.kept),
        },
        "decision": decision_status(decision, now),
        "conditions": merge_conditions(previous, conditions, now, meta.get("generation")),
        "scaler": state_to_status(state),
    }
    # a scale made earlier and not told then (it landed unanswered, or its operator stopped before telling it), told
    # now, before this tick's own: when this tick acted, its record is the newest, so the one before it is looked at
    earlier = replace(state, scale_events=state.scale_events[:-1]) if acted else state
    if (untold := _lost_scale(rt, meta, earlier, status, ts.replicas, now)) is not None:
        lost, told = untold
        rt.told_lost[_service_key(meta)] = lost.at  # once, whether or not the status write below lands
        history = await _tell(rt, body, history, lost, told, now)
        new_status["lastScaleTime"], new_status["history"] = rfc3339(lost.at), history
        told_late = True
    if acted:
        new_status["lastScaleTime"] = rfc3339(now)
        new_status["history"] = append_history(
            history, now, decision.current, decision.replicas, decision.reason.value, decision.message
        )
        verb = "ScaledUp" if direction == "up" else "ScaledDown"
        message = f"{decision.current} → {decision.replicas}: {decision.message}" + (f"; {steer}" if steer else "")
        await post_event(rt, body, "Normal", verb, message, now)
        metrics.SCALE_ACTIONS.labels(ns, name, direction).inc()
    # the scale made (or taken back) stands whatever the user edits meanwhile: its record goes in even then
    made = ("scaler", "lastScaleTime", "history") if acted or told_late else ("scaler",) if retract else ()
    await _patch_status(rt, body, new_status, now, force=retract or told_late, keep=made)
    _log_decision(rt, _service_key(meta), f"{ns}/{name}", decision, acted, now)
    metrics.DESIRED.labels(ns, name).set(decision.replicas)
    metrics.CURRENT.labels(ns, name).set(new_status["replicas"])
    metrics.READY.labels(ns, name).set(len(ts.ready_pods))
    metrics.DECISIONS.labels(ns, name, decision.reason.value).inc()
