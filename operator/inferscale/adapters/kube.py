"""A small async Kubernetes REST client for the tick loop: whole-fleet lists as plain JSON, /scale
reads and writes, status merge-patches and Events.

The official client deserialises every list into objects, which costs seconds for thousands of
pods; the tick only needs a few fields, so this talks JSON over aiohttp with the credentials the
`kubernetes` package resolves (kubeconfig or in-cluster service account).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import ssl
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

# A typo in a user's pod template (`argz`) is an error to report, not a field the server silently drops.
STRICT = {"fieldValidation": "Strict"}

SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # a path, not a secret
LIST_PAGE = 500  # client-go's pager default


def collection_path(group_version: str, plural: str, namespace: str | None) -> str:
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


FENCED = 499  # a write refused by the operator itself, not the server: it does not hold the leader Lease


class KubeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        if status == 0:  # no HTTP status to quote: no answer, or one that broke off
            super().__init__(f"no complete answer from the API server ({message})")
        elif status == FENCED:  # not a status the server sent: the request was never sent
            super().__init__(message)
        else:
            super().__init__(f"HTTP {status}: {message}")

    @property
    def transient(self) -> bool:
        return self.status in (0, 408, 429) or self.status >= 500


def _unanswered(e: BaseException, timeout: float | None, what: str = "timed out after") -> str:
    """What went wrong without a whole HTTP answer; a timeout's own text is empty."""
    if isinstance(e, TimeoutError) and not str(e):
        return f"{what} {timeout:g}s" if timeout else "timed out"
    return f"{type(e).__name__}: {e}"


@dataclass(frozen=True)
class Credentials:
    host: str
    ssl: ssl.SSLContext | bool
    token: str | None
    token_file: str | None  # re-read per request: projected service-account tokens rotate

    @staticmethod
    def in_cluster(kubeconfig: str | None = None) -> bool:
        """Whether `load` reads the pod's service account rather than a kubeconfig."""
        return kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ and os.path.exists(SA_TOKEN)

    @classmethod
    def load(cls, kubeconfig: str | None = None) -> Credentials:
        cfg = k8s_client.Configuration()
        in_cluster = cls.in_cluster(kubeconfig)
        if in_cluster:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
        ctx: ssl.SSLContext | bool
        if cfg.verify_ssl:
            ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
            if cfg.cert_file:
                ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        else:
            ctx = False
        auth = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
        token = None
        if auth:
            prefix = cfg.api_key_prefix.get("authorization", "")
            token = auth if auth.startswith("Bearer ") or not prefix else f"{prefix} {auth}"
            token = token.removeprefix("Bearer ").strip()
        return cls(host=cfg.host.rstrip("/"), ssl=ctx, token=token, token_file=SA_TOKEN if in_cluster else None)


