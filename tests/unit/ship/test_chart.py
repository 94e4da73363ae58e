from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from tests.unit.ship.conftest import Render
from tests.unit.ship.helpers import CHART, KUBE_VERSION, by_kind, run_helm, tool

from inferscale.adapters.prometheus import deployment_pods
from inferscale.sim.vllm_buckets import TTFT_BUCKETS

ALL_ON = ["--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true"]


@pytest.mark.parametrize(
    "values",
    [[], ALL_ON, ["--set", "watch.allNamespaces=false", "--set", "watch.namespaces={llm,batch}"]],
    ids=["defaults", "monitoring", "namespaced"],
)
def test_helm_lint_is_clean(helm: str, values: list[str]) -> None:
    result = run_helm(helm, "lint", str(CHART), "--strict", "--kube-version", KUBE_VERSION, *values)
    assert result.returncode == 0, result.stdout + result.stderr
    findings = [line for line in result.stdout.splitlines() if re.match(r"\[(WARNING|ERROR)\]", line)]
    assert findings == []


def _operator(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = by_kind(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {"deployment": deployment, "container": container, "pod": deployment["spec"]["template"]["spec"]}


def test_operator_acts_under_the_lease_rolls_its_upgrades_and_has_the_run_flags(render: Render) -> None:
    op = _operator(render())
    assert op["deployment"]["spec"]["replicas"] == 1
    assert op["deployment"]["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    args = op["container"]["args"]
    assert "--leader-elect" in args and "--leader-elect-lease=inferscale" in args
    env = {e["name"]: e for e in op["container"]["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert "--all-namespaces" in args
    assert "--prometheus-url=http://prometheus-operated.monitoring.svc:9090" in args
    assert "--metrics-port=8080" in args
    assert not any(a.startswith("--namespace") for a in args)
    probe = op["container"]["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz"
    assert op["container"]["ports"][0]["containerPort"] == 8080
    assert op["container"]["image"] == "ghcr.io/inferscale/inferscale:0.1.0"


def test_without_leader_election_one_replica_is_replaced_not_rolled(render: Render) -> None:
    docs = render(leaderElection__enabled=False)
    op = _operator(docs)
    assert op["deployment"]["spec"]["strategy"] == {"type": "Recreate"}
    assert not any(a.startswith("--leader-elect") for a in op["container"]["args"]) and "env" not in op["container"]
    assert by_kind(docs, "Role") == []
    assert _operator(render(replicas=3))["deployment"]["spec"]["replicas"] == 3


def test_a_standby_is_spread_from_the_leaders_node_and_a_drain_keeps_one(render: Render) -> None:
    docs = render(replicas=2)
    terms = _operator(docs)["pod"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    (pdb,) = by_kind(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == _operator(docs)["deployment"]["spec"]["selector"]["matchLabels"]
    single = render()
    assert by_kind(single, "PodDisruptionBudget") == [] and "affinity" not in _operator(single)["pod"]
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    assert _operator(render(replicas=2, affinity=own))["pod"]["affinity"] == own, "a user's affinity wins"


def test_the_lease_role_grants_that_one_lease_in_the_releases_namespace(render: Render) -> None:
    (role,) = [r for r in by_kind(render(), "Role") if r["metadata"]["name"] == "inferscale-leader-election"]
    assert role["metadata"]["namespace"] == "inferscale"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["inferscale"],
            "verbs": ["get", "patch"],
        },
    ]


def test_digest_wins_over_tag(render: Render) -> None:
    digest = "sha256:" + "a" * 64
    assert _operator(render(image__digest=digest))["container"]["image"] == f"ghcr.io/inferscale/inferscale@{digest}"


def test_pod_meets_the_restricted_pod_security_standard(render: Render) -> None:
    op = _operator(render())
    pod, ctx = op["pod"], op["container"]["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert not any(k in pod for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert all("hostPath" not in v for v in pod.get("volumes", []))
    assert op["container"]["resources"]["requests"] and op["container"]["resources"]["limits"]["memory"]


def _rules(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [rule for role in by_kind(docs, kind) for rule in role["rules"]]


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_cluster_wide_rbac_is_least_privilege(render: Render) -> None:
    docs = render()
    grants = _grants(_rules(docs, "ClusterRole"))
    assert [r["metadata"]["name"] for r in by_kind(docs, "Role")] == ["inferscale-leader-election"]
    assert not any(r == "leases" for _, r, _ in grants), "the Lease is granted in the release's namespace only"
    needed = {
        ("inferscale.dev", "inferenceservices", "list"),
        ("inferscale.dev", "inferenceservices/status", "patch"),
        ("apps", "deployments/scale", "patch"),
        ("apps", "deployments", "watch"),
        ("apps", "deployments", "create"),
        ("", "pods", "watch"),
        ("autoscaling", "horizontalpodautoscalers", "list"),
        ("keda.sh", "scaledobjects", "list"),
        ("", "events", "create"),
    }
    assert needed <= grants
    # nothing the operator never asks for: it reads Deployments from a watch, writes /scale without reading it,
    # and only posts core/v1 Events
    unused = {("apps", "deployments", "get"), ("apps", "deployments/scale", "get"), ("", "events", "patch")}
    assert not unused & grants
    assert not any(group == "events.k8s.io" for group, _, _ in grants)
    assert not any("*" in part for grant in grants for part in grant)
    resources = {r for _, r, _ in grants}
    assert not resources & {"secrets", "namespaces", "customresourcedefinitions", "kopfpeerings", "clusterkopfpeerings"}
    assert ("apps", "deployments", "delete") not in grants  # owned Deployments go with their owner (GC)
    assert ("inferscale.dev", "inferenceservices", "patch") not in grants  # only their status is written
    assert ("", "pods", "create") not in grants and ("", "pods", "delete") not in grants
    binding = by_kind(docs, "ClusterRoleBinding")[0]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "inferscale", "namespace": "inferscale"}]


def test_the_deletion_cost_grants_patch_on_pods_and_turning_it_off_drops_both_grant_and_flag(render: Render) -> None:
    assert ("", "pods", "patch") in _grants(_rules(render(), "ClusterRole"))
    assert "--no-pod-deletion-cost" not in _operator(render())["container"]["args"]
    docs = render(podDeletionCost=False)
    assert ("", "pods", "patch") not in _grants(_rules(docs, "ClusterRole"))
    assert "--no-pod-deletion-cost" in _operator(docs)["container"]["args"]


def test_prometheus_credentials_are_mounted_files_and_never_args(render: Render) -> None:
    op = _operator(
        render(
            prometheus__basicAuth__secretName="prom-auth",
            prometheus__ca__configMapName="openshift-service-ca.crt",
            prometheus__ca__key="service-ca.crt",
            prometheus__headers={"X-Scope-OrgID": "team-a"},
        )
    )
    args = op["container"]["args"]
    assert "--prometheus-password-file=/etc/inferscale/prometheus-basic-auth/password" in args
    assert "--prometheus-ca-file=/etc/inferscale/prometheus-ca/service-ca.crt" in args
    assert "--prometheus-header=X-Scope-OrgID: team-a" in args
    env = next(e for e in op["container"]["env"] if e["name"] == "PROMETHEUS_USERNAME")
    assert env == {
        "name": "PROMETHEUS_USERNAME",
        "valueFrom": {"secretKeyRef": {"name": "prom-auth", "key": "username"}},
    }
    mounts = {m["name"]: m for m in op["container"]["volumeMounts"]}
    assert mounts["prometheus-basic-auth"]["readOnly"] and mounts["prometheus-ca"]["readOnly"]
    volumes = {v["name"]: v for v in op["pod"]["volumes"]}
    assert volumes["prometheus-basic-auth"]["secret"]["items"] == [{"key": "password", "path": "password"}]
    assert volumes["prometheus-ca"]["configMap"]["name"] == "openshift-service-ca.crt"
    own = _operator(render(prometheus__bearerToken__serviceAccount=True))["container"]["args"]
    assert "--prometheus-bearer-token-file=/var/run/secrets/kubernetes.io/serviceaccount/token" in own
    token = _operator(render(prometheus__bearerToken__secretName="prom-token"))
    assert "--prometheus-bearer-token-file=/etc/inferscale/prometheus-token/token" in token["container"]["args"]
    default = _operator(render())
    assert not any("--prometheus-" in a and "--prometheus-url" not in a for a in default["container"]["args"])
    assert [e["name"] for e in default["container"]["env"]] == ["POD_NAMESPACE"] and len(default["pod"]["volumes"]) == 1


def test_target_only_install_drops_the_deployment_writes(render: Render) -> None:
    grants = _grants(_rules(render(rbac__managedDeployments=False), "ClusterRole"))
    assert {("apps", "deployments", v) for v in ("create", "patch")}.isdisjoint(grants)
    assert ("apps", "deployments/scale", "patch") in grants


def test_namespaced_install_has_a_role_per_namespace_and_nothing_cluster_wide(render: Render) -> None:
    docs = render(watch__allNamespaces=False, watch__namespaces=["llm", "batch"])
    assert by_kind(docs, "ClusterRole") == [] and by_kind(docs, "ClusterRoleBinding") == []
    # the admission policy is cluster-scoped: named after the release's namespace, and left out on request
    policy = _writes_policy(docs)
    assert policy is not None and policy["metadata"]["name"] == "inferscale-inferscale-writes"
    quiet = render(watch__allNamespaces=False, watch__namespaces=["llm"], rbac__admissionPolicy=False)
    cluster_scoped = {
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    assert [d["kind"] for d in quiet if d["kind"] in cluster_scoped] == []
    assert sorted(r["metadata"]["namespace"] for r in by_kind(docs, "Role")) == ["batch", "inferscale", "llm"]
    assert sorted(b["metadata"]["namespace"] for b in by_kind(docs, "RoleBinding")) == ["batch", "inferscale", "llm"]
    args = _operator(docs)["container"]["args"]
    assert "--namespace=llm" in args and "--namespace=batch" in args and "--all-namespaces" not in args
    assert _grants(by_kind(docs, "Role")[0]["rules"]) == _grants(_rules(render(), "ClusterRole"))


def test_every_rbac_rule_says_why() -> None:
    text = (CHART / "templates" / "_helpers.tpl").read_text()
    block = text[text.index('define "inferscale.rules"') :]
    lines = [line for line in block.splitlines() if not line.strip().startswith("{{")]
    for i, line in enumerate(lines):
        if line.startswith("- apiGroups:"):
            assert lines[i - 1].startswith("#"), f"rule without a reason: {lines[i : i + 3]}"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "watch.allNamespaces=false"], "minItems"),
        (["--set", "metricsPort=80"], "minimum"),
        (["--set", "prometheus.url=prometheus:9090"], "pattern"),
        (["--set", "replicaCount=2"], "additional properties"),
        (["--set", "replicas=0"], "minimum"),
        (["--set", "replicas=2,leaderElection.enabled=false"], "replicas above 1 need leaderElection.enabled"),
        (["--set-json", "prometheusRule.ttftSLO.objective=1.5"], "exclusiveMaximum"),
        (["--set-json", 'prometheus.headers={"Authorization":"Bearer x"}'], "invalid propertyName 'Authorization'"),
        (["--set-json", 'prometheus.headers={"X Org":"a"}'], "invalid propertyName 'X Org'"),
        (["--set", "interval=0s"], "/interval"),
        (["--set", "interval=0m0s"], "/interval"),
        (["--set", "interval=500ms"], "/interval"),  # `inferscale run` refuses a tick under 1s: a crash loop
        (["--set", r"podLabels.app\.kubernetes\.io/instance=x"], "invalid propertyName 'app.kubernetes.io/instance'"),
        (["--set", r"podLabels.app\.kubernetes\.io/part-of=x"], "invalid propertyName 'app.kubernetes.io/part-of'"),
        (["--set", "prometheusRule.ttftSLO.ttftSeconds=0.3"], "/prometheusRule/ttftSLO/ttftSeconds"),
        (["--set", "prometheusRule.ttftSLO.ttftSeconds=1"], "/prometheusRule/ttftSLO/ttftSeconds"),
        (
            [
                "--set",
                "prometheusRule.enabled=true,serviceMonitor.enabled=true",
                "--set-json",
                "prometheusRule.ttftSLO.objective=0.9",
            ],
            "prometheusRule.ttftSLO.objective 0.9: the fast-burn page fires at 14.4 times the error budget, 144% of "
            "requests, which no share of requests reaches",
        ),
        (
            ["--set", "prometheusRule.enabled=true"],
            "prometheusRule.enabled without serviceMonitor.enabled: set prometheusRule.job",
        ),
        # each would render objects the API server, the kubelet, promtool or the operator refuses
        (["--set", "image.repository=registry.example.com/inferscale:0.1.0"], "/image/repository"),
        (["--set", "image.tag=0.1.0 beta"], "/image/tag"),
        (["--set", "prometheus.url=http://:9090"], "/prometheus/url"),
        (["--set", "prometheus.url=http://prom:99999"], "/prometheus/url"),
        (["--set-json", 'prometheus.headers={"X-Scope-OrgID":" "}'], "/prometheus/headers/X-Scope-OrgID"),
        (["--set", "prometheus.bearerToken.secretKey=..token"], "/prometheus/bearerToken/secretKey"),
        (["--set", "resources.limit.memory=1Gi"], "additional properties 'limit' not allowed"),
        (["--set", "resources.requests.cpu=lots"], "/resources/requests/cpu"),
        (["--set", "extraEnv[0].name=A,extraEnv[0].value=2"], "/extraEnv/0/value"),
        (["--set", "prometheusRule.capacityBlockedFor=5m10m"], "/prometheusRule/capacityBlockedFor"),
        (["--set", "serviceMonitor.interval=30s1m"], "/serviceMonitor/interval"),
        (["--set", 'prometheusRule.job=a"b'], "/prometheusRule/job"),
        (["--set", r"serviceMonitor.labels.app\.kubernetes\.io/name=x"], "invalid propertyName"),
        (["--set", "serviceAccount.name=Bad_Name"], "/serviceAccount/name"),
        (["--set", "grafanaDashboard.namespace=Monitoring_NS"], "/grafanaDashboard/namespace"),
        (["--set", "podLabels.team=a b"], "/podLabels/team"),
        (
            ["--set", "watch.namespaces={llm}"],
            "watch.namespaces lists llm but watch.allNamespaces is true: set watch.allNamespaces=false",
        ),
        (
            ["--set-json", 'extraArgs=["--prometheus-url=http://other:9090"]'],
            "extraArgs: --prometheus-url=http://other:9090 is a flag the chart sets from its values",
        ),
        (["--set-json", 'extraArgs=["-n", "llm"]'], "extraArgs: -n is a flag the chart sets"),
        (
            ["--set", "serviceAccount.create=false,serviceAccount.name=ops,serviceAccount.annotations.a=b"],
            "annotate your own",
        ),
        (
            ["--set", "prometheus.bearerToken.secretName=t,prometheus.basicAuth.secretName=b"],
            "give at most one way to authenticate to Prometheus, not prometheus.bearerToken.secretName and "
            "prometheus.basicAuth.secretName",
        ),
    ],
)
def test_values_schema_rejects_bad_values(helm: str, values: list[str], message: str) -> None:
    result = run_helm(helm, "template", "x", str(CHART), "--kube-version", KUBE_VERSION, *values)
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.parametrize("release", ["1x", "a.b"])
def test_a_release_name_no_service_can_be_named_after_is_refused(helm: str, release: str) -> None:
    result = run_helm(helm, "template", release, str(CHART), "--kube-version", KUBE_VERSION)
    assert result.returncode != 0
    assert (
        f"release name {release}: the metrics Service's name {release}-inferscale-metrics must start with a letter"
        in (result.stderr)
    )


def test_strings_stay_strings_however_yaml_would_read_them(render: Render) -> None:
    docs = render(
        watch__allNamespaces=False,
        watch__namespaces=["123", "on"],
        priorityClassName="100",
        prometheus__bearerToken__secretName="123",
        prometheus__bearerToken__secretKey="true",
    )
    pod = _operator(docs)["pod"]
    assert pod["priorityClassName"] == "100"
    (volume,) = [v for v in pod["volumes"] if v["name"] == "prometheus-token"]
    assert volume["secret"]["secretName"] == "123" and volume["secret"]["items"] == [{"key": "true", "path": "true"}]
    assert {
        r["metadata"]["namespace"] for r in by_kind(docs, "Role") if r["metadata"]["namespace"] != "inferscale"
    } >= {
        "123",
        "on",
    }
    assert "--namespace=123" in _operator(docs)["container"]["args"]


def test_monitoring_objects_only_when_enabled(render: Render) -> None:
    kinds = {d["kind"] for d in render()}
    assert not kinds & {"ServiceMonitor", "PrometheusRule", "ConfigMap"}
    docs = render(serviceMonitor__enabled=True, prometheusRule__enabled=True, grafanaDashboard__enabled=True)
    (monitor,) = by_kind(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "http-metrics"
    # the operator's `namespace` label names the service's namespace, not the operator's
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    (service,) = by_kind(docs, "Service")
    assert service["metadata"]["name"] == "inferscale-metrics"
    assert service["spec"]["ports"][0]["targetPort"] == "http-metrics"


def test_prometheus_rule_alerts(render: Render) -> None:
    (rule,) = by_kind(render(prometheusRule__enabled=True, serviceMonitor__enabled=True), "PrometheusRule")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert {
        "InferenceTTFTSLOFastBurn",
        "InferenceTTFTSLOSlowBurn",
        "InferscaleCapacityBlocked",
        "InferscaleMetricsUnavailable",
        "InferscaleOperatorDown",
    } <= set(alerts)
    fast = alerts["InferenceTTFTSLOFastBurn"]["expr"]
    assert 'vllm:time_to_first_token_seconds_bucket{le="0.5"}[1h]' in fast and "[5m]" in fast
    assert re.search(r"> 0\.72\b", fast)  # 14.4 x the 5% budget of a 95% objective
    assert 'inferscale_condition{type="CapacityBlocked"} == 1' in alerts["InferscaleCapacityBlocked"]["expr"]
    assert 'inferscale_condition{type="MetricsAvailable"} == 0' in alerts["InferscaleMetricsUnavailable"]["expr"]
    assert 'up{job="inferscale-metrics"}' in alerts["InferscaleOperatorDown"]["expr"]
    assert alerts["InferscaleNoLeader"]["expr"] == 'max(inferscale_leader{job="inferscale-metrics"}) < 1'
    assert alerts["InferscaleTwoLeaders"]["expr"] == 'sum(inferscale_leader{job="inferscale-metrics"}) > 1'
    unreadable = 'max by (namespace) (inferscale_namespace_unreadable{job="inferscale-metrics"}) == 1'
    assert alerts["InferscaleNamespaceUnreadable"]["expr"] == unreadable
    partial = 'sum(rate(inferscale_prometheus_partial_answers_total{job="inferscale-metrics"}[10m])) > 0'
    assert alerts["InferscalePrometheusPartialAnswers"]["expr"] == partial
    assert "{{ $labels.namespace }}" in alerts["InferscaleCapacityBlocked"]["annotations"]["summary"]


def test_prometheus_rule_selects_the_job_it_is_given_without_a_service_monitor(render: Render) -> None:
    (rule,) = by_kind(render(prometheusRule__enabled=True, prometheusRule__job="my-scrape"), "PrometheusRule")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert alerts["InferscaleOperatorDown"]["expr"] == 'absent(up{job="my-scrape"} == 1)'
    assert alerts["InferscaleNoLeader"]["expr"] == 'max(inferscale_leader{job="my-scrape"}) < 1'


# SGLang's default TTFT buckets (sgl-project/sglang, python/sglang/srt/metrics/collector.py,
# TokenizerMetricsCollector; --bucket-time-to-first-token replaces them)
SGLANG_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)


def test_the_ttft_buckets_the_chart_accepts_are_vllms_and_sglangs() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    accepted = schema["properties"]["prometheusRule"]["properties"]["ttftSLO"]["properties"]["ttftSeconds"]["enum"]
    both = sorted({float(le) for le in (*TTFT_BUCKETS, *SGLANG_TTFT_BUCKETS)})
    assert accepted == [str(le) for le in both]  # as prometheus_client writes a float's le: "1.0"


def alerts_fire_as_expected(
    tmp_path: Any, series: list[dict[str, str]], checks: list[tuple[str, str, list[dict[str, Any]]]]
) -> None:
    """`promtool test rules` on tmp_path/rules.yml: each (eval_time, alert, the alerts expected then), on
    1-minute series."""
    promtool = tool("promtool", "make setup (Debian's prometheus)")
    cases = [{"eval_time": at, "alertname": alert, "exp_alerts": expected} for at, alert, expected in checks]
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": cases}],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))
    result = subprocess.run([promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _ttft_series(engine: str, model: str, buckets: tuple[str, ...], slow_share: float) -> list[dict[str, str]]:
    """One pod of `model` on `engine` answering 1 request/s for 2 hours, `slow_share` of them above 0.5 s."""
    pod = f'namespace="llm",pod="{model}-7d9f8c6b5-x2x4q",model_name="{model}"'
    name = f"{engine}:time_to_first_token_seconds"
    fast = round(60 * (1 - slow_share))
    series = [{"series": f"{name}_count{{{pod}}}", "values": "0+60x120"}]
    for le in (*buckets, "+Inf"):
        per_minute = 60 if le == "+Inf" or float(le) > 0.5 else fast
        series.append({"series": f'{name}_bucket{{{pod},le="{le}"}}', "values": f"0+{per_minute}x120"})
    return series


def test_the_ttft_burn_alerts_read_each_engine_and_say_when_an_engine_has_no_bucket_at_the_target(
    render: Render, tmp_path: Any
) -> None:
    # until 2026-12-07 the burn alerts read vLLM's histogram only: an SGLang service never paged, silently
    (rule,) = by_kind(render(prometheusRule__enabled=True, serviceMonitor__enabled=True), "PrometheusRule")
    (slo,) = [g for g in rule["spec"]["groups"] if g["name"] == "inferscale.slo"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [slo]}))
    vllm = tuple(str(le) for le in TTFT_BUCKETS)
    sglang_default = tuple(str(float(le)) for le in SGLANG_TTFT_BUCKETS)
    series = [
        *_ttft_series("vllm", "vllm-slow", vllm, 0.8),
        *_ttft_series("vllm", "vllm-fast", vllm, 0.0),
        *_ttft_series("sglang", "sglang-slow", (*sglang_default, "0.5"), 0.8),  # --bucket-time-to-first-token ... 0.5
        *_ttft_series("sglang", "sglang-default", sglang_default, 0.8),
    ]
    by_alert = {r["alert"]: r for r in slo["rules"]}

    def fired(alert: str, *models: str) -> list[dict[str, Any]]:
        return [
            {
                "exp_labels": {**by_alert[alert]["labels"], "namespace": "llm", "model_name": m},
                "exp_annotations": {
                    k: v.replace("{{ $labels.model_name }}", m).replace("{{ $labels.namespace }}", "llm")
                    for k, v in by_alert[alert]["annotations"].items()
                },
            }
            for m in models
        ]

    checks = [
        ("InferenceTTFTSLOFastBurn", fired("InferenceTTFTSLOFastBurn", "sglang-slow", "vllm-slow")),
        ("InferenceTTFTSLOUnmeasured", fired("InferenceTTFTSLOUnmeasured", "sglang-default")),
    ]
    alerts_fire_as_expected(tmp_path, series, [("70m", a, e) for a, e in checks])


def test_prometheus_rule_follows_the_slo_values(render: Render) -> None:
    docs = render(
        prometheusRule__enabled=True,
        serviceMonitor__enabled=True,
        prometheusRule__ttftSLO={"ttftSeconds": "1.0", "objective": 0.99},
    )
    (rule,) = by_kind(docs, "PrometheusRule")
    fast = rule["spec"]["groups"][0]["rules"][0]["expr"]
    assert 'le="1.0"' in fast
    threshold = float(re.findall(r"> ([0-9.]+)", fast)[0])
    assert threshold == pytest.approx(14.4 * 0.01)


def test_dashboard_covers_each_service_view(render: Render) -> None:
    (config_map,) = by_kind(render(grafanaDashboard__enabled=True), "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["inferscale.json"])
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    for metric in (
        "inferscale_current_replicas",
        "inferscale_desired_replicas",
        "inferscale_ready_replicas",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_sum",
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_waiting",
        "inferscale_decisions_total",
    ):
        assert metric in exprs
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"namespace", "name", "model"} <= set(variables)
    # a service with a problem has no replica figures, only conditions; the engine panels follow its model
    assert "inferscale_condition" in variables["name"]["definition"]
    assert variables["model"]["definition"].startswith("label_values(inferscale_service_model{")
    assert 'name="$name"' in variables["model"]["definition"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_chart_crd_is_not_templated(helm: str) -> None:
    """crds/ is installed verbatim and never upgraded; NOTES and README say how to upgrade it."""
    crd = yaml.safe_load((CHART / "crds" / "inferscale.dev_inferenceservices.yaml").read_text())
    assert crd["kind"] == "CustomResourceDefinition"
    assert "kubectl apply --server-side" in (CHART / "README.md").read_text()
    assert "kubectl apply --server-side" in (CHART / "templates" / "NOTES.txt").read_text()
    result = run_helm(helm, "template", "x", str(CHART), "--kube-version", KUBE_VERSION, "--include-crds")
    assert "kind: CustomResourceDefinition" in result.stdout


def test_prometheus_rules_pass_promtool(render: Render, tmp_path: Any) -> None:
    promtool = tool("promtool", "make setup (Debian's prometheus)")
    (rule,) = by_kind(render(prometheusRule__enabled=True, serviceMonitor__enabled=True), "PrometheusRule")
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in rule['spec']['groups'])} rules found" in result.stdout


@pytest.mark.parametrize(
    ("interval", "quiet", "stalled"),
    [("600", "25m", "40m"), ("10", "5m", "11m"), (None, "5m", "11m")],
    ids=["10-minute-tick", "10-second-tick", "tick-not-exported"],
)
def test_the_stall_alert_waits_three_ticks_and_at_least_five_minutes(
    render: Render, tmp_path: Any, interval: str | None, quiet: str, stalled: str
) -> None:
    # a fixed 5-minute threshold fired between every two ticks of a 10-minute --interval
    (rule,) = by_kind(render(prometheusRule__enabled=True, serviceMonitor__enabled=True), "PrometheusRule")
    (stall,) = [r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == "InferscaleOperatorStalled"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "stall", "rules": [stall]}]}))
    job = re.search(r'job="([^"]+)"', stall["expr"]).group(1)  # type: ignore[union-attr]
    series = [{"series": f'inferscale_last_tick_timestamp_seconds{{job="{job}"}}', "values": "0x60"}]
    if interval is not None:
        series.append({"series": f'inferscale_tick_interval_seconds{{job="{job}"}}', "values": f"{interval}x60"})
    fired = {"exp_labels": stall["labels"], "exp_annotations": stall["annotations"]}
    stall_alert = "InferscaleOperatorStalled"
    alerts_fire_as_expected(tmp_path, series, [(quiet, stall_alert, []), (stalled, stall_alert, [fired])])


