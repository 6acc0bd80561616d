#!/usr/bin/env bash
# Installs what `make test` and `make run` need and a fresh machine may lack:
# Debian packages (openssl, curl, flock/setsid, python3 venv, PostgreSQL,
# redis-tools, and the real node's containerd, runc, CNI plugins, iptables,
# conntrack, debootstrap). Go and Rust
# come with the machine; Kubernetes tools and moto are built/installed into
# a cache by testenv.sh.
set -euo pipefail
# `make run` against a cluster of the user's own (KUBECONFIG set) installs
# nothing and needs no root: it builds the operator and applies manifests.
if [ "${1:-}" = --existing-cluster ]; then
  fail=0
  command -v cargo >/dev/null || { echo "install-deps: cargo (rustup) is required to build the operator" >&2; fail=1; }
  command -v cc >/dev/null || { echo "install-deps: a C compiler (cc) is required to build the operator's TLS library: on Debian, apt-get install gcc libc6-dev" >&2; fail=1; }
  command -v kubectl >/dev/null || { echo "install-deps: kubectl is required to install the CRDs and configuration into \$KUBECONFIG's cluster: put it on PATH (tests/testenv/testenv.sh build builds one, without root, into the cache it prints)" >&2; fail=1; }
  exit $fail
fi
# The local environment needs root: it installs Debian packages, makes
# kwok's fake pod range unreachable (ip route, iptables) and runs a real
# node (containerd, a bridge network). Say so before anything is done.
if [ "${1:-}" = --local-environment ] && [ "$(id -u)" != 0 ]; then
  echo "install-deps: the local environment (make run without KUBECONFIG, make test) needs root: it installs Debian packages, adds an unreachable route and iptables rules so no test traffic leaves this machine, and runs a node with containerd. Run it as root (sudo -E make ...), or set KUBECONFIG to a cluster of yours: make run then installs nothing and needs no root." >&2
  exit 1
fi
missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
command -v flock >/dev/null || missing+=(util-linux)
command -v setsid >/dev/null || missing+=(util-linux)
command -v python3 >/dev/null || missing+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
# Real servers for the connection check's tests (testenv.sh starts them).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v psql >/dev/null || missing+=(postgresql-client)
command -v redis-check-rdb >/dev/null || missing+=(redis-tools)
# The real node (tests/testenv/real-node): container runtime, pod network,
# kube-proxy's tools, and what builds its images.
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v conntrack >/dev/null || missing+=(conntrack)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v gcc >/dev/null || missing+=(gcc libc6-dev)
# Carries the API server and the AWS emulator to the real node's pods.
command -v socat >/dev/null || missing+=(socat)
# Argo CD's health script (deploy/gitops/) runs in Lua 5.1, as Argo CD's.
command -v lua5.1 >/dev/null || missing+=(lua5.1)
# The operator's image (deploy/image/build.sh) carries the CA bundle.
[ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
# deploy/bundle/generate.py reads and writes YAML.
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pyyaml
command -v go >/dev/null || { echo "install-deps: Go is required to build the test binaries (https://go.dev/doc/install)" >&2; exit 1; }
command -v cargo >/dev/null || { echo "install-deps: cargo (rustup) is required" >&2; exit 1; }
