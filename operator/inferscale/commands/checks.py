"""Checks of command-line values shared by the subcommands. Each message names the flag, not the
parameter of the library function the value goes to."""

from __future__ import annotations

import math
import os
import re
import socket
import stat
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from inferscale.api.rules import MAX_DURATION_SECONDS, MAX_TIME_TO_READY, NANOSECOND
from inferscale.perf import PerfError, gpu_spec
from inferscale.perf.catalog import vllm_batch_defaults
from inferscale.scaling.durations import parse_duration
from inferscale.sim.outage import KINDS as OUTAGE_KINDS
from inferscale.sim.outage import Outage

if TYPE_CHECKING:
    from inferscale.adapters.kube import Credentials
    from inferscale.adapters.prometheus_access import PrometheusAccess
    from inferscale.handlers.operator import LeaseConfig


class InputError(ValueError):
    """A command-line value is unusable; the message names its flag."""


def duration(flag: str, text: str) -> float:
    """Seconds, zero included (a duration never parses as negative)."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise InputError(f"{flag}: {e}") from None


def positive_duration(flag: str, text: str) -> float:
    seconds = duration(flag, text)
    if seconds <= 0:
        raise InputError(f"{flag} must be positive, got {text!r}")
    return seconds


def spec_duration(flag: str, text: str) -> float:
    """A positive duration that an InferenceService spec takes too: the replay hands it to inferscale's spec,
    which holds Kubernetes durations (whole int64 nanoseconds) and would refuse it mid-replay."""
    seconds = positive_duration(flag, text)
    within_spec(flag, text, seconds)
    if seconds < NANOSECOND:
        raise InputError(f"{flag} must be at least a nanosecond, got {text!r}")
    return seconds


def outage(flag: str, text: str, kind: str) -> Outage:
    """START+DURATION on the replay's axis, e.g. 20m+10m."""
    if kind not in OUTAGE_KINDS:
        raise InputError(f"--outage-kind {kind!r} is not known; known: {', '.join(OUTAGE_KINDS)}")
    start, plus, length = text.partition("+")
    if not plus:
        raise InputError(f"{flag} takes START+DURATION, e.g. 20m+10m, got {text!r}")
    at = duration(f"{flag} start", start.strip())
    return Outage(kind, at, at + positive_duration(f"{flag} duration", length.strip()))


MIN_TICK = 1.0


def tick(flag: str, text: str) -> float:
    """The operator's tick, also the decision interval of specs that set none, so bounded as one: a typo
    such as 10ms would list every InferenceService and query Prometheus a hundred times a second for samples
    scraped every few seconds."""
    seconds = spec_duration(flag, text)
    if seconds < MIN_TICK:
        raise InputError(f"{flag} must be at least {MIN_TICK:g}s (Prometheus samples are seconds apart), got {text!r}")
    return seconds


def within_spec(flag: str, text: str, seconds: float) -> None:
    if seconds > MAX_DURATION_SECONDS:
        raise InputError(
            f"{flag} must be shorter than about {MAX_DURATION_SECONDS // 3600:.0f}h (Kubernetes durations are int64 "
            f"nanoseconds), got {text!r}"
        )


def time_to_ready(flag: str, text: str, seconds: float) -> None:
    """What inferscale's spec takes as warmup.timeToReady (its top, in a range)."""
    within_spec(flag, text, seconds)
    if seconds > parse_duration(MAX_TIME_TO_READY):
        raise InputError(f"{flag} must be at most {MAX_TIME_TO_READY} (no model load takes an hour), got {text!r}")


def not_blank(flag: str, text: str) -> None:
    if not text.strip():
        raise InputError(f"{flag} must not be empty, got {text!r}")


def http_url(flag: str, text: str) -> None:
    try:
        url = urlsplit(text)
        url.port  # noqa: B018 - raises on a port that is not a number or out of range
    except ValueError:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.hostname:
        raise InputError(
            f"{flag} {text!r} is not an http(s) URL with a host (for example "
            "http://prometheus-operated.monitoring.svc:9090)"
        )


