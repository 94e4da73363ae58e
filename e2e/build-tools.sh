#!/usr/bin/env bash
# Builds the local control plane from Go modules: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, etcdctl, kwok and helm. No release binaries can be downloaded
# here, only modules from the Go proxy, so every component is compiled. Binaries are cached under
# $HOME/.cache/inferscale-e2e/<versions> and reused when they report the expected version.
# Prints "E2E_BIN=<dir>" as its last line.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
KEY="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}"
ROOT=${E2E_TOOLS_ROOT:-$HOME/.cache/inferscale-e2e}/$KEY
E2E_BIN=$ROOT/bin
WORK=$ROOT/src
export CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local}
mkdir -p "$E2E_BIN" "$WORK"

step() { printf '[build-tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'build-tools: %s\n' "$*" >&2; exit 1; }

# Fetch one module@version; on refusal stop with the module, version and the proxy's own words.
fetch() {
  local out
  if ! out=$(go mod download -json "$1" 2>&1); then
    die "the Go module proxy refused $1: $(printf '%s' "$out" | python3 -c 'import json,sys
t=sys.stdin.read()
try: print(json.loads(t).get("Error", t.strip()))
except Exception: print(t.strip())')"
  fi
  printf '%s' "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); e=d.get('Error'); print(d['$2']) if not e else sys.exit(e)" \
    || die "the Go module proxy refused $1"
}

# go get/build name the missing module in their own error; surface it with ours.
run_go() {
  local log; log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    local missing; missing=$(grep -Eo '[a-zA-Z0-9./_-]+@v[0-9][^: ]*' "$log" | head -n 1 || true)
    cat "$log" >&2
    die "'$*' failed${missing:+ (first module named in the error: $missing)}"
  fi
  rm -f "$log"
}

# Capture first: `grep -q` exiting early would SIGPIPE the binary and fail the pipeline under pipefail.
has_version() {
  local out
  [ -x "$1" ] || return 1
  out=$("$1" "${@:3}" 2>/dev/null) || return 1
  [[ "$out" == *"$2"* ]]
}

build_k8s() {
  local want="Kubernetes $K8S_VERSION"
  if has_version "$E2E_BIN/kube-apiserver" "$want" --version && has_version "$E2E_BIN/kube-controller-manager" "$want" --version \
     && has_version "$E2E_BIN/kube-scheduler" "$want" --version && has_version "$E2E_BIN/kubectl" "$K8S_VERSION" version --client; then
    step "kubernetes $K8S_VERSION: cached"; return 0
  fi
  local d=$WORK/k8s minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local staging="v0.${K8S_VERSION#v1.}"
  mkdir -p "$d"; cd "$d"
  if [ ! -f go.mod ] || ! grep -q "k8s.io/kubernetes $K8S_VERSION" go.mod; then
    rm -f go.mod go.sum
    step "kubernetes $K8S_VERSION: resolving modules (staging modules at $staging)"
    go mod init e2e.invalid/k8s-tools >/dev/null 2>&1
    local kmod; kmod=$(fetch "k8s.io/kubernetes@$K8S_VERSION" GoMod)
    # Staging modules are required at v0.0.0 with ./staging replaces that do not apply to a
    # dependency; pin each to its published tag of the same release, and keep k8s's godebug.
    python3 - "$kmod" "$staging" <<'PY' | xargs -r go mod edit
import re, sys
path, ver = sys.argv[1], sys.argv[2]
txt = open(path).read()
out = []
for m in re.finditer(r'^\s*(?:replace\s+)?(k8s\.io/[\w.\-]+)\s+=>\s+\./staging/', txt, re.M):
    out.append(f"-replace={m.group(1)}={m.group(1)}@{ver}")
for m in re.finditer(r'^godebug\s+([\w.\-]+=[\w.\-]+)', txt, re.M):
    out.append(f"-godebug={m.group(1)}")
for blk in re.findall(r'^godebug\s*\((.*?)^\)', txt, re.M | re.S):
    for line in blk.splitlines():
        line = line.split('//')[0].strip()
        if line:
            out.append(f"-godebug={line}")
print("\n".join(out))
PY
    run_go go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
      "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
      "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" \
      "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION"
  fi
  local ld="-s -w" now; now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  # The same variables hack/lib/version.sh sets: without them binaries report v0.0.0-master.
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.gitTreeState=clean -X $p.buildDate=$now"
  done
  step "kubernetes $K8S_VERSION: compiling kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (from an empty Go build cache: about 5 minutes on 2 cores)"
  run_go go build -mod=mod -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$ld" -o "$E2E_BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  has_version "$E2E_BIN/kube-apiserver" "$want" --version || die "kube-apiserver does not report $want"
  step "kubernetes: $("$E2E_BIN/kube-apiserver" --version)"
}

build_etcd() {
  if has_version "$E2E_BIN/etcd" "${ETCD_VERSION#v}" --version && [ -x "$E2E_BIN/etcdctl" ]; then
    step "etcd $ETCD_VERSION: cached"; return 0
  fi
  local d=$WORK/etcd; mkdir -p "$d"; cd "$d"
  if [ ! -f go.mod ] || ! grep -q "go.etcd.io/etcd/server/v3 $ETCD_VERSION" go.mod; then
    rm -f go.mod go.sum
    step "etcd $ETCD_VERSION: resolving modules"
    go mod init e2e.invalid/etcd-tools >/dev/null 2>&1
    fetch "go.etcd.io/etcd/server/v3@$ETCD_VERSION" Version >/dev/null
    run_go go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "go.etcd.io/etcd/etcdctl/v3@$ETCD_VERSION"
  fi
  step "etcd $ETCD_VERSION: compiling etcd, etcdctl"
  run_go go build -mod=mod -trimpath -ldflags="-s -w" -o "$E2E_BIN/etcd" go.etcd.io/etcd/server/v3
  run_go go build -mod=mod -trimpath -ldflags="-s -w" -o "$E2E_BIN/etcdctl" go.etcd.io/etcd/etcdctl/v3
  has_version "$E2E_BIN/etcd" "${ETCD_VERSION#v}" --version || die "etcd does not report $ETCD_VERSION"
}

build_kwok() {
  if has_version "$E2E_BIN/kwok" "$KWOK_VERSION" --version && [ -s "$ROOT/kwok-src-dir" ]; then
    step "kwok $KWOK_VERSION: cached"; return 0
  fi
  step "kwok $KWOK_VERSION: compiling"
  fetch "sigs.k8s.io/kwok@$KWOK_VERSION" Dir > "$ROOT/kwok-src-dir.tmp"
  (cd "$WORK" && GOBIN="$E2E_BIN" run_go go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
  mv "$ROOT/kwok-src-dir.tmp" "$ROOT/kwok-src-dir"
}

# Helm's release build sets the Kubernetes version that `helm template` and `helm lint` assume without a
# cluster from its client-go (v0.N -> 1.N, helm's Makefile); a plain `go install` leaves 1.20, which
# refuses the chart's kubeVersion (>= 1.30). The marker says this binary was built so.
build_helm() {
  if has_version "$E2E_BIN/helm" "$HELM_VERSION" version --short && [ -s "$ROOT/helm-kube-version" ]; then
    step "helm $HELM_VERSION: cached"; return 0
  fi
  step "helm $HELM_VERSION: compiling"
  local dir client_go minor flags
  dir=$(fetch "helm.sh/helm/v3@$HELM_VERSION" Dir)
  client_go=$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$dir/go.mod")
  minor=${client_go#v0.}; minor=${minor%%.*}
  [[ "$minor" =~ ^[0-9]+$ ]] || die "cannot read k8s.io/client-go's version from $dir/go.mod (got '$client_go')"
  flags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in pkg/chartutil pkg/lint/rules; do
    flags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$minor"
  done
  (cd "$WORK" && GOBIN="$E2E_BIN" run_go go install -trimpath -ldflags "$flags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
  has_version "$E2E_BIN/helm" "$HELM_VERSION" version --short || die "helm does not report $HELM_VERSION"
  echo "1.$minor" > "$ROOT/helm-kube-version"
}

command -v go >/dev/null || die "go is not on PATH (Go >= 1.26 is needed to build the control plane)"
start=$(date +%s)
build_etcd
build_kwok
build_helm
build_k8s
step "done in $(( $(date +%s) - start ))s"
echo "E2E_BIN=$E2E_BIN"
