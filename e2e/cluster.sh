#!/usr/bin/env bash
# The local stack inferscale is proven on: etcd, kube-apiserver (secure port, RBAC, service
# accounts), kube-controller-manager, kube-scheduler and kwok on 127.0.0.1, fake GPU nodes, and
# Prometheus scraping whatever registers in .e2e/prometheus/targets/.
#
#   e2e/cluster.sh up      start, or reuse a healthy running stack
#   e2e/cluster.sh down    stop exactly the processes this script started (by pid)
#   e2e/cluster.sh status  print what runs
#
# Writes .e2e/kubeconfig and .e2e/env (source it: KUBECONFIG and the built binaries on PATH).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
E2E=${E2E_DIR:-$REPO/.e2e}
PIDS=$E2E/pids
LOGS=$E2E/logs
PKI=$E2E/pki
KC=$E2E/kubeconfig
API_PORT=${E2E_API_PORT:-6443}
PROM_PORT=${E2E_PROMETHEUS_PORT:-9090}
GPU_NODES=${E2E_GPU_NODES:-4}
GPUS_PER_NODE=${E2E_GPUS_PER_NODE:-8}
GPU_PRODUCT=${E2E_GPU_PRODUCT:-NVIDIA-H100-80GB-HBM3}
COMPONENTS=(kwok kube-scheduler kube-controller-manager kube-apiserver etcd prometheus)

say() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }

alive() { [ -s "$PIDS/$1.pid" ] && kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null; }

# Poll with a deadline: wait_for SECONDS DESCRIPTION COMMAND...
wait_for() {
  local deadline=$(( $(date +%s) + $1 )) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "timed out waiting for $what (logs: $LOGS)"
    fi
    sleep 0.5
  done
}

start() {  # start NAME COMMAND... : background process, pid recorded, output to its log
  local name=$1; shift
  "$@" >"$LOGS/$name.log" 2>&1 &
  echo $! >"$PIDS/$name.pid"
}

kubectl_() { "$E2E_BIN/kubectl" --kubeconfig="$KC" "$@"; }

tools() {
  local out
  out=$(bash "$REPO/e2e/build-tools.sh") || die "building the control plane failed (see above)"
  E2E_BIN=$(printf '%s\n' "$out" | sed -n 's/^E2E_BIN=//p' | tail -n 1)
  [ -x "$E2E_BIN/kube-apiserver" ] || die "build-tools.sh did not report E2E_BIN"
  KWOK_DIR=$(cat "$(dirname "$E2E_BIN")/kwok-src-dir")
  command -v prometheus >/dev/null || die "prometheus is not installed: run 'make setup' (installs Debian's prometheus)"
}