def _writes_policy(docs: list[dict[str, Any]]) -> dict[str, Any] | None:
    policies = by_kind(docs, "ValidatingAdmissionPolicy")
    assert len(policies) <= 1
    if not policies:
        assert not by_kind(docs, "ValidatingAdmissionPolicyBinding")
        return None
    (binding,) = by_kind(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policies[0]["metadata"]["name"], "validationActions": ["Deny"]}
    return policies[0]


def test_an_admission_policy_narrows_every_write_rbac_cannot(render: Render) -> None:
    policy = _writes_policy(render())
    assert policy is not None and policy["spec"]["failurePolicy"] == "Fail"
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == 'request.userInfo.username == "system:serviceaccount:inferscale:inferscale"'
    rules = {
        (r["apiGroups"][0], r["resources"][0]): r["operations"]
        for r in policy["spec"]["matchConstraints"]["resourceRules"]
    }
    assert rules == {("", "pods"): ["UPDATE"], ("apps", "deployments"): ["CREATE", "UPDATE"]}
    # each write RBAC grants on its own is matched, and only those
    only_pods = _writes_policy(render(rbac__managedDeployments=False))
    assert only_pods is not None
    assert [r["resources"] for r in only_pods["spec"]["matchConstraints"]["resourceRules"]] == [["pods"]]
    assert _writes_policy(render(rbac__managedDeployments=False, podDeletionCost=False)) is None
    # RBAC kept outside the chart grants the same writes: still narrowed, unless the policy is turned off
    assert _writes_policy(render(rbac__create=False)) is not None
    assert _writes_policy(render(rbac__create=False, rbac__admissionPolicy=False)) is None