def trace_file(path: Path) -> None:
    """A regular, non-empty file: the loaders read a trace more than once (its first line tells the
    format), which a pipe cannot give, and a FIFO without a writer would block the open forever."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"--trace {path}: no such file") from None
    except OSError as e:
        raise InputError(f"--trace {path}: cannot read it: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"--trace {path}: is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"--trace {path}: is not a regular file (a device, pipe or socket); the trace is read more than "
            "once, so give a file (decompress or copy it first)"
        )
    if st.st_size == 0:
        raise InputError(f"--trace {path}: is empty")


def output_file(flag: str, path: Path) -> None:
    """A file that can be written, checked before a long run rather than after it: its results would be lost.
    A missing folder is refused, not made: a typo in its name would otherwise leave a stray tree behind."""
    folder = path.parent
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a directory; give a file name")
    if path.is_fifo():  # opened with no reader, it blocks the command forever, before any work or message
        raise InputError(f"{flag} {path}: is a named pipe; give a file name")
    if not folder.exists():
        raise InputError(f"{flag} {path}: folder {folder} does not exist")
    if not folder.is_dir():
        raise InputError(f"{flag} {path}: {folder} is not a folder")
    # Opening is the only reliable test: os.access says yes to root where writing fails (/proc, a read-only mount).
    existed = path.exists()
    try:
        with path.open("a" if existed else "x"):
            pass
    except OSError as e:
        raise InputError(f"{flag} {path}: cannot write there: {e.strerror or e}") from None
    if not existed:
        path.unlink(missing_ok=True)


def same_file_key(path: Path) -> tuple[object, ...]:
    """What tells two paths of one file apart from two files: the inode where the file exists (a hard link or a
    bind mount of the trace has another path), else the resolved path."""
    try:
        st = path.stat()
    except OSError:
        return ("path", path.resolve())
    return ("inode", st.st_dev, st.st_ino)


def not_the_trace(flag: str, path: Path, trace: Path) -> None:
    """An output written over the trace would destroy the input (root writes over a read-only file too)."""
    if same_file_key(path) == same_file_key(trace):
        raise InputError(f"{flag} {path} is the trace itself; write the results to another file")


def output_folder(flag: str, path: Path) -> None:
    """A folder the command writes files into (and makes, with its parents, when missing), checked before it
    connects or runs by writing a file into it or into the nearest folder that exists: os.access says yes to root
    where writing fails (/proc, a read-only mount). Nothing is left behind."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "is not a folder" if existing == path else f"{existing} is not a folder"
        raise InputError(f"{flag} {path}: {where}")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise InputError(f"{flag} {path}: cannot write there: {e.strerror or e}") from None


def trace_format(fmt: str | None, known: tuple[str, ...]) -> None:
    if fmt is not None and fmt.lower() not in known:
        raise InputError(f"--format {fmt!r} is not known; known: {', '.join(known)}")


def tensor_parallel(tp: int, model: str | None = None) -> None:
    """At least 1, and a size `model`'s heads split over evenly when the model is one the catalog knows (an
    unknown model is named by the check of --model)."""
    if tp < 1:
        raise InputError(f"--tp must be at least 1, got {tp}")
    if model is None:
        return
    from inferscale.perf import InvalidParallelism, PerfError, model_spec
    from inferscale.perf.memory import check_tp

    try:
        check_tp(model_spec(model), tp)
    except InvalidParallelism as e:
        raise InputError(f"--tp {tp}: {e}") from None
    except PerfError:  # an unknown model: named by the check of --model
        return