class KubeApi:
    def __init__(
        self,
        creds: Credentials,
        timeout: float = 30.0,
        concurrency: int = 16,
        fence: Callable[[], bool] | None = None,
    ) -> None:
        self.creds = creds
        # Under leader election: checked just before every write is sent, so a leader whose Lease may have
        # passed to a standby (a renewal overdue, a process paused) writes nothing more.
        self.fence = fence
        self._timeout = aiohttp.ClientTimeout(total=timeout, connect=10.0)
        self._session: aiohttp.ClientSession | None = None
        # Watches hold a connection each for minutes: their own pool, without aiohttp's limit of 100
        # connections, so two watches per namespace can never starve the tick's requests.
        self._watch_session: aiohttp.ClientSession | None = None
        self._sem = asyncio.Semaphore(concurrency)
        self.requests_sent = 0

    async def close(self) -> None:
        for session in (self._session, self._watch_session):
            if session is not None:
                await session.close()

    def _may_write(self) -> bool:
        return self.fence is None or self.fence()

    async def _fenced_after_connect(self, _: aiohttp.ClientSession, ctx: Any, __: Any) -> None:
        """The fence once more where a write had to open a connection: a TCP and TLS handshake to a struggling
        API server may take up to the connect timeout (10 s), longer than the 5 s between the fence and a
        standby's takeover."""
        request = ctx.trace_request_ctx
        if isinstance(request, dict) and "write" in request and not self._may_write():
            raise KubeError(FENCED, f"{request['write']} not sent: the leader Lease passed while it connected")

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "inferscale"}
        token = self.creds.token
        if self.creds.token_file:
            with open(self.creds.token_file) as f:
                token = f.read().strip()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str | None = None,
        params: Mapping[str, str] | None = None,
        decode: bool = True,
    ) -> Any:
        if self._session is None:
            trace = aiohttp.TraceConfig()
            trace.on_connection_create_end.append(self._fenced_after_connect)
            self._session = aiohttp.ClientSession(timeout=self._timeout, trace_configs=[trace])
        data = json.dumps(body) if body is not None else None
        write = method != "GET" and self.fence is not None
        async with self._sem:
            if write and not self._may_write():
                raise KubeError(FENCED, f"{method} {path} not sent: this operator no longer holds the leader Lease")
            self.requests_sent += 1
            try:
                async with self._session.request(
                    method,
                    self.creds.host + path,
                    data=data,
                    params=params,
                    headers=self._headers(content_type if body is not None else None),
                    ssl=self.creds.ssl,
                    trace_request_ctx={"write": f"{method} {path}"} if write else None,
                ) as resp:
                    text = await resp.text()
                    if resp.status >= 400:
                        try:
                            message = json.loads(text).get("message", text)
                        except ValueError:
                            message = text
                        raise KubeError(resp.status, str(message)[:500])
                    return json.loads(text) if text and decode else None
            except (aiohttp.ClientError, TimeoutError) as e:
                raise KubeError(0, _unanswered(e, self._timeout.total)) from e

    async def list(
        self,
        group_version: str,
        plural: str,
        namespace: str | None = None,
        keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        optional: bool = True,
    ) -> list[dict[str, Any]]:
        """All objects of a kind in one namespace or cluster-wide; [] when the kind is not served
        (e.g. KEDA is not installed) and `optional`, else the 404's KubeError. Read in pages of LIST_PAGE, as
        client-go's pager does, and each page reduced by `keep` before the next is read, so a large fleet is
        never held as full objects."""
        items, version = await self.list_versioned(group_version, plural, namespace, keep)
        if version is None and not optional:
            raise KubeError(404, f"{collection_path(group_version, plural, namespace)} is not served")
        return items

    async def list_versioned(
        self,
        group_version: str,
        plural: str,
        namespace: str | None = None,
        keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> tuple[builtins.list[dict[str, Any]], str | None]:  # `list` is a method here
        """`list`, and the list's resourceVersion (a watch from it misses nothing); None when the kind is
        not served."""
        path = collection_path(group_version, plural, namespace)
        out: builtins.list[dict[str, Any]] = []
        token = ""
        while True:
            params = {"limit": str(LIST_PAGE), **({"continue": token} if token else {})}
            try:
                answer = await self.request("GET", path, params=params)
            except KubeError as e:
                if e.status == 404:
                    return [], None
                raise
            if not isinstance(answer, dict):
                return out, None
            out.extend(keep(i) if keep else i for i in answer.get("items") or [] if isinstance(i, dict))
            meta = answer.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                return out, meta.get("resourceVersion")

    async def watch(self, path: str, resource_version: str, timeout: int, idle: float) -> AsyncIterator[dict[str, Any]]:
        """The events of a watch from `resource_version` until the server ends it after `timeout`
        seconds. Nothing at all for `idle` seconds (more than `timeout`) means the connection stalled
        without a reset: a KubeError, like any other broken connection. Not counted against the
        request concurrency."""
        if self._watch_session is None:
            self._watch_session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout),
        }
        self.requests_sent += 1
        long = aiohttp.ClientTimeout(total=None, connect=10.0, sock_read=idle)
        try:
            async with self._watch_session.get(
                self.creds.host + path, params=params, headers=self._headers(None), ssl=self.creds.ssl, timeout=long
            ) as resp:
                if resp.status >= 400:
                    raise KubeError(resp.status, (await resp.text())[:500])
                buffer = b""
                async for chunk in resp.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield json.loads(line)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise KubeError(0, _unanswered(e, idle, "the watch was silent for")) from e

    async def get(self, path: str) -> dict[str, Any]:
        answer = await self.request("GET", path)
        return answer if isinstance(answer, dict) else {}

    async def merge_patch(
        self, path: str, body: Mapping[str, Any], answer: bool = True, strict: bool = False
    ) -> dict[str, Any]:
        """`answer=False` skips decoding the object the server sends back (status writes never read it);
        `strict` makes the server refuse unknown fields instead of dropping them with a warning."""
        params = STRICT if strict else None
        result = await self.request("PATCH", path, body, "application/merge-patch+json", params=params, decode=answer)
        return result if isinstance(result, dict) else {}

    async def json_patch(self, path: str, ops: Sequence[Mapping[str, Any]], strict: bool = False) -> None:
        """An RFC 6902 patch: what replaces a whole object, where a merge patch keeps every key it leaves out."""
        params = STRICT if strict else None
        await self.request("PATCH", path, list(ops), "application/json-patch+json", params=params, decode=False)

    async def create(self, path: str, body: Mapping[str, Any], strict: bool = False) -> dict[str, Any]:
        answer = await self.request("POST", path, body, "application/json", params=STRICT if strict else None)
        return answer if isinstance(answer, dict) else {}

    async def delete(self, path: str) -> None:
        try:
            await self.request("DELETE", path)
        except KubeError as e:
            if e.status != 404:
                raise
