"""A Prometheus behind authentication: the token, the password and the headers reach it on every query,
a rotated token file is read again, and a refusal or a missing file reads as what to fix. Against a real
HTTP server on a local port (the TLS path runs against the real Prometheus in tests/e2e)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from inferscale.adapters.prometheus import QUERIES, PrometheusReader
from inferscale.adapters.prometheus_access import AccessError, FileSecret, PrometheusAccess, parse_header, redacted

EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()


class Guarded:
    """Answers every query when the Authorization header is `wanted`, else 401; records what it saw."""

    def __init__(self, wanted: str | None) -> None:
        self.wanted = wanted
        self.seen: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append(dict(self.headers.items()))
                ok = outer.wanted is None or self.headers.get("Authorization") == outer.wanted
                body = EMPTY if ok else b"Unauthorized\n"
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def guarded() -> Iterator[Guarded]:
    server = Guarded("Bearer first")
    yield server
    server.server.shutdown()
    server.server.server_close()


def snapshot_errors(url: str, access: PrometheusAccess) -> list[str]:
    reader = PrometheusReader(url, timeout=2.0, access=access)
    try:
        return list(asyncio.run(reader.snapshot(0.0)).errors)
    finally:
        reader.close()


def test_the_token_is_sent_and_read_again_once_the_kubelet_replaces_the_file(guarded: Guarded, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    access = PrometheusAccess(bearer_token_file=str(token), headers=(("X-Scope-OrgID", "team-a"),))
    access.check()
    assert snapshot_errors(guarded.url, access) == []
    assert {h["Authorization"] for h in guarded.seen} == {"Bearer first"}
    assert {h["X-Scope-OrgID"] for h in guarded.seen} == {"team-a"}
    # the kubelet writes the new token beside the old one and swaps a symlink: a new inode
    fresh = tmp_path / "token.new"
    fresh.write_text("second\n")
    os.replace(fresh, token)
    guarded.wanted, guarded.seen = "Bearer second", []
    assert snapshot_errors(guarded.url, access) == []
    assert {h["Authorization"] for h in guarded.seen} == {"Bearer second"}


def test_basic_auth_sends_the_password_from_its_file(guarded: Guarded, tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret")
    guarded.wanted = "Basic " + base64.b64encode(b"inferscale:s3cret").decode()
    assert snapshot_errors(guarded.url, PrometheusAccess(username="inferscale", password_file=str(password))) == []


def test_a_refusal_says_whether_credentials_are_missing_or_wrong(guarded: Guarded, tmp_path: Path) -> None:
    missing = snapshot_errors(guarded.url, PrometheusAccess())
    assert len(missing) == len(QUERIES)
    assert all(
        "answered HTTP 401: it wants credentials" in e and "--prometheus-bearer-token-file" in e for e in missing
    )
    token = tmp_path / "token"
    token.write_text("stale")
    wrong = snapshot_errors(guarded.url, PrometheusAccess(bearer_token_file=str(token)))
    assert all("refused the operator's credentials (HTTP 401)" in e for e in wrong), wrong


def test_a_token_file_gone_after_the_start_fails_the_queries_with_its_path(guarded: Guarded, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first")
    access = PrometheusAccess(bearer_token_file=str(token))
    access.check()
    token.unlink()
    errors = snapshot_errors(guarded.url, access)
    assert len(errors) == len(QUERIES)
    assert all(
        e.endswith(f"--prometheus-bearer-token-file {token}: cannot read it: No such file or directory") for e in errors
    )


def test_a_file_secret_is_read_once_until_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one")
    secret = FileSecret("--flag", str(path))
    assert secret.read() == "one"
    path.write_text("two!")  # another size: seen as a change even within the clock's resolution
    assert secret.read() == "two!"
    path.write_text("")
    with pytest.raises(AccessError, match=r"--flag .*: the file is empty"):
        secret.read()


@pytest.mark.parametrize(
    ("access", "message"),
    [
        (PrometheusAccess(bearer_token_file="/t", username="u", password_file="/p"), "exclude each other"),
        (PrometheusAccess(username="u"), "go together; give both"),
        (PrometheusAccess(password_file="/p"), "go together; give both"),
        (PrometheusAccess(bearer_token_file="/nonexistent/token"), "cannot read it: No such file or directory"),
        (PrometheusAccess(ca_file="/nonexistent/ca.pem"), "--prometheus-ca-file /nonexistent/ca.pem: no such file"),
    ],
)
def test_access_that_cannot_work_is_refused_before_the_first_query(access: PrometheusAccess, message: str) -> None:
    with pytest.raises(AccessError, match=message):
        access.check()


def test_a_ca_file_that_is_no_pem_bundle_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    with pytest.raises(AccessError, match="not a PEM CA bundle"):
        PrometheusAccess(ca_file=str(bad)).check()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("X-Scope-OrgID team-a", "is not 'Name: value'"),
        ("X Scope: a", "is not 'Name: value'"),
        ("X-Scope-OrgID:", "is not 'Name: value'"),
        ("Authorization: Bearer abc", "would show the secret in the pod spec"),
    ],
)
def test_a_header_must_be_name_colon_value_and_not_a_secret(text: str, message: str) -> None:
    with pytest.raises(AccessError, match=message):
        parse_header(text)
    assert parse_header(" X-Scope-OrgID :  team-a ") == ("X-Scope-OrgID", "team-a")


def test_a_password_in_the_url_is_not_logged() -> None:
    assert redacted("https://u:pw@prom.example:9090/x") == "https://u:***@prom.example:9090/x"
    assert redacted("http://prom:9090") == "http://prom:9090"


def test_a_token_a_header_cannot_carry_is_refused_without_being_quoted(guarded: Guarded, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first")
    access = PrometheusAccess(bearer_token_file=str(token))
    access.check()
    token.write_text("secret-part-one\nsecret-part-two\n")  # a Secret made from a file with a line break inside
    errors = snapshot_errors(guarded.url, access)
    assert len(errors) == len(QUERIES)
    assert all("the token has characters a bearer token cannot have" in e for e in errors), errors
    assert not any("secret-part" in e for e in errors), "the token must not reach status"
    with pytest.raises(AccessError, match="cannot have") as refused:
        access.check()
    assert "secret-part" not in str(refused.value)
