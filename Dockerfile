# inferscale operator image. Build: docker build -t ghcr.io/inferscale/inferscale:0.1.0 .
# Pin the base by digest when you build for production (python:3.11.14-slim-bookworm@sha256:...); the tag is pinned here.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# --- build: a virtualenv with the package and its runtime dependencies at the versions in requirements.lock.
# Every dependency ships manylinux wheels, so this stage needs no compiler either.
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# The build backend, pinned, instead of whatever build isolation would fetch.
RUN pip install --no-cache-dir setuptools==80.9.0 wheel==0.45.1
COPY requirements.lock pyproject.toml README.md ./
COPY operator/ operator/
# -c: runtime dependencies only (the lock also pins test tools), each at its locked version.
RUN pip install --no-cache-dir --no-build-isolation -c requirements.lock . \
    && pip uninstall --yes setuptools wheel \
    && inferscale --help > /dev/null

# --- runtime: the interpreter, the virtualenv, a non-root user. No pip cache, no sources, no build tools.
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="inferscale" \
      org.opencontainers.image.description="SLO-aware autoscaler for LLM inference servers on Kubernetes" \
      org.opencontainers.image.source="https://github.com/inferscale/inferscale" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 65532 inferscale \
    && useradd --system --no-log-init --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin inferscale
COPY --from=build /opt/venv /opt/venv
# The root filesystem is read-only in the cluster: no bytecode writes; scratch files under /tmp (an emptyDir).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib
# Numeric, so the kubelet can verify runAsNonRoot without resolving a name.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["inferscale", "run"]
CMD ["--all-namespaces"]