def positive_number(flag: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{flag} must be a positive number, got {value}")


def fraction(flag: str, value: float) -> None:
    if not (math.isfinite(value) and 0 < value <= 1):
        raise InputError(f"{flag} must be a fraction in (0, 1], got {value}")


def given_once(flag: str, values: Sequence[object]) -> None:
    """A repeatable flag's values, each at most once: a repeat is a slip, not a request to run it twice."""
    repeated = [v for v in dict.fromkeys(values) if values.count(v) > 1]
    if repeated:
        raise InputError(f"{flag} {', '.join(map(str, repeated))} is given more than once")


def seed(value: int) -> None:
    if value < 0:
        raise InputError(f"--seed must be an integer >= 0, got {value}")


def batch_limits(gpu: str, max_num_seqs: int | None, max_num_batched_tokens: int | None) -> None:
    """vLLM's batch flags, checked here so that the message names them; the perf model checks the same."""
    for flag, value in (("--max-num-seqs", max_num_seqs), ("--max-num-batched-tokens", max_num_batched_tokens)):
        if value is not None and value < 1:
            raise InputError(f"{flag} must be a whole number >= 1, got {value}")
    try:
        spec = gpu_spec(gpu)
    except PerfError:
        return  # an unknown GPU: the perf model's message lists the known ones
    default_seqs, default_tokens = vllm_batch_defaults(spec)
    seqs = default_seqs if max_num_seqs is None else max_num_seqs
    tokens = default_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    if tokens < seqs:
        # vLLM refuses this too: a step could not carry one token for every running sequence
        default = f" (vLLM's default on {spec.name})"
        tokens_text = f"--max-num-batched-tokens {tokens}{'' if max_num_batched_tokens is not None else default}"
        seqs_text = f"--max-num-seqs {seqs}{'' if max_num_seqs is not None else default}"
        raise InputError(f"{tokens_text} must be >= {seqs_text}")


KUBECONFIG_MAX_BYTES = 16 << 20  # many clusters with their certificates inline still fit


def credentials(kubeconfig: str | None) -> Credentials:
    """The cluster's credentials as the commands load them, or an InputError of one line naming where
    they were looked for."""
    from inferscale.adapters.kube import SA_TOKEN, Credentials  # the kubernetes package is slow to import
    from inferscale.adapters.prometheus_access import not_a_small_file

    given = [("--kubeconfig", kubeconfig)] if kubeconfig else []
    if not kubeconfig and os.environ.get("KUBECONFIG"):
        given = [("KUBECONFIG", p) for p in os.environ["KUBECONFIG"].split(os.pathsep) if p and os.path.exists(p)]
    for flag, path in given:
        problem = not_a_small_file(flag, path, limit=KUBECONFIG_MAX_BYTES) or _not_a_kubeconfig(flag, path)
        if problem:
            raise InputError(f"cannot load Kubernetes credentials from {problem}")
    if not given and os.environ.get("KUBECONFIG") and not Credentials.in_cluster(None):
        raise InputError(
            f"cannot load Kubernetes credentials from KUBECONFIG {os.environ['KUBECONFIG']}: none of its files exists"
        )
    try:
        return Credentials.load(kubeconfig)
    except Exception as e:  # the kubernetes package raises several unrelated types for a bad kubeconfig
        if Credentials.in_cluster(kubeconfig):
            where = f"the pod's service account ({SA_TOKEN})"
        elif kubeconfig is not None:
            where = f"--kubeconfig {kubeconfig}"
        elif os.environ.get("KUBECONFIG"):
            where = f"KUBECONFIG {os.environ['KUBECONFIG']}"
        else:
            where = f"~/.kube/config (no --kubeconfig, KUBECONFIG or in-cluster {SA_TOKEN})"
        raise InputError(f"cannot load Kubernetes credentials from {where}: {' '.join(str(e).split())}") from None


def _not_a_kubeconfig(flag: str, path: str) -> str | None:
    """What makes a readable file no kubeconfig, said before the loader's own words ("'str' object does not
    support item assignment") would be."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except UnicodeDecodeError:
        return f"{flag} {path}: not UTF-8 text, so not a kubeconfig"
    except yaml.YAMLError as e:
        return f"{flag} {path}: not YAML ({' '.join(str(e).split())[:160]})"
    if not isinstance(doc, dict):
        return f"{flag} {path}: not a kubeconfig (a YAML mapping of clusters, users and contexts)"
    return None


def prometheus_access(
    bearer_token_file: str | None,
    username: str | None,
    password_file: str | None,
    ca_file: str | None,
    headers: list[str],
) -> PrometheusAccess:
    """The credentials, CA and headers for Prometheus, each file read once now so that a wrong path stops
    the operator at start rather than failing every query."""
    from inferscale.adapters.prometheus_access import AccessError, PrometheusAccess, parse_header

    try:
        access = PrometheusAccess(
            bearer_token_file or None,
            username or None,
            password_file or None,
            ca_file or None,
            tuple(parse_header(h) for h in headers),
        )
        access.check()
    except AccessError as e:
        raise InputError(str(e)) from None
    return access


SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def namespace_name(flag: str, text: str) -> None:
    """A DNS-1123 label, as the API server requires: a typo such as 'LLM' would fail every request of every
    tick instead of once at the start."""
    if not _DNS_LABEL.match(text) or len(text) > 63:
        raise InputError(f"{flag} {text!r} is not a namespace name (lowercase letters, digits, '-'; at most 63)")


def object_name(flag: str, text: str) -> None:
    if not _DNS_NAME.match(text) or len(text) > 253:
        raise InputError(f"{flag} {text!r} is not a valid object name (lowercase, digits, '-', '.')")


def lease(enabled: bool, namespace: str | None, name: str) -> LeaseConfig | None:
    """Where the leader Lease lives and who this candidate is; None without --leader-elect."""
    from inferscale.handlers.operator import LeaseConfig

    if not enabled:
        return None
    if not namespace:
        try:
            namespace = Path(SA_NAMESPACE).read_text().strip()
        except OSError:
            raise InputError(
                "--leader-elect needs the Lease's namespace: give --leader-elect-namespace (or POD_NAMESPACE); "
                f"outside a pod there is no {SA_NAMESPACE}"
            ) from None
    namespace_name("--leader-elect-namespace", namespace)
    object_name("--leader-elect-lease", name)
    return LeaseConfig(namespace, name, f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}")
