#!/usr/bin/env bash
# The local test environment: a real control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) plus kwok fake nodes, a moto
# server as the AWS API emulator, and real PostgreSQL and Redis servers
# (from the system's packages) for connection checks, all on 127.0.0.1.
#
#   testenv.sh build   build/install every tool into the cache (idempotent)
#   testenv.sh up      build if needed, start everything, write env.sh
#   testenv.sh down    stop exactly the processes `up` started
#   testenv.sh status  exit 0 when the environment is up and healthy
#   testenv.sh restart apiserver|etcd  restart one process under its clients
#   testenv.sh compact  compact etcd's history up to its current revision
#   testenv.sh backup|restore [--bump]  snapshot etcd / restore the snapshot
#   testenv.sh load-image ARCHIVE  load an image archive into the real node
#
# Binaries are built from published Go modules and cached by version in
# $CRO_TESTENV_CACHE (default ~/.cache/cro-testenv), outside the repository,
# so a second machine-local run reuses them. Runtime state lives in
# target/testenv/ of the repository.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

cache=${CRO_TESTENV_CACHE:-$HOME/.cache/cro-testenv}
state=${CRO_TESTENV_STATE:-$repo/target/testenv}
k8s_bin=$cache/kubernetes-$K8S_VERSION/bin
etcd_bin=$cache/etcd-$ETCD_VERSION/bin
kwok_bin=$cache/kwok-$KWOK_VERSION/bin
helm_bin=$cache/helm-$HELM_VERSION/bin
promtool_bin=$cache/prometheus-$PROMETHEUS_VERSION/bin
coredns_bin=$cache/coredns-$COREDNS_VERSION/bin
operator_verify_bin=$cache/operator-framework-api-$OPERATOR_FRAMEWORK_API_VERSION/bin
olm_crds=$cache/operator-framework-api-$OPERATOR_FRAMEWORK_API_VERSION/crds
cco_crds=$cache/cloud-credential-operator-$CLOUD_CREDENTIAL_OPERATOR_VERSION/manifests
moto_venv=$cache/moto-$MOTO_VERSION-cbor2-$CBOR2_VERSION
gcp_discovery=$cache/gcp-discovery-$GOOGLE_API_PYTHON_CLIENT_VERSION
audit_venv=$cache/policy-audit-parliament-$PARLIAMENT_VERSION-cloudsplaining-$CLOUDSPLAINING_VERSION
aws_region=${AWS_REGION_TESTENV:-eu-west-1}
# Addresses handed to things that do not exist: kwok's fake pods and node
# (from the benchmarking range, RFC 2544, which no network here uses) and
# Service ClusterIPs. Nothing may dial them off this machine: `up` makes
# the fake range unreachable and rejects ClusterIPs kube-proxy did not
# translate (fake_network_up).
fake_cidr=198.19.0.0/16
kwok_pod_cidr=198.19.0.1/17
kwok_node_ip=198.19.255.1
service_cidr=10.96.0.0/16
admin_token_file=$state/admin.token