pki() {
  [ -s "$PKI/sa.pub" ] && return 0
  mkdir -p "$PKI"
  (
    cd "$PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=inferscale-e2e-ca" -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n' >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out apiserver.crt -extfile apiserver.ext 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=inferscale-e2e-admin" -keyout admin.key -out admin.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out admin.crt -extfile admin.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || die "creating certificates with openssl failed"
}

kubeconfig() {
  rm -f "$KC"
  kubectl_ config set-cluster e2e --server="https://127.0.0.1:$API_PORT" --certificate-authority="$PKI/ca.crt" --embed-certs=true >/dev/null
  kubectl_ config set-credentials admin --client-certificate="$PKI/admin.crt" --client-key="$PKI/admin.key" --embed-certs=true >/dev/null
  kubectl_ config set-context e2e --cluster=e2e --user=admin >/dev/null
  kubectl_ config use-context e2e >/dev/null
  cat >"$E2E/env" <<EOF
# source this file: the local cluster's kubeconfig and the binaries built for it
export KUBECONFIG="$KC"
export E2E_BIN="$E2E_BIN"
export PATH="$E2E_BIN:\$PATH"
export PROMETHEUS_URL="http://127.0.0.1:$PROM_PORT"
export E2E_PROMETHEUS_TARGETS="$E2E/prometheus/targets"
EOF
}

start_etcd() {
  rm -rf "$E2E/etcd"
  start etcd "$E2E_BIN/etcd" --name=e2e --data-dir="$E2E/etcd" \
    --listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
    --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --initial-cluster=e2e=http://127.0.0.1:2380 --unsafe-no-fsync --auto-compaction-retention=1 \
    --quota-backend-bytes=8589934592 --watch-progress-notify-interval=5s --log-level=warn
  wait_for 30 "etcd health" curl -fsS http://127.0.0.1:2379/health
}

start_apiserver() {
  start kube-apiserver "$E2E_BIN/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 \
    --authorization-mode=Node,RBAC --allow-privileged=true --endpoint-reconciler-type=none
  wait_for 90 "kube-apiserver /readyz" kubectl_ get --raw=/readyz
}

start_controllers() {
  start kube-controller-manager "$E2E_BIN/kube-controller-manager" --kubeconfig="$KC" \
    --authentication-kubeconfig="$KC" --authorization-kubeconfig="$KC" \
    --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
    --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" \
    --use-service-account-credentials=true --controllers='*,-nodeipam' \
    --node-monitor-grace-period=60s
  start kube-scheduler "$E2E_BIN/kube-scheduler" --kubeconfig="$KC" \
    --authentication-kubeconfig="$KC" --authorization-kubeconfig="$KC" \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false
  "$REPO/.venv/bin/python" "$REPO/e2e/make_stages.py" "$KWOK_DIR" "$E2E/kwok-stages.yaml" \
    || die "writing kwok stages failed (is the venv set up? run 'make setup')"
  # Pod IPs from a loopback range: an engine's stand-in can listen at its pod's own IP (all of 127.0.0.0/8 is
  # this machine's), where an operator reading the pods' /metrics directly (spec.metrics.podPort) finds it.
  start kwok "$E2E_BIN/kwok" --kubeconfig="$KC" --config="$E2E/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 --cidr=127.244.0.0/16 --node-ip=10.244.0.1 \
    --server-address=127.0.0.1:10247
  wait_for 60 "the default ServiceAccount (kube-controller-manager)" kubectl_ -n default get serviceaccount default
}

gpu_nodes() {
  local i manifest=""
  for ((i = 0; i < GPU_NODES; i++)); do
    manifest+="---
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-$i
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: \"0\"}
  labels:
    type: kwok
    kubernetes.io/hostname: gpu-node-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    nvidia.com/gpu.product: $GPU_PRODUCT
    nvidia.com/gpu.count: \"$GPUS_PER_NODE\"
spec:
  providerID: kwok://gpu-node-$i
status:
  capacity: {cpu: \"96\", memory: 1Ti, pods: \"110\", ephemeral-storage: 10Ti, nvidia.com/gpu: \"$GPUS_PER_NODE\"}
  allocatable: {cpu: \"96\", memory: 1Ti, pods: \"110\", ephemeral-storage: 10Ti, nvidia.com/gpu: \"$GPUS_PER_NODE\"}
"
  done
  printf '%s' "$manifest" | kubectl_ apply -f - >/dev/null
  kubectl_ wait --for=condition=Ready node --all --timeout=60s >/dev/null || die "the fake GPU nodes did not become Ready"
  # Nodes start tainted not-ready until the node lifecycle controller sees them Ready.
  wait_for 60 "node taints to clear" bash -c "! '$E2E_BIN/kubectl' --kubeconfig='$KC' get nodes -o jsonpath='{.items[*].spec.taints}' | grep -q not-ready"
}

start_prometheus() {
  mkdir -p "$E2E/prometheus/targets" "$E2E/prometheus/data"
  cat >"$E2E/prometheus/prometheus.yml" <<EOF
global:
  scrape_interval: 5s
  evaluation_interval: 5s
scrape_configs:
- job_name: local
  honor_labels: true
  file_sd_configs:
  - files: ["$E2E/prometheus/targets/*.json"]
    refresh_interval: 5s
EOF
  start prometheus prometheus --config.file="$E2E/prometheus/prometheus.yml" \
    --storage.tsdb.path="$E2E/prometheus/data" --web.listen-address="127.0.0.1:$PROM_PORT" \
    --web.enable-lifecycle --storage.tsdb.retention.time=1d
  wait_for 30 "Prometheus /-/ready" curl -fsS "http://127.0.0.1:$PROM_PORT/-/ready"
}

healthy() {
  for c in "${COMPONENTS[@]}"; do alive "$c" || return 1; done
  [ -s "$KC" ] && "$E2E_BIN/kubectl" --kubeconfig="$KC" get --raw=/readyz >/dev/null 2>&1 \
    && curl -fsS "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null 2>&1
}

up() {
  local t0; t0=$(date +%s)
  mkdir -p "$PIDS" "$LOGS"
  tools
  if healthy; then
    say "reusing the running cluster (KUBECONFIG=$KC)"
    return 0
  fi
  down quiet
  mkdir -p "$PIDS" "$LOGS"
  for port in "$API_PORT" 2379 2380 10257 10259 "$PROM_PORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      die "port $port on 127.0.0.1 is in use by a process this script did not start; stop it first"
    fi
  done
  say "starting etcd"; start_etcd
  pki; kubeconfig
  say "starting kube-apiserver"; start_apiserver
  say "starting kube-controller-manager, kube-scheduler, kwok"; start_controllers
  say "creating $GPU_NODES GPU nodes x $GPUS_PER_NODE nvidia.com/gpu"; gpu_nodes
  say "starting Prometheus on 127.0.0.1:$PROM_PORT"; start_prometheus
  say "up in $(( $(date +%s) - t0 ))s: source $E2E/env"
}

down() {
  local c pid
  for c in "${COMPONENTS[@]}"; do
    [ -s "$PIDS/$c.pid" ] || continue
    pid=$(cat "$PIDS/$c.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
      [ "${1:-}" = quiet ] || say "stopped $c (pid $pid)"
    fi
    rm -f "$PIDS/$c.pid"
  done
}

status() {
  local c
  for c in "${COMPONENTS[@]}"; do
    if alive "$c"; then echo "$c: running (pid $(cat "$PIDS/$c.pid"))"; else echo "$c: stopped"; fi
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
