"""`inferscale run` refuses bad arguments with one line and exit code 2, before starting anything."""

from __future__ import annotations

import os
from pathlib import Path

import kopf
import pytest
from typer.testing import CliRunner

from inferscale.adapters.prometheus_access import PrometheusAccess
from inferscale.cli import app


@pytest.fixture
def kopf_runs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """The calls that would have handed the process to kopf; none is made."""
    calls: list[dict[str, object]] = []
    monkeypatch.setattr(kopf, "run", lambda **kw: calls.append(kw))
    # `run` exports --kubeconfig for kopf's own login: give the variable a value to put back afterwards
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig-of-the-test")
    return calls


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prometheus-timeout", "0s"], "--prometheus-timeout must be positive"),
        (["--prometheus-timeout", "soon"], "--prometheus-timeout:"),
        (["--interval", "-5s"], "--interval"),
        (["--interval", "10ms"], "--interval must be at least 1s (Prometheus samples are seconds apart), got '10ms'"),
        (["--interval", "3000000h"], "--interval must be shorter than about 2562047h"),
        (["--metrics-port", "70000"], "is not a TCP port"),
        (["-n", "LLM"], "--namespace 'LLM' is not a namespace name"),
        (["-n", "llm"], "--namespace llm is given more than once"),
        (["-A"], "--all-namespaces and --namespace exclude each other"),
        (["--prometheus-url", "prometheus:9090"], "--prometheus-url 'prometheus:9090' is not an http(s) URL"),
        (["--prometheus-url", "http://"], "is not an http(s) URL with a host"),
        (["--prometheus-url", "http://prom:99999"], "is not an http(s) URL with a host"),
        (["--prometheus-url", "ftp://prom:9090"], "is not an http(s) URL with a host"),
        (["--leader-elect"], "--leader-elect needs the Lease's namespace: give --leader-elect-namespace"),
        (["--leader-elect", "--leader-elect-namespace", "Ops_NS"], "'Ops_NS' is not a namespace name"),
        (["--leader-elect", "--leader-elect-namespace", "ops", "--leader-elect-lease", "A"], "is not a valid object"),
        (["--prometheus-username", "u"], "--prometheus-username and --prometheus-password-file go together"),
        (["--prometheus-bearer-token-file", "/nonexistent/t"], "--prometheus-bearer-token-file /nonexistent/t: cannot"),
        (["--prometheus-ca-file", "/nonexistent/ca.pem"], "--prometheus-ca-file /nonexistent/ca.pem: no such file"),
        (["--prometheus-header", "X-Scope-OrgID=a"], "--prometheus-header 'X-Scope-OrgID=a' is not 'Name: value'"),
        # a device would be read until memory runs out, a FIFO without a writer waits forever
        (["--prometheus-bearer-token-file", "/dev/zero"], "/dev/zero: not a regular file"),
        (["--prometheus-username", "u", "--prometheus-password-file", "/dev/zero"], "/dev/zero: not a regular file"),
        (["--prometheus-ca-file", "/dev/zero"], "--prometheus-ca-file /dev/zero: not a regular file"),
        (["--kubeconfig", "/dev/zero"], "--kubeconfig /dev/zero: not a regular file"),
    ],
)
def test_a_bad_argument_exits_2_with_its_name(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["run", "-n", "llm", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_no_namespace_at_all_asks_for_one() -> None:
    result = CliRunner().invoke(app, ["run"])
    assert result.exit_code == 2
    assert "give --all-namespaces or at least one --namespace" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "no such file"),
        ("clusters: [unclosed\n", "not YAML (while parsing a flow sequence"),  # YAML's error is several lines
        ("window_start_s,total_rate_rps\n0,1\n", "not a kubeconfig (a YAML mapping of clusters, users and contexts)"),
        (b"\x7fELF\x02\x86", "not UTF-8 text, so not a kubeconfig"),
        ("apiVersion: v1\nkind: Config\n", "Invalid kube-config file. Expected key current-context"),  # the loader
    ],
)
def test_credentials_that_do_not_load_exit_2_before_kopf_starts(
    tmp_path: Path, kopf_runs: list[dict[str, object]], text: str | bytes | None, message: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    if text is not None:
        kubeconfig.write_bytes(text if isinstance(text, bytes) else text.encode())
    result = CliRunner().invoke(app, ["run", "-n", "llm", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        f"inferscale run: cannot load Kubernetes credentials from --kubeconfig {kubeconfig}: "
    )
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert kopf_runs == []


def test_a_kubeconfig_variable_naming_no_file_that_exists_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kopf_runs: list[dict[str, object]]
) -> None:
    missing = f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"
    monkeypatch.setenv("KUBECONFIG", missing)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = CliRunner().invoke(app, ["run", "-n", "llm"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"inferscale run: cannot load Kubernetes credentials from KUBECONFIG {missing}: none of its files exists\n"
    )
    assert kopf_runs == []


def test_credentials_that_load_hand_over_to_kopf(tmp_path: Path, kopf_runs: list[dict[str, object]]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    result = CliRunner().invoke(app, ["run", "-n", "llm", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 0, result.output
    assert len(kopf_runs) == 1 and kopf_runs[0]["namespaces"] == ["llm"]
    assert kopf_runs[0]["memo"].config.pod_deletion_cost is True  # type: ignore[attr-defined]
    result = CliRunner().invoke(
        app, ["run", "-n", "llm", "--kubeconfig", str(kubeconfig), "--no-pod-deletion-cost", "--prometheus-url",
              "https://prom.example:9091/"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    config = kopf_runs[1]["memo"].config  # type: ignore[attr-defined]
    assert config.pod_deletion_cost is False and config.prometheus_url == "https://prom.example:9091"
    assert config.prometheus_access == PrometheusAccess()
    token = tmp_path / "token"
    token.write_text("t\n")
    result = CliRunner().invoke(
        app, ["run", "-n", "llm", "--kubeconfig", str(kubeconfig), "--prometheus-header", "X-Scope-OrgID: a"],
        env={"PROMETHEUS_BEARER_TOKEN_FILE": str(token)},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    access = kopf_runs[2]["memo"].config.prometheus_access  # type: ignore[attr-defined]
    assert access == PrometheusAccess(bearer_token_file=str(token), headers=(("X-Scope-OrgID", "a"),))


def test_an_in_cluster_load_that_fails_names_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kopf_runs: list[dict[str, object]]
) -> None:
    from inferscale.adapters import kube

    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setattr(kube, "SA_TOKEN", str(token))  # a pod's token, but no CA or host to go with it
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.delenv("KUBECONFIG")
    result = CliRunner().invoke(app, ["run", "-n", "llm"])
    assert result.exit_code == 2, result.output
    assert f"cannot load Kubernetes credentials from the pod's service account ({token})" in result.stderr
    assert kopf_runs == []


@pytest.mark.parametrize("flag", ["--prometheus-bearer-token-file", "--prometheus-ca-file", "--kubeconfig"])
def test_a_fifo_given_as_a_credential_file_is_refused_not_waited_on(
    tmp_path: Path, flag: str, kopf_runs: list[dict[str, object]]
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = CliRunner().invoke(app, ["run", "-n", "llm", flag, str(fifo)])
    assert result.exit_code == 2 and f"{flag} {fifo}: not a regular file" in result.output
    # nor is a kubeconfig that did not load handed on to what the process runs next (kopf, or helm in a test)
    assert os.environ["KUBECONFIG"] == "/nonexistent/kubeconfig-of-the-test" and kopf_runs == []


def test_a_credential_file_too_large_to_be_one_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(b"a" * (2 << 20))
    result = CliRunner().invoke(app, ["run", "-n", "llm", "--prometheus-bearer-token-file", str(token)])
    assert result.exit_code == 2 and "a credential file may have" in result.output