log() { printf 'testenv: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=real-node/node.sh
. "$here/real-node/node.sh"

# ---------------------------------------------------------------- build ----

# go_build NAME OUTDIR GO_MOD_BODY LDFLAGS PKG...
# Builds PKGs inside a throw-away wrapper module and moves the binaries into
# OUTDIR only when all of them built, so a broken build never looks cached.
go_build() {
  local name=$1 out=$2 gomod=$3 ldflags=$4; shift 4
  local work; work=$(mktemp -d "$cache/.build-$name.XXXXXX")
  printf '%s\n' "$gomod" >"$work/go.mod"
  {
    echo '//go:build tools'
    echo 'package tools'
    echo 'import ('
    local p; for p in "$@"; do echo "	_ \"$p\""; done
    echo ')'
  } >"$work/tools.go"
  log "building $name ($*) — first time only, a few minutes on 2 cores"
  (
    cd "$work"
    export GOFLAGS=-mod=mod CGO_ENABLED=0
    go mod tidy >"$work/tidy.log" 2>&1 || { cat "$work/tidy.log" >&2; exit 1; }
    mkdir -p "$work/bin"
    go build -trimpath -ldflags "-s -w $ldflags" -o "$work/bin/" "$@"
  ) || die "building $name failed (work dir kept: $work)"
  mkdir -p "$(dirname "$out")"
  rm -rf "$out.tmp" && mv "$work/bin" "$out.tmp" && rm -rf "$out" && mv "$out.tmp" "$out"
  rm -rf "$work"
}

build_kubernetes() {
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
    [ -x "$k8s_bin/$b" ] || break
  done
  [ -x "$k8s_bin/$b" ] && return 0
  command -v go >/dev/null || die "go is required to build the test binaries"
  # k8s.io/kubernetes points its staging modules at ./staging; a dependent
  # module must map each one to its published v0.X.Y instead.
  local staging=v0${K8S_VERSION#v1}
  local modfile
  modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  [ -f "$modfile" ] || die "could not download k8s.io/kubernetes@$K8S_VERSION from the Go module proxy"
  local replaces
  replaces=$(sed -n "s#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 $staging#p" "$modfile")
  [ -n "$replaces" ] || die "no staging replace lines found in $modfile"
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local vpkg ldflags=""
  for vpkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor"
    ldflags+=" -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
  done
  go_build kubernetes "$k8s_bin" "module cro.local/testenv/kubernetes

go 1.25.0

require k8s.io/kubernetes $K8S_VERSION

replace (
$replaces
)" "$ldflags" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy
}

# Cluster DNS for the real node: Service names resolve in its pods (and in
# the operator's view of the cluster in the real_node suite).
build_coredns() {
  [ -x "$coredns_bin/coredns" ] && return 0
  go_build coredns "$coredns_bin" "module cro.local/testenv/coredns

go 1.25.0

require github.com/coredns/coredns $COREDNS_VERSION" "" github.com/coredns/coredns
}

# etcd, and etcdutl for `restore` (a data directory from a snapshot).
build_etcd() {
  [ -x "$etcd_bin/etcd" ] && [ -x "$etcd_bin/etcdutl" ] && return 0
  go_build etcd "$etcd_bin" "module cro.local/testenv/etcd

go 1.24

require (
	go.etcd.io/etcd/server/v3 $ETCD_VERSION
	go.etcd.io/etcd/etcdutl/v3 $ETCD_VERSION
)" "" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdutl/v3
  # Go names a /v3 module's binary after the element before the suffix.
  mv "$etcd_bin/server" "$etcd_bin/etcd"
}

build_kwok() {
  [ -x "$kwok_bin/kwok" ] && return 0
  go_build kwok "$kwok_bin" "module cro.local/testenv/kwok

go 1.24.0

require sigs.k8s.io/kwok $KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok
}

# helm only renders deploy/helm in the tests (`helm template`).
build_helm() {
  [ -x "$helm_bin/helm" ] && return 0
  local minor=${HELM_VERSION#v3.}; minor=${minor%%.*}
  go_build helm "$helm_bin" "module cro.local/testenv/helm

go 1.25.0

require helm.sh/helm/v3 $HELM_VERSION" "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" helm.sh/helm/v3/cmd/helm
}

# promtool checks and unit-tests the shipped alert rules.
build_promtool() {
  [ -x "$promtool_bin/promtool" ] && return 0
  go_build promtool "$promtool_bin" "module cro.local/testenv/prometheus

go 1.25.0

require github.com/prometheus/prometheus $PROMETHEUS_VERSION" "" github.com/prometheus/prometheus/cmd/promtool
}

# operator-verify validates the OLM bundle (bundle/) in the tests.
build_operator_verify() {
  [ -x "$operator_verify_bin/operator-verify" ] && return 0
  go_build operator-verify "$operator_verify_bin" "module cro.local/testenv/operator-verify

go 1.25.0

require github.com/operator-framework/api $OPERATOR_FRAMEWORK_API_VERSION" "" github.com/operator-framework/api/cmd/operator-verify
}

# copy_module_files MODULE VERSION DEST FILE...: FILE (a path inside the Go
# module MODULE at VERSION, from the module proxy) copied to DEST, once.
copy_module_files() {
  local module=$1 version=$2 dest=$3 dir
  shift 3
  [ -f "$dest/.complete" ] && return 0
  dir=$(cd "$cache" && GOFLAGS=-mod=mod go mod download -json "$module@$version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])') || die "downloading $module $version failed"
  mkdir -p "$dest"
  local file
  for file in "$@"; do
    cp -f "$dir/$file" "$dest/" || die "$file is not in $module $version"
  done
  touch "$dest/.complete"
}

# OLM's own CRDs for ClusterServiceVersions and Subscriptions, as the same
# module publishes them: the leader test installs the Go operator as OLM
# would, under OLM's real schema.
copy_olm_crds() {
  copy_module_files github.com/operator-framework/api "$OPERATOR_FRAMEWORK_API_VERSION" "$olm_crds" \
    crds/operators.coreos.com_clusterserviceversions.yaml crds/operators.coreos.com_subscriptions.yaml
}

# The Cloud Credential Operator's CredentialsRequest CRD, as its module
# publishes it: the migration tests ask CCO for a bucket's key under its
# real schema (a test stands in for CCO itself).
copy_cco_crd() {
  copy_module_files github.com/openshift/cloud-credential-operator "$CLOUD_CREDENTIAL_OPERATOR_VERSION" "$cco_crds" \
    manifests/0000_03_cloud-credential-operator_01_crd.yaml
}

# build_venv DIR WHAT REQUIREMENT...: a venv of pinned PyPI packages. A
# venv cannot be moved, so it is built in place and marked complete last.
build_venv() {
  local venv=$1 what=$2
  shift 2
  [ -f "$venv/.complete" ] && return 0
  log "installing $what from PyPI"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" || die "pip install $* failed"
  touch "$venv/.complete"
}

build_moto() {
  build_venv "$moto_venv" "moto $MOTO_VERSION" "moto[server]==$MOTO_VERSION" "cbor2==$CBOR2_VERSION"
}

# Google's discovery documents of the APIs the GCP provider calls, as
# google-api-python-client's wheel on PyPI ships them: the GCP crate's tests
# hold every request body to them (providers/gcp/src/discovery.rs), and the
# Cloud SQL double (gcp_server.py) every request and answer.
fetch_gcp_discovery() {
  [ -f "$gcp_discovery/.complete" ] && return 0
  log "fetching Google's discovery documents (google-api-python-client $GOOGLE_API_PYTHON_CLIENT_VERSION) from PyPI"
  local work; work=$(mktemp -d "$cache/.gcp-discovery.XXXXXX")
  # moto's venv has pip (build_moto ran first); the system's python3 may not.
  "$moto_venv/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$work" \
    "google-api-python-client==$GOOGLE_API_PYTHON_CLIENT_VERSION" || die "downloading google-api-python-client failed"
  python3 - "$work/docs" "$work"/google_api_python_client-*.whl <<'PY' || die "google-api-python-client $GOOGLE_API_PYTHON_CLIENT_VERSION lacks a discovery document"
import os, sys, zipfile
out, wheel = sys.argv[1], zipfile.ZipFile(sys.argv[2])
os.makedirs(out)
for api in ("sqladmin.v1beta4", "redis.v1", "servicenetworking.v1", "compute.v1", "storage.v1"):
    with open(os.path.join(out, api + ".json"), "wb") as f:
        f.write(wheel.read("googleapiclient/discovery_cache/documents/" + api + ".json"))
PY
  rm -rf "$gcp_discovery" && mv "$work/docs" "$gcp_discovery" && rm -rf "$work"
  touch "$gcp_discovery/.complete"
}

build_policy_auditors() {
  build_venv "$audit_venv" "parliament $PARLIAMENT_VERSION and cloudsplaining $CLOUDSPLAINING_VERSION" \
    "parliament==$PARLIAMENT_VERSION" "cloudsplaining==$CLOUDSPLAINING_VERSION"
}

# What is built: everything, or with CRO_TESTENV_FOR=run (`make run`) only
# what running the operator needs; the tests' own tools (helm, promtool,
# the bundle validator) are built when a later `up` is for the tests.
cmd_build() {
  mkdir -p "$cache"
  # One build at a time per cache (a second caller waits, then finds it done).
  exec 9>"$cache/.lock"
  flock 9
  # Go's module and build caches for these builds only: gigabytes that no
  # later run reads (the binaries are kept), removed once all is built.
  export GOMODCACHE="$cache/.go/mod" GOCACHE="$cache/.go/build"
  build_etcd
  build_kwok
  build_kubernetes
  build_coredns
  build_moto
  fetch_gcp_discovery
  [ -n "$(real_node_unsupported)" ] || build_real_node_images
  build_test_tools
  if [ -d "$cache/.go" ]; then
    go clean -modcache >/dev/null 2>&1 || true
    chmod -R u+w "$cache/.go" 2>/dev/null || true
    rm -rf "$cache/.go"
  fi
  flock -u 9
}

build_test_tools() {
  [ "${CRO_TESTENV_FOR:-test}" = run ] && return 0
  build_helm
  build_promtool
  build_operator_verify
  copy_olm_crds
  copy_cco_crd
  build_policy_auditors
}

# ---------------------------------------------------------------- up -------

# A free port below the kernel's ephemeral range: `restart` reuses a port
# after its process stops, and an ephemeral port could meanwhile be taken
# by any outgoing connection (the apiserver redialling etcd took etcd's
# peer port once).
free_port() {
  python3 - <<'PY'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    port = random.randrange(10000, low)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("no free port below the ephemeral range")
PY
}

# start NAME BINARY ARGS...: a detached process whose pid is recorded.
start() {
  local name=$1; shift
  setsid "$@" >"$state/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$state/pids/$name.pid"
}

# wait_for DESCRIPTION SECONDS COMMAND...
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${secs}s waiting for $what; last log lines:"
      tail -n 30 "$state"/logs/*.log >&2 || true
      cmd_down
      exit 1
    fi
    sleep 0.2
  done
}

kctl() { "$k8s_bin/kubectl" --kubeconfig "$state/kubeconfig" "$@"; }

make_certs() {
  local d=$state/pki
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=cro-testenv-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$d/apiserver.key" -out "$d/apiserver.csr" 2>/dev/null
  # Pods reach it as the `kubernetes` Service (its first ClusterIP) and
  # through the real node's bridge (see real_node_api).
  printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,IP:10.244.0.1,DNS:localhost,DNS:kubernetes.default.svc,DNS:kubernetes.default\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$d/ext.cnf"
  openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 3650 -extfile "$d/ext.cnf" -out "$d/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
}

write_kubeconfig() {
  local port=$1 token=$2
  cat >"$state/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cro-testenv
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(base64 -w0 <"$state/pki/ca.crt")
users:
- name: admin
  user:
    token: $token
contexts:
- name: cro-testenv
  context: {cluster: cro-testenv, user: admin}
current-context: cro-testenv
EOF
  chmod 600 "$state/kubeconfig"
}

write_env() {
  local moto_port=$1 gcp_port=$2
  cat >"$state/env.sh" <<EOF
# Generated by tests/testenv/testenv.sh up; source it to use the environment.
export KUBECONFIG='$state/kubeconfig'
export PATH='$k8s_bin':"\$PATH"
export AWS_ENDPOINT_URL='http://127.0.0.1:$moto_port'
export CRO_TESTENV_GCP_ENDPOINT='http://127.0.0.1:$gcp_port/'
export CRO_TESTENV_GCP_FAULTS='$state/gcp-faults.json'
export CRO_TESTENV_GCP_CREDENTIALS='$state/gcp-service-account.json'
export AWS_REGION='$aws_region'
export AWS_DEFAULT_REGION='$aws_region'
export AWS_ACCESS_KEY_ID='testing'
export AWS_SECRET_ACCESS_KEY='testing'
# The SDKs' last resort for credentials and region is the instance metadata
# service (169.254.169.254), off this machine: never asked in the tests.
export AWS_EC2_METADATA_DISABLED=true
export CRO_TESTENV_KWOK_NODE='kwok-node-0'
export CRO_TESTENV_FAKE_CIDR='$fake_cidr'
export CRO_TESTENV_SERVICE_CIDR='$service_cidr'
export CRO_TESTENV_HELM='$helm_bin/helm'
export CRO_TESTENV_PROMTOOL='$promtool_bin/promtool'
export CRO_TESTENV_OPERATOR_VERIFY='$operator_verify_bin/operator-verify'
export CRO_TESTENV_OLM_CRDS='$olm_crds'
export CRO_TESTENV_CCO_CRDS='$cco_crds'
export CRO_TESTENV_GCP_DISCOVERY='$gcp_discovery'
export CRO_TESTENV_POLICY_AUDIT='$audit_venv/bin'
export CRO_TESTENV_KUBECTL='$k8s_bin/kubectl'
export CRO_TESTENV_AUDIT_LOG='$state/logs/audit.log'
export CRO_TESTENV_MOTO_REQUEST_LOG='$state/logs/moto-requests.jsonl'
export CRO_TESTENV_MOTO_FAULTS='$state/moto-faults.json'
export CRO_TESTENV_MOTO_MAINTENANCE='$state/moto-maintenance.json'
EOF
  # shellcheck disable=SC1091
  . "$state/databases.env"
  cat >>"$state/env.sh" <<EOF
export CRO_TESTENV_POSTGRES='127.0.0.1:$pg_port'
export CRO_TESTENV_REDIS='127.0.0.1:$redis_port'
export CRO_TESTENV_REDIS_AUTH='127.0.0.1:$redis_auth_port'
export CRO_TESTENV_REDIS_TLS='127.0.0.1:$redis_tls_port'
export CRO_TESTENV_DB_PASSWORD='$db_password'
export CRO_TESTENV_CA='$state/pki/ca.crt'
export CRO_TESTENV_TRUST='$state/pki/trust.pem'
EOF
  # What the operators the tests start trust (their SSL_CERT_FILE): the
  # system's CAs and the environment's.
  cat /etc/ssl/certs/ca-certificates.crt "$state/pki/ca.crt" >"$state/pki/trust.pem" 2>/dev/null ||
    cp "$state/pki/ca.crt" "$state/pki/trust.pem"
  if [ -f "$state/real-node.unsupported" ]; then
    echo "export CRO_TESTENV_NO_REAL_NODE='$(cat "$state/real-node.unsupported")'" >>"$state/env.sh"
  else
    echo "export CRO_TESTENV_REAL_NODE='$real_node_name'" >>"$state/env.sh"
    echo "export CRO_TESTENV_IN_CLUSTER_DNS='$(real_node_dir)/in-cluster-dns.sh'" >>"$state/env.sh"
    echo "export CRO_TESTENV_POD_AWS_ENDPOINT='http://$real_node_gateway:$moto_port'" >>"$state/env.sh"
  fi
}

# ------------------------------------------------------- fake network ----

# Nothing sent to the fake range or the Service range leaves: an iptables
# chain rejects it at once ("No route to host") on its way out of this host
# or through it (pods of the real node), after kube-proxy's translation,
# so what it did not translate to a real pod (no Service, no endpoints
# yet, no kube-proxy) is refused too. The fake range is routed to nothing
# outside either: `unreachable` while there is no real node; on the real
# node's bridge once there is (fake_network_on_bridge), because kube-proxy
# translates a ClusterIP to a kwok pod's address after the route lookup,
# and an unreachable route there drops the packet silently (a connect then
# hangs until its timeout) before the chain can refuse it. Only these
# rules are touched; `down` removes exactly them.
fake_chain=CRO-TESTENV-FAKE
fake_network_up() {
  [ "$(id -u)" = 0 ] || die "not root: the environment must make kwok's fake pod range $fake_cidr unreachable (ip route), or connection checks of databases on kwok nodes leave this machine"
  local taken
  taken=$(python3 - "$fake_cidr" "$service_cidr" <<'PY'
import ipaddress, subprocess, sys
fake = [ipaddress.ip_network(c) for c in sys.argv[1:]]
lines = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout.splitlines()
lines += subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout.splitlines()
for line in lines:
    for word in line.split():
        try:
            net = ipaddress.ip_network(word, strict=False)
        except ValueError:
            continue
        # Left by an earlier `up` of ours (its bridge route, or unreachable).
        ours = any(line.split()[:2] == ["unreachable", c] or line.startswith(f"{c} dev cro0 ") for c in sys.argv[1:])
        if net.prefixlen and any(net.overlaps(f) for f in fake) and not ours:
            print(line)
PY
  )
  [ -z "$taken" ] || die "this machine already routes or holds addresses in the test environment's fake ranges ($fake_cidr, $service_cidr): $taken"
  ip route replace unreachable "$fake_cidr"
  if command -v iptables >/dev/null; then
    iptables -N "$fake_chain" 2>/dev/null || iptables -F "$fake_chain"
    iptables -A "$fake_chain" -d "$service_cidr" -j REJECT --reject-with icmp-host-unreachable
    iptables -A "$fake_chain" -d "$fake_cidr" -j REJECT --reject-with icmp-host-unreachable
    local hook
    for hook in OUTPUT FORWARD; do
      iptables -C "$hook" -j "$fake_chain" 2>/dev/null || iptables -I "$hook" 1 -j "$fake_chain"
    done
  else
    # No iptables, so no kube-proxy either: the Service range is fake too.
    ip route replace unreachable "$service_cidr"
  fi
}

fake_network_down() {
  ip route del "$fake_cidr" 2>/dev/null || true
  ip route del unreachable "$service_cidr" 2>/dev/null || true
  command -v iptables >/dev/null || return 0
  local hook
  for hook in OUTPUT FORWARD; do
    while iptables -D "$hook" -j "$fake_chain" 2>/dev/null; do :; done
  done
  iptables -F "$fake_chain" 2>/dev/null || true
  iptables -X "$fake_chain" 2>/dev/null || true
}

# Once the real node's bridge is up (see above).
fake_network_on_bridge() {
  ip route replace "$fake_cidr" dev "$1"
}

fake_network_alive() {
  ip route show "$fake_cidr" | grep -q "^unreachable\|dev $real_node_bridge" &&
    { ! command -v iptables >/dev/null || iptables -C OUTPUT -j "$fake_chain" 2>/dev/null; }
}

pid_alive() { [ -f "$state/pids/$1.pid" ] && kill -0 "$(cat "$state/pids/$1.pid")" 2>/dev/null; }

cmd_status() {
  local p
  for p in etcd kube-apiserver kube-controller-manager kube-scheduler kwok moto gcp postgres redis redis-auth redis-tls; do
    pid_alive "$p" || return 1
  done
  real_node_alive || return 1
  fake_network_alive || return 1
  [ -f "$state/env.sh" ] && kctl get --raw /readyz >/dev/null 2>&1
}

# start_etcd CLIENT_PORT PEER_PORT and start_apiserver ETCD_PORT API_PORT:
# as `up` and `restart` start them (same flags, ports, data, certificates).
start_etcd() {
  local etcd_port=$1 etcd_peer=$2
  start etcd "$etcd_bin/etcd" --name testenv --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "testenv=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync --log-level warn
}

start_apiserver() {
  local etcd_port=$1 api_port=$2
  start kube-apiserver "$k8s_bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --tls-cert-file "$state/pki/apiserver.crt" --tls-private-key-file "$state/pki/apiserver.key" \
    --client-ca-file "$state/pki/ca.crt" \
    --token-auth-file "$state/pki/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$state/pki/sa.pub" \
    --service-account-signing-key-file "$state/pki/sa.key" \
    --service-cluster-ip-range "$service_cidr" --endpoint-reconciler-type none \
    --allow-privileged --profiling=false \
    --enable-admission-plugins PodNodeSelector,PodTolerationRestriction,OwnerReferencesPermissionEnforcement \
    --kubelet-preferred-address-types InternalIP \
    --audit-policy-file "$state/audit-policy.yaml" --audit-log-path "$state/logs/audit.log" \
    --audit-log-format json --audit-log-maxsize 200
}

# Stops one process `up` started (SIGTERM, then SIGKILL), by its pid file
# and only while its command line is still the binary we started.
# stop_one NAME [MARKER] [kill]: MARKER (default: the cache directory) must
# be in the process's command line; `kill` skips SIGTERM (a crash).
stop_one() {
  local f=$state/pids/$1.pid pid marker=${2:-$cache} how=${3:-term}
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$marker"; then
    if [ "$how" != kill ]; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    # SIGKILL is delivered asynchronously: wait until the process (and
    # with it its listening sockets) is gone, or `restart` cannot bind.
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$f"
}

# restart apiserver|etcd [--kill]: stops that process (with --kill by
# SIGKILL alone, as a crash or an OOM kill) and starts it again on the same
# port and data; its clients see dropped connections and watches. Tests
# use it to prove the operator survives API-server faults.
cmd_restart() {
  [ -f "$state/ports.env" ] || die "not up"
  local etcd_port etcd_peer api_port moto_port how=term
  # shellcheck disable=SC1091
  . "$state/ports.env"
  case ${2:-} in
    "") ;;
    --kill) how=kill ;;
    *) die "usage: $0 restart apiserver|etcd [--kill]" ;;
  esac
  case ${1:-} in
    apiserver)
      stop_one kube-apiserver "$cache" "$how"
      start_apiserver "$etcd_port" "$api_port" ;;
    etcd)
      stop_one etcd "$cache" "$how"
      start_etcd "$etcd_port" "$etcd_peer"
      wait_for "etcd" 30 curl -sf "http://127.0.0.1:$etcd_port/health" ;;
    *) die "usage: $0 restart apiserver|etcd [--kill]" ;;
  esac
  wait_for "kube-apiserver /readyz" 60 kctl get --raw /readyz
  log "restarted $1"
}

# freeze apiserver SECONDS: stops the API server (SIGSTOP) for SECONDS and
# wakes it (SIGCONT). Meanwhile it accepts connections (the kernel's
# backlog) and answers nothing, as a server stuck on a dead disk or a long
# pause; its clients' requests hang rather than fail. It is woken whatever
# interrupts this command.
cmd_freeze() {
  local f=$state/pids/kube-apiserver.pid pid
  [ "${1:-}" = apiserver ] && [ "${2:-}" -gt 0 ] 2>/dev/null || die "usage: $0 freeze apiserver SECONDS"
  [ -f "$f" ] || die "not up"
  pid=$(cat "$f")
  # shellcheck disable=SC2064 # the pid now, not when the trap runs
  trap "kill -CONT $pid 2>/dev/null || true" EXIT INT TERM
  kill -STOP "$pid"
  log "froze kube-apiserver for $2 s"
  sleep "$2"
  kill -CONT "$pid"
  trap - EXIT INT TERM
  wait_for "kube-apiserver /readyz" 60 kctl get --raw /readyz
  log "woke kube-apiserver"
}

# compact: compacts etcd's history up to its current revision, as etcd's
# periodic compaction does on a busy cluster; a watch that resumes from an
# older resourceVersion then meets 410 Gone and relists. Through etcd's
# JSON gateway (no etcdctl needed): the revision from a range request's
# header, then a physical compaction at it.
cmd_compact() {
  [ -f "$state/ports.env" ] || die "not up"
  local etcd_port etcd_peer api_port moto_port revision
  # shellcheck disable=SC1091
  . "$state/ports.env"
  revision=$(curl -sf -X POST "http://127.0.0.1:$etcd_port/v3/kv/range" -d '{"key": "AA=="}' |
    sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
  [ -n "$revision" ] || die "could not read etcd's current revision"
  curl -sf -X POST "http://127.0.0.1:$etcd_port/v3/kv/compaction" \
    -d "{\"revision\": \"$revision\", \"physical\": true}" >/dev/null ||
    die "compacting etcd at revision $revision failed"
  log "compacted etcd at revision $revision"
}

# backup: an online snapshot of etcd (what `etcdctl snapshot save` does,
# through etcd's JSON gateway), to $state/etcd-backup.db.
# restore [--bump]: Kubernetes' documented procedure with it: the API
# server stopped, etcd's data replaced by `etcdutl snapshot restore`, both
# started again. Plain, revisions rewind: every resourceVersion a client
# holds is from etcd's future, and the cluster writes the same revisions
# again for other objects. With --bump, as etcd advises for Kubernetes,
# the revision jumps past every client's and the older ones count as
# compacted, so watches meet 410 Gone and relist.
cmd_backup() {
  [ -f "$state/ports.env" ] || die "not up"
  local etcd_port etcd_peer api_port moto_port
  # shellcheck disable=SC1091
  . "$state/ports.env"
  curl -sf -X POST "http://127.0.0.1:$etcd_port/v3/maintenance/snapshot" -d '{}' |
    python3 -c '
import base64, json, sys
with open(sys.argv[1], "wb") as out:
    for line in sys.stdin:
        if line.strip():
            out.write(base64.b64decode(json.loads(line)["result"].get("blob", "")))
' "$state/etcd-backup.db" || die "taking etcd's snapshot failed"
  log "backed up etcd to $state/etcd-backup.db"
}

cmd_restore() {
  [ -f "$state/ports.env" ] || die "not up"
  [ -f "$state/etcd-backup.db" ] || die "no backup to restore (testenv.sh backup)"
  local etcd_port etcd_peer api_port moto_port bump=()
  # shellcheck disable=SC1091
  . "$state/ports.env"
  case ${1:-} in
    "") ;;
    --bump) bump=(--bump-revision 1000000000 --mark-compacted) ;;
    *) die "usage: $0 restore [--bump]" ;;
  esac
  stop_one kube-apiserver "$cache"
  stop_one etcd "$cache"
  rm -rf "$state/etcd"
  "$etcd_bin/etcdutl" snapshot restore "$state/etcd-backup.db" --data-dir "$state/etcd" \
    --name testenv --initial-cluster "testenv=http://127.0.0.1:$etcd_peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" "${bump[@]}" \
    >"$state/logs/etcdutl.log" 2>&1 || die "etcdutl snapshot restore failed: see $state/logs/etcdutl.log"
  start_etcd "$etcd_port" "$etcd_peer"
  wait_for "etcd" 30 curl -sf "http://127.0.0.1:$etcd_port/health"
  start_apiserver "$etcd_port" "$api_port"
  wait_for "kube-apiserver /readyz" 60 kctl get --raw /readyz
  log "restored etcd from the backup${1:+ ($1)}"
}

# Real database servers from the system's packages, for the connection
# check: PostgreSQL with TLS, SCRAM (cro_admin) and MD5 (cro_md5) logins,
# and Redis with and without a password. PostgreSQL runs as `nobody` when
# we are root (it refuses root); data lives under /tmp, which `nobody` can
# reach wherever the repository is.
pg_bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}
unprivileged() {
  if [ "$(id -u)" = 0 ]; then setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; else "$@"; fi
}
start_databases() {
  local pg_port=$1 redis_port=$2 redis_auth_port=$3 redis_tls_port=$4 password=$5 bindir dir
  bindir=$(pg_bindir) || die "PostgreSQL server binaries not found under /usr/lib/postgresql (tests/testenv/install-deps.sh installs them)"
  dir=$(mktemp -d /tmp/cro-testenv-db.XXXXXX)
  echo "$dir" >"$state/dbdir"
  printf '%s\n' "$password" >"$dir/pwfile"
  # Signed by the environment's CA for the address the servers answer at:
  # a client that checks certificates (the Redis TLS check) trusts them
  # only when given that CA (CRO_TESTENV_CA).
  openssl req -newkey rsa:2048 -nodes -subj /CN=localhost \
    -keyout "$dir/server.key" -out "$dir/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$dir/ext.cnf"
  openssl x509 -req -in "$dir/server.csr" -CA "$state/pki/ca.crt" -CAkey "$state/pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$dir/ext.cnf" -out "$dir/server.crt" >/dev/null 2>&1
  chmod 600 "$dir/server.key"
  chmod 755 "$dir"
  [ "$(id -u)" != 0 ] || chown -R nobody:nogroup "$dir"
  unprivileged "$bindir/initdb" -D "$dir/pg" -U cro_admin --pwfile "$dir/pwfile" \
    -A scram-sha-256 >"$state/logs/initdb.log" 2>&1 || { cat "$state/logs/initdb.log" >&2; die "initdb failed"; }
  cat >>"$dir/pg/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$dir'
ssl = on
ssl_cert_file = '$dir/server.crt'
ssl_key_file = '$dir/server.key'
EOF
  cat >"$dir/pg/pg_hba.conf" <<EOF
local all all trust
host all cro_md5 127.0.0.1/32 md5
host all all 127.0.0.1/32 scram-sha-256
EOF
  local as=()
  [ "$(id -u)" != 0 ] || as=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
  start postgres "${as[@]}" "$bindir/postgres" -D "$dir/pg"
  # The redis-server binary ships in redis-tools as redis-check-rdb; it
  # takes its mode from the name it is started under.
  ln -sf "$(command -v redis-check-rdb)" "$dir/redis-server"
  start redis "$dir/redis-server" --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --dir "$dir"
  start redis-auth "$dir/redis-server" --bind 127.0.0.1 --port "$redis_auth_port" --save '' --appendonly no \
    --dir "$dir" --requirepass "$password"
  # As ElastiCache with in-transit encryption and an AUTH token: TLS only,
  # no client certificates; moto adds each new group's token as another
  # password of the default user.
  start redis-tls "$dir/redis-server" --bind 127.0.0.1 --port 0 --tls-port "$redis_tls_port" \
    --tls-cert-file "$dir/server.crt" --tls-key-file "$dir/server.key" --tls-auth-clients no \
    --save '' --appendonly no --dir "$dir" --requirepass "$password"
}
# Once PostgreSQL answers: the role that logs in with MD5.
seed_databases() {
  local password=$1 dir
  dir=$(cat "$state/dbdir")
  unprivileged psql -q -h "$dir" -p "$(sed -n 's/^port = //p' "$dir/pg/postgresql.conf")" -U cro_admin -d postgres \
    -v ON_ERROR_STOP=1 -c "SET password_encryption = 'md5'; CREATE ROLE cro_md5 LOGIN PASSWORD '$password';" >/dev/null
}
stop_databases() {
  local dir
  stop_one redis-tls redis-server
  stop_one redis-auth redis-server
  stop_one redis redis-server
  stop_one postgres postgres
  if [ -f "$state/dbdir" ]; then
    dir=$(cat "$state/dbdir")
    case $dir in /tmp/cro-testenv-db.*) rm -rf "$dir" ;; esac
    rm -f "$state/dbdir"
  fi
}

# No dynamic provisioner runs here, so PVCs bind to a pool of static
# volumes through a default StorageClass, as on a cluster with local PVs.
# Their directories are made here, writable by any uid (the in-cluster
# databases run as 999), under /tmp so that any uid can reach them.
volumes_dir() {
  [ -f "$state/volumesdir" ] || mktemp -d /tmp/cro-testenv-volumes.XXXXXX >"$state/volumesdir"
  chmod 755 "$(cat "$state/volumesdir")"
  cat "$state/volumesdir"
}
create_volumes() {
  local dir; dir=$(volumes_dir)
  {
    printf '%s\n' 'apiVersion: storage.k8s.io/v1' 'kind: StorageClass' \
      'metadata: {name: standard, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}' \
      'provisioner: kubernetes.io/no-provisioner' 'volumeBindingMode: Immediate'
    local i
    for i in $(seq -w 1 "${CRO_TESTENV_VOLUMES:-500}"); do
      [ -d "$dir/pv-$i" ] || mkdir -m 0777 "$dir/pv-$i"
      printf -- '---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: testenv-pv-%s}\n' "$i"
      printf 'spec: {capacity: {storage: 100Gi}, accessModes: [ReadWriteOnce, ReadWriteMany], storageClassName: standard, persistentVolumeReclaimPolicy: Retain, hostPath: {path: %s/pv-%s}}\n' "$dir" "$i"
    done
  } | kctl apply -f - >/dev/null
}

# Volumes whose claim was deleted stay Released (policy Retain): they are
# replaced, so an environment kept up serves any number of test runs.
recycle_volumes() {
  local released
  released=$(kctl get pv -o jsonpath='{range .items[?(@.status.phase=="Released")]}{.metadata.name}{" "}{end}')
  [ -n "$released" ] || return 0
  # shellcheck disable=SC2086 # one name per word
  kctl delete pv $released --wait=true >/dev/null
  # A new volume starts empty (a real node's database left its files).
  local name dir; dir=$(volumes_dir)
  for name in $released; do rm -rf "${dir:?}/pv-${name#testenv-pv-}"; done
  create_volumes
  log "recycled $(echo "$released" | wc -w) released volumes"
}

cmd_up() {
  if cmd_status; then
    # Started by `make run`: the tests' tools may still be missing.
    build_test_tools
    recycle_volumes
    log "already up; source $state/env.sh"
    return 0
  fi
  # Anything half-started before is stopped, then we start clean.
  [ -d "$state/pids" ] && cmd_down
  cmd_build
  rm -rf "$state"
  mkdir -p "$state/logs" "$state/pids"
  fake_network_up
  make_certs

  local etcd_port etcd_peer api_port moto_port gcp_port token pg_port redis_port redis_auth_port redis_tls_port db_password
  etcd_port=$(free_port); etcd_peer=$(free_port); api_port=$(free_port); moto_port=$(free_port); gcp_port=$(free_port)
  pg_port=$(free_port); redis_port=$(free_port); redis_auth_port=$(free_port); redis_tls_port=$(free_port)
  db_password=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  token=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  echo "$token" >"$admin_token_file"
  printf '%s,cro-testenv-admin,cro-testenv-admin,"system:masters"\n' "$token" >"$state/pki/tokens.csv"

  start_etcd "$etcd_port" "$etcd_peer"
  start_databases "$pg_port" "$redis_port" "$redis_auth_port" "$redis_tls_port" "$db_password"
  # moto with realistic creating/modifying/deleting transitions.
  # Its request log and fault file are the tests' view into AWS calls;
  # instances marked for it are backed by the real servers above.
  # moto's own boto calls look for credentials and a region: static ones
  # here, and never the instance metadata service (169.254.169.254), which
  # is off this machine.
  start moto env AWS_EC2_METADATA_DISABLED=true AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing \
    AWS_DEFAULT_REGION="$aws_region" CRO_MOTO_REQUEST_LOG="$state/logs/moto-requests.jsonl" CRO_MOTO_FAULTS="$state/moto-faults.json" \
    CRO_MOTO_MAINTENANCE="$state/moto-maintenance.json" \
    CRO_MOTO_REAL_POSTGRES="127.0.0.1:$pg_port" CRO_MOTO_REAL_POSTGRES_PASSWORD="$db_password" \
    CRO_MOTO_REAL_REDIS="127.0.0.1:$redis_port" CRO_MOTO_REAL_REDIS_TLS="127.0.0.1:$redis_tls_port" \
    "$moto_venv/bin/python" "$here/moto_server.py" -H 127.0.0.1 -p "$moto_port"
  # Cloud SQL Admin's stand-in, held to Google's discovery document.
  # Its service account's key file is written where the tests read it; it
  # verifies the tokens' signatures with moto's cryptography.
  start gcp env CRO_GCP_FAULTS="$state/gcp-faults.json" CRO_GCP_KEY_FILE="$state/gcp-service-account.json" \
    "$moto_venv/bin/python" "$here/gcp_server.py" "$gcp_port" "$gcp_discovery"

  # Requests made with ServiceAccount credentials are audited: the RBAC
  # test reads which verbs the operator used under deploy/'s ServiceAccount.
  cat >"$state/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
EOF
  printf 'etcd_port=%s\netcd_peer=%s\napi_port=%s\nmoto_port=%s\n' "$etcd_port" "$etcd_peer" "$api_port" "$moto_port" >"$state/ports.env"
  start_apiserver "$etcd_port" "$api_port"
  write_kubeconfig "$api_port" "$token"
  wait_for "etcd" 30 curl -sf "http://127.0.0.1:$etcd_port/health"
  wait_for "kube-apiserver /readyz" 60 kctl get --raw /readyz

  start kube-controller-manager "$k8s_bin/kube-controller-manager" \
    --kubeconfig "$state/kubeconfig" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port 0 \
    --service-account-private-key-file "$state/pki/sa.key" \
    --root-ca-file "$state/pki/ca.crt" --use-service-account-credentials=false \
    --controllers '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route'
  start kube-scheduler "$k8s_bin/kube-scheduler" \
    --kubeconfig "$state/kubeconfig" --leader-elect=false --secure-port 0
  start kwok "$kwok_bin/kwok" --kubeconfig "$state/kubeconfig" \
    --manage-all-nodes=false --manage-nodes-with-label-selector type=kwok \
    --cidr "$kwok_pod_cidr" --node-ip "$kwok_node_ip" \
    --node-lease-duration-seconds 40 --server-address ""

  # The cluster's VPC and the node's EC2 instance, as on EKS: the
  # operator finds where to place databases from the node's providerID.
  wait_for "moto server" 60 curl -sf "http://127.0.0.1:$moto_port/moto-api/"
  # Tests that run as a new user does (no --cluster-id) share the ID the
  # operator derives from kube-system's UID (src/providers/cluster_id.rs): it gets a
  # keeper database too.
  local node_zone node_instance uid
  wait_for "namespace kube-system" 30 kctl get namespace kube-system
  uid=$(kctl get namespace kube-system -o jsonpath='{.metadata.uid}')
  read -r node_zone node_instance < <("$moto_venv/bin/python" "$here/aws_cluster.py" \
    "http://127.0.0.1:$moto_port" "$aws_region" testcluster \
    "k$(tr -cd '0-9a-fA-F' <<<"$uid" | cut -c1-8 | tr 'A-F' 'a-f')") || die "laying out the cluster's VPC in moto failed"
  # One fake node that kwok keeps Ready and whose pods kwok marks Running;
  # room for make bench's in-cluster databases and their copies beside the
  # suites' pods.
  kctl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-0, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
  annotations: {kwok.x-k8s.io/node: fake}
spec:
  providerID: aws:///$node_zone/$node_instance
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "1000"}
  capacity: {cpu: "32", memory: 256Gi, pods: "1000"}
EOF
  create_volumes
  start_real_node
  wait_for "PostgreSQL" 60 "$(pg_bindir)/pg_isready" -q -h 127.0.0.1 -p "$pg_port"
  seed_databases "$db_password"
  wait_for "Redis" 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$redis_port 4<>/dev/tcp/127.0.0.1/$redis_auth_port 5<>/dev/tcp/127.0.0.1/$redis_tls_port"
  wait_for "moto server" 60 curl -sf "http://127.0.0.1:$moto_port/moto-api/"
  wait_for "the Cloud SQL double (gcp_server.py)" 30 curl -s -o /dev/null "http://127.0.0.1:$gcp_port/"
  wait_for "the default ServiceAccount (kube-controller-manager)" 60 kctl -n default get serviceaccount default
  wait_for "kwok-node-0 Ready (kwok)" 60 \
    sh -c "'$k8s_bin/kubectl' --kubeconfig '$state/kubeconfig' get node kwok-node-0 -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  printf 'pg_port=%s\nredis_port=%s\nredis_auth_port=%s\nredis_tls_port=%s\ndb_password=%s\n' \
    "$pg_port" "$redis_port" "$redis_auth_port" "$redis_tls_port" "$db_password" >"$state/databases.env"
  write_env "$moto_port" "$gcp_port"
  log "up; source $state/env.sh"
}

# Stops only processes whose pid file we wrote and whose command line is
# still the binary we started (a reused pid is left alone).
cmd_down() {
  [ -d "$state/pids" ] || { log "nothing to stop"; return 0; }
  local name
  stop_real_node
  for name in kwok kube-scheduler kube-controller-manager kube-apiserver moto gcp etcd; do
    stop_one "$name"
  done
  stop_databases
  fake_network_down
  if [ -f "$state/volumesdir" ]; then
    local dir; dir=$(cat "$state/volumesdir")
    case $dir in /tmp/cro-testenv-volumes.*) rm -rf "$dir" ;; esac
    rm -f "$state/volumesdir"
  fi
  rm -f "$state/env.sh"
  log "down"
}

# load-image ARCHIVE: an image archive (OCI or `docker save`; make image
# writes OCI) into the real node's containerd, where pods find it without
# a registry: by its name, and, as after a pull by digest, by
# repository@<the digest containerd stored it under>.
cmd_load_image() {
  local file=${1:-} said name digest
  [ -f "$file" ] || die "usage: $0 load-image ARCHIVE (an OCI or docker-save archive, e.g. target/image/cloud-resource-operator.tar from make image)"
  cmd_status || die "the environment is not up (make testenv-up)"
  [ ! -f "$state/real-node.unsupported" ] || die "there is no real node to load images into: $(cat "$state/real-node.unsupported")"
  said=$(ctr_ images import "$file")
  echo "$said"
  # ctr says "unpacking NAME (sha256:...)...done" for each image.
  while read -r name digest; do
    case $name in *@*) continue ;; esac
    ctr_ images tag --force "$name" "${name%:*}@$digest" >/dev/null
    echo "load-image: ${name%:*}@$digest"
  done < <(sed -n 's/^unpacking \([^ ]*\) (\(sha256:[0-9a-f]*\)).*/\1 \2/p' <<<"$said")
}

case ${1:-} in
  build) cmd_build ;;
  load-image) cmd_load_image "${2:-}" ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  restart) cmd_restart "${2:-}" "${3:-}" ;;
  freeze) cmd_freeze "${2:-}" "${3:-}" ;;
  compact) cmd_compact ;;
  backup) cmd_backup ;;
  restore) cmd_restore "${2:-}" ;;
  *) echo "usage: $0 build|up|down|status|restart apiserver|etcd [--kill]|freeze apiserver SECONDS|compact|backup|restore [--bump]|load-image ARCHIVE" >&2; exit 2 ;;
esac