def test_the_admission_policy_names_the_account_the_operator_runs_as(render: Render) -> None:
    policy = _writes_policy(render(serviceAccount__create=False, serviceAccount__name="ops"))
    assert policy is not None
    assert "system:serviceaccount:inferscale:ops" in policy["spec"]["matchConditions"][0]["expression"]


def test_the_chart_works_as_a_dependency(helm: str, tmp_path: Any) -> None:
    # Helm hands a subchart a `global` value, which a closed schema refused
    umbrella = tmp_path / "umbrella"
    (umbrella / "charts").mkdir(parents=True)
    shutil.copytree(CHART, umbrella / "charts" / "inferscale")
    (umbrella / "Chart.yaml").write_text("apiVersion: v2\nname: umbrella\nversion: 0.1.0\n")
    result = run_helm(helm, "template", "u", str(umbrella), "--kube-version", KUBE_VERSION)
    assert result.returncode == 0, result.stderr
    assert "kind: ValidatingAdmissionPolicy" in result.stdout


def test_the_projects_helm_renders_the_chart_without_being_told_the_kubernetes_version(helm: str) -> None:
    # a helm built without its release ldflags assumes Kubernetes 1.20 and refuses kubeVersion >= 1.30
    result = run_helm(helm, "template", "x", str(CHART))
    assert result.returncode == 0, result.stderr


