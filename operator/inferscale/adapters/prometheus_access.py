"""How the operator reaches a Prometheus behind authentication or a private CA: OpenShift's thanos-querier
(a service-account token and the service CA), Grafana Mimir or Cortex (a tenant header, basic auth), an
authenticating proxy.

Secrets come from files, never from flag values, which `ps` and the pod spec show. Each file is read again
when it changes: the kubelet replaces a projected service-account token about hourly, and an operator
that kept the first one would be refused from then on.
"""

from __future__ import annotations

import os
import re
import ssl
import stat
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import requests
from requests.auth import AuthBase, HTTPBasicAuth

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)


class AccessError(ValueError):
    """A credential or CA file the operator cannot use, said in one line naming the flag."""


MAX_SECRET_BYTES = 1 << 20  # a token, a password or a CA bundle; a larger "file" is a device or a mistake


def not_a_small_file(flag: str, path: str, limit: int = MAX_SECRET_BYTES) -> str | None:
    """Why `path` cannot be a credential file, or None: a device (/dev/zero would be read until memory runs out)
    or a FIFO (opened, it waits for a writer forever) is refused before it is opened."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{flag} {path}: no such file"
    except OSError as e:
        return f"{flag} {path}: cannot read it: {e.strerror or e}"
    if not stat.S_ISREG(st.st_mode):
        return f"{flag} {path}: not a regular file (a directory, device, pipe or socket)"
    if st.st_size > limit:
        return f"{flag} {path}: {st.st_size} bytes, over the {limit} a credential file may have"
    return None


class FileSecret:
    """A secret read from a file, read again whenever the file is replaced or rewritten. Safe to read
    from the query threads at once."""

    def __init__(self, flag: str, path: str) -> None:
        self.flag, self.path = flag, path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._value = ""

    def read(self) -> str:
        with self._lock:
            try:
                st = os.stat(self.path)  # follows the kubelet's ..data symlink to the current copy
                key = (st.st_ino, st.st_mtime_ns, st.st_size)
                if key != self._seen:
                    problem = not_a_small_file(self.flag, self.path)
                    if problem:
                        raise AccessError(problem)
                    with open(self.path, encoding="utf-8") as f:
                        value = f.read(MAX_SECRET_BYTES + 1).strip()
                    if not value:
                        raise AccessError(f"{self.flag} {self.path}: the file is empty")
                    self._value, self._seen = value, key
            except OSError as e:
                raise AccessError(f"{self.flag} {self.path}: cannot read it: {e.strerror or e}") from None
            except UnicodeDecodeError:
                raise AccessError(f"{self.flag} {self.path}: not a text file") from None
            return self._value


_B64TOKEN = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")  # RFC 6750's b64token: what a bearer header may carry


def bearer_token(secret: FileSecret) -> str:
    """The token, refused without being quoted when a header cannot carry it (an inner line break, a
    space): requests would put the whole header, token included, into an error message that reaches status."""
    token = secret.read()
    if not _B64TOKEN.match(token):
        raise AccessError(
            f"{secret.flag} {secret.path}: the token has characters a bearer token cannot have "
            "(a line break or a space inside it?)"
        )
    return token


class _Bearer(AuthBase):
    def __init__(self, token: FileSecret) -> None:
        self.token = token

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers["Authorization"] = f"Bearer {bearer_token(self.token)}"
        return r


class _Basic(AuthBase):
    def __init__(self, username: str, password: FileSecret) -> None:
        self.username, self.password = username, password

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        return HTTPBasicAuth(self.username, self.password.read())(r)


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value`, as curl's -H takes it."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _TOKEN.match(name) or not value or "\r" in value or "\n" in value:
        raise AccessError(f"--prometheus-header {text!r} is not 'Name: value' (for example 'X-Scope-OrgID: team-a')")
    if name.lower() == "authorization":
        raise AccessError(
            "--prometheus-header Authorization would show the secret in the pod spec; give it in a file with "
            "--prometheus-bearer-token-file, or --prometheus-username and --prometheus-password-file"
        )
    return name, value


def redacted(url: str) -> str:
    """The URL as the log may show it: a password in it is replaced."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


@dataclass(frozen=True)
class PrometheusAccess:
    bearer_token_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def authenticated(self) -> bool:
        return bool(self.bearer_token_file or self.username)

    def check(self) -> None:
        """Everything that can be known wrong before the first query, as an AccessError."""
        if self.bearer_token_file and (self.username or self.password_file):
            raise AccessError(
                "--prometheus-bearer-token-file and --prometheus-username/--prometheus-password-file exclude each "
                "other; give one way to authenticate"
            )
        if bool(self.username) != bool(self.password_file):
            raise AccessError("--prometheus-username and --prometheus-password-file go together; give both")
        if self.bearer_token_file:
            bearer_token(FileSecret("--prometheus-bearer-token-file", self.bearer_token_file))
        if self.password_file:
            FileSecret("--prometheus-password-file", self.password_file).read()
        if self.ca_file:
            problem = not_a_small_file("--prometheus-ca-file", self.ca_file)
            if problem:
                raise AccessError(problem)
            try:
                ssl.create_default_context(cafile=self.ca_file)
            except FileNotFoundError:
                raise AccessError(f"--prometheus-ca-file {self.ca_file}: no such file") from None
            except (ssl.SSLError, OSError, ValueError) as e:
                raise AccessError(f"--prometheus-ca-file {self.ca_file}: not a PEM CA bundle ({e})") from None

    def auth(self) -> AuthBase | None:
        if self.bearer_token_file:
            return _Bearer(FileSecret("--prometheus-bearer-token-file", self.bearer_token_file))
        if self.username and self.password_file:
            return _Basic(self.username, FileSecret("--prometheus-password-file", self.password_file))
        return None

    def session(self) -> requests.Session:
        """A session that verifies TLS against the CA file when one is given (else the system's CAs)."""
        session = requests.Session()
        session.verify = self.ca_file or True
        session.headers.update(dict(self.headers))
        return session