def test_a_long_release_name_still_names_a_valid_metrics_service_and_its_job(helm: str) -> None:
    release = "llm-platform-autoscaler-production-eu-west-1a"  # 45 characters: Helm takes up to 53
    args = ["template", release, str(CHART), "--kube-version", KUBE_VERSION, "--set", "prometheusRule.enabled=true"]
    result = run_helm(helm, *args, "--set", "serviceMonitor.enabled=true")
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    (service,) = by_kind(docs, "Service")
    name = service["metadata"]["name"]
    assert len(name) <= 63 and name.endswith("-metrics")  # was 64 characters: the install failed on it
    (rule,) = by_kind(docs, "PrometheusRule")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert f'up{{job="{name}"}}' in alerts["InferscaleOperatorDown"]["expr"]


def _engine_series(model: str, names: dict[str, str], deployment: str = "") -> list[dict[str, str]]:
    """One pod of `model` exporting the families `names` maps (role -> metric name): 15-s samples for 10 minutes.
    Its Deployment is named after the model unless `deployment` names another, whose pod reads other figures."""
    pod = f'namespace="llm",pod="{deployment or model}-7d9f8c6b5-x2x4q",model_name="{model}"'
    values = {"kv": "0.4x40", "waiting": "3x40", "running": "5x40", "itl_sum": "0+0.3x40", "itl_count": "0+15x40"}
    if deployment:  # a canary of the same model beside it, busier: none of it may reach the service's panels
        values = {"kv": "0.9x40", "waiting": "30x40", "running": "50x40", "itl_sum": "0+3x40", "itl_count": "0+15x40"}
    series = [{"series": f"{names[role]}{{{pod}}}", "values": v} for role, v in values.items()]
    for le, v in (("0.1", "0+15x40"), ("0.5", "0+30x40"), ("+Inf", "0+30x40")):  # 1/s under 0.1 s, 1/s under 0.5 s
        series.append({"series": f'{names["ttft"]}{{{pod},le="{le}"}}', "values": v})
    return series


ENGINES = {
    "new": {  # vLLM 0.11 and later
        "kv": "vllm:kv_cache_usage_perc",
        "waiting": "vllm:num_requests_waiting",
        "running": "vllm:num_requests_running",
        "itl_sum": "vllm:inter_token_latency_seconds_sum",
        "itl_count": "vllm:inter_token_latency_seconds_count",
        "ttft": "vllm:time_to_first_token_seconds_bucket",
    },
    "old": {  # vLLM before 0.10: the names the operator still reads
        "kv": "vllm:gpu_cache_usage_perc",
        "waiting": "vllm:num_requests_waiting",
        "running": "vllm:num_requests_running",
        "itl_sum": "vllm:time_per_output_token_seconds_sum",
        "itl_count": "vllm:time_per_output_token_seconds_count",
        "ttft": "vllm:time_to_first_token_seconds_bucket",
    },
    "sg": {
        "kv": "sglang:token_usage",
        "waiting": "sglang:num_queue_reqs",
        "running": "sglang:num_running_reqs",
        "itl_sum": "sglang:inter_token_latency_seconds_sum",
        "itl_count": "sglang:inter_token_latency_seconds_count",
        "ttft": "sglang:time_to_first_token_seconds_bucket",
    },
}


def test_the_dashboard_s_engine_panels_read_every_engine_the_operator_reads(render: Render, tmp_path: Any) -> None:
    (config_map,) = by_kind(render(grafanaDashboard__enabled=True), "ConfigMap")
    dashboard = json.loads(config_map["data"]["inferscale.json"])
    expected = {
        "0.95, ": 0.46,
        "0.50, ": 0.1,
        "inter_token": 0.02,
        "avg(": 0.4,
        "max(": 0.4,
        "waiting": 3,
        "running": 5,
    }
    panels = [t["expr"] for p in dashboard["panels"] for t in p["targets"] if "model_name" in t["expr"]]
    cases = []
    for expr in panels:
        (value,) = [v for key, v in expected.items() if key in expr]
        for model in ENGINES:
            pods = deployment_pods(model)  # the service's `pods` label, as the operator sets it
            promql = expr.replace("$namespace", "llm").replace("$model", model).replace("$__rate_interval", "1m")
            promql = promql.replace("$pods", pods)
            rounded = f"round({promql}, 0.001)"  # rate() extrapolates in floats: 0.46 reads 0.45999999999999996
            cases.append({"expr": rounded, "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": value}]})
    assert len(cases) == 7 * len(ENGINES)  # TTFT P95 and P50, ITL, KV mean and max, waiting, running
    series = [s for model, names in ENGINES.items() for s in _engine_series(model, names)]
    series += [s for model, names in ENGINES.items() for s in _engine_series(model, names, f"{model}-canary")]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": []}))
    test = {"interval": "15s", "input_series": series, "promql_expr_test": cases}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "tests": [test]}))
    promtool = tool("promtool", "make setup (Debian's prometheus)")
    result = subprocess.run([promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr  # empty panels on vLLM before 0.10 and on SGLang
    # the model list is the operator's, whatever engine serves it (it was vLLM's gauge alone, then SGLang's too)
    (model,) = [v for v in dashboard["templating"]["list"] if v["name"] == "model"]
    assert "inferscale_service_model" in model["query"]["query"]
    (pods,) = [v for v in dashboard["templating"]["list"] if v["name"] == "pods"]
    assert "inferscale_service_model" in pods["query"]["query"] and pods["hide"] == 2


def _alerts_rules(render: Render, tmp_path: Any, *names: str) -> dict[str, dict[str, Any]]:
    """The named alerts of the rendered PrometheusRule, written alone to tmp_path/rules.yml."""
    (rule,) = by_kind(render(prometheusRule__enabled=True, serviceMonitor__enabled=True), "PrometheusRule")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") in names}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": list(alerts.values())}]}))
    return alerts


def test_one_query_failing_every_tick_is_paged_and_a_healthy_operator_is_not(render: Render, tmp_path: Any) -> None:
    # 9 queries a tick at a 10 s tick (54 a minute); 1 of them failing every tick is 0.1 errors/s, which a rate
    # threshold of 0.1 left out: its family unknown every tick, no scale-down for good
    _alerts_rules(render, tmp_path, "InferscalePrometheusQueryErrors")
    job = 'job="inferscale-metrics"'
    series = [
        {"series": f'inferscale_prometheus_queries_total{{{job},instance="a"}}', "values": "0+54x60"},
        {"series": f'inferscale_prometheus_query_errors_total{{{job},instance="a"}}', "values": "0+6x60"},
        {"series": f'inferscale_prometheus_queries_total{{{job},instance="b"}}', "values": "0+54x60"},
        {"series": f'inferscale_prometheus_query_errors_total{{{job},instance="b"}}', "values": "0+0x60"},
    ]
    summary = "The inferscale operator's Prometheus queries are failing"
    fired = [{"exp_labels": {"severity": "warning"}, "exp_annotations": {"summary": summary}}]
    alerts_fire_as_expected(tmp_path, series[:2], [("25m", "InferscalePrometheusQueryErrors", fired)])
    alerts_fire_as_expected(tmp_path, series[2:], [("25m", "InferscalePrometheusQueryErrors", [])])


def test_a_service_the_operator_cannot_scale_is_paged_but_not_one_scaled_to_zero_by_hand(
    render: Render, tmp_path: Any
) -> None:
    (alert,) = _alerts_rules(render, tmp_path, "InferenceServiceNotReady").values()
    series = [
        {"series": 'inferscale_not_ready{namespace="llm",name="a",reason="ScaleFailed"}', "values": "1x40"},
        {"series": 'inferscale_not_ready{namespace="llm",name="b",reason="ScalingDisabled"}', "values": "1x40"},
        {"series": 'inferscale_not_ready{namespace="llm",name="c",reason="Conflict"}', "values": "1x40"},
    ]
    labels = {"namespace": "llm", "name": "a", "reason": "ScaleFailed", **alert["labels"]}
    annotations = {
        "summary": "llm/a is not being scaled (ScaleFailed)",
        "description": "Its Ready condition is False for ScaleFailed; "
        "kubectl describe inferenceservice names the cause.",
    }
    checks = [
        ("10m", "InferenceServiceNotReady", []),
        ("20m", "InferenceServiceNotReady", [{"exp_labels": labels, "exp_annotations": annotations}]),
    ]
    alerts_fire_as_expected(tmp_path, series, checks)
