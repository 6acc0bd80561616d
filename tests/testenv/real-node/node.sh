# shellcheck shell=bash
# One real node beside the kwok ones, sourced by testenv.sh (it uses that
# script's $state, $cache, $k8s_bin, start, stop_one, log and kctl).
#
# kubelet and kube-proxy (built with the control plane), containerd, runc
# and the CNI plugins (bridge, host-local, loopback) from the system's
# packages, and CoreDNS on the bridge's address as the cluster DNS. Pods
# get 10.244.0.0/24 on the bridge cro0, which the host routes to. The node
# is labelled and tainted `cro-testenv/real-node`: only pods of a namespace
# with the PodNodeSelector and PodTolerationRestriction annotations
# (`support::place_on_real_node` in the tests, `make run` for `demo`) run
# there; everything else stays on kwok.
#
# containerd and kubelet run in a private mount namespace (held by the
# `real-node-mounts` process), so every mount they make (container root
# filesystems, pod volumes, network namespaces) goes away with them, and
# the host paths they insist on (/var/lib/cni, /var/log/containers) are
# bind mounts of directories under $state/real-node.
#
# `down` kills what runs in the kubepods cgroups and removes every KUBE-*
# and CNI-* iptables chain: so the node is only started on a host where
# no other kubelet or kube-proxy left those. A node killed with its host
# (or its session) leaves them behind; its claim ($real_node_claim) says
# they are ours, and the next start clears them, from any checkout.

real_node_dir() { echo "$state/real-node"; }
# The host's one real node belongs to the state directory named here,
# from start until its host state (chains, bridge, cgroups) is cleared: a
# checkout elsewhere (CI's clone) then knows leftovers of a killed
# environment from another kubelet's.
real_node_claim=/run/cro-testenv-real-node
real_node_name=real-node-0
real_node_cidr=10.244.0.0/24
real_node_gateway=10.244.0.1
real_node_bridge=cro0
real_node_images_key() {
  cat "$here/real-node/build-images.sh" "$here/../../deploy/image/oci_archive.py" \
    "$here/real-node/postgres-entrypoint.sh" "$here/real-node/pause.c" \
    "$here/real-node/rhscl-run-postgresql.sh" "$here/real-node/container-entrypoint.sh" | sha256sum | cut -c1-12
}
real_node_images() { echo "$cache/real-node-images-$(real_node_images_key)"; }

# Why this machine cannot host the node, or nothing when it can.
real_node_unsupported() {
  [ "$(id -u)" = 0 ] || { echo "not root (kubelet and containerd need root)"; return; }
  local b
  for b in containerd runc debootstrap iptables conntrack nsenter unshare ip gcc socat; do
    command -v "$b" >/dev/null || { echo "$b is not installed (tests/testenv/install-deps.sh)"; return; }
  done
  for b in bridge host-local loopback; do
    [ -x "/usr/lib/cni/$b" ] || { echo "CNI plugin /usr/lib/cni/$b is missing (containernetworking-plugins)"; return; }
  done
  [ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] ||
    { echo "no cgroup hierarchy under /sys/fs/cgroup"; return; }
  [ -d /proc/sys/net/bridge ] || { echo "the kernel has no br_netfilter (/proc/sys/net/bridge is missing)"; return; }
  unshare --mount true 2>/dev/null || { echo "unshare --mount is refused"; return; }
  local claimant; claimant=$(cat "$real_node_claim" 2>/dev/null || true)
  if [ -n "$claimant" ] && [ "$claimant" != "$state" ] && real_node_claimant_alive "$claimant"; then
    echo "the test environment in $claimant runs a real node on this host: stop it first (make testenv-down there)"; return
  fi
  # With a claim, leftovers are a real node of ours that was killed
  # (start_real_node clears them); without one they are someone else's.
  if [ -z "$claimant" ]; then
    ls -d /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods >/dev/null 2>&1 &&
      { echo "another kubelet's kubepods cgroups exist on this host"; return; }
    iptables-save 2>/dev/null | grep -q '^:\(KUBE\|CNI\)-' &&
      { echo "another kubelet, kube-proxy or CNI plugin left iptables chains on this host"; return; }
  fi
  return 0
}

# Whether the test environment in state directory $1 still runs its
# kubelet (a pid since reused by another program does not count).
real_node_claimant_alive() {
  local f=$1/pids/kubelet.pid
  [ -f "$f" ] && tr '\0' ' ' <"/proc/$(cat "$f")/cmdline" 2>/dev/null | grep -q "$1/real-node/kubelet"
}

build_real_node_images() {
  local out; out=$(real_node_images)
  [ -f "$out/images.tar" ] && [ -f "$out/pause.tar" ] && [ -f "$out/servers.tar" ] && return 0
  log "building the real node's images from Debian packages — first time only"
  "$here/real-node/build-images.sh" "$out" || die "building the real node's images failed"
}

ctr_() { ctr -a "$(real_node_dir)/containerd.sock" -n k8s.io "$@"; }

write_real_node_config() {
  local d api_port=$1 kubelet_port=$2 healthz_port=$3 proxy_metrics_port=$4
  d=$(real_node_dir)
  mkdir -p "$d/cni" "$d/ipam" "$d/cni-cache" "$d/log-containers" "$d/log-pods" "$d/kubelet"
  # Volumes of a set size that grow (see tmpfs-volume.sh).
  install -D -m 0755 "$here/real-node/tmpfs-volume.sh" "$d/volume-plugins/cro~tmpfs/tmpfs"
  cat >"$d/containerd.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
[grpc]
  address = "$d/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "cro-testenv/pause:1"
  netns_mounts_under_state_dir = true
  # Containers may not lower their OOM score below containerd's: this
  # machine's root lacks CAP_SYS_RESOURCE, and runc fails the sandbox's -998.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$d/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni"
EOF
  # Masquerading makes replies between pods of the one bridge go back
  # through the host, where kube-proxy's NAT is undone.
  cat >"$d/cni/10-cro-testenv.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "cro-testenv", "plugins": [
  {"type": "bridge", "bridge": "$real_node_bridge", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$real_node_cidr", "gateway": "$real_node_gateway"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$d/ipam"}}
]}
EOF
  cp "$state/kubeconfig" "$d/kubeconfig"
  : >"$d/resolv.conf"
  cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The node's address is the bridge's (kubelet refuses a loopback one):
# the API server reaches it for logs and exec; nothing outside the host can.
address: $real_node_gateway
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$d/containerd.sock
cgroupDriver: cgroupfs
# This machine has cgroup v1 (kubelet 1.35 refuses it unless told).
failCgroupV1: false
failSwapOn: false
clusterDNS: [$real_node_gateway]
clusterDomain: cluster.local
resolvConf: $d/resolv.conf
podLogsDir: $d/log-pods
registerWithTaints: [{key: cro-testenv/real-node, value: "true", effect: NoSchedule}]
maxPods: 30
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
volumePluginDir: $d/volume-plugins
EOF
  cat >"$d/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $d/kubeconfig}
hostnameOverride: $real_node_name
mode: iptables
clusterCIDR: $real_node_cidr
iptables: {masqueradeAll: true}
metricsBindAddress: 127.0.0.1:$proxy_metrics_port
healthzBindAddress: ""
conntrack: {maxPerCore: 0}
EOF
  cat >"$d/Corefile" <<EOF
.:53 {
  bind $real_node_gateway
  errors
  kubernetes cluster.local in-addr.arpa {
    kubeconfig $d/kubeconfig
    pods insecure
  }
  # Every other name as the host resolves it, as a cluster's DNS does.
  forward . /etc/resolv.conf
}
EOF
  # The API server's port is in the kubeconfig; kept for the log.
  echo "$api_port" >"$d/api_port"
  # What a pod's resolver is told, for processes on the host that must
  # resolve as a pod does (the operator in the real_node suite).
  printf 'nameserver %s\nsearch svc.cluster.local cluster.local\noptions ndots:5\n' \
    "$real_node_gateway" >"$d/pod-resolv.conf"
  cat >"$d/in-cluster-dns.sh" <<EOF
#!/bin/sh
# in-cluster-dns.sh COMMAND...: runs COMMAND with the cluster's DNS, as in a
# pod, in a mount namespace of its own (the host's resolv.conf is untouched).
exec unshare --mount -- sh -c 'mount --bind "\$0" /etc/resolv.conf && exec "\$@"' "$d/pod-resolv.conf" "\$@"
EOF
  chmod +x "$d/in-cluster-dns.sh"
}

# The bridge exists before any pod so that CoreDNS can bind its address.
real_node_network_up() {
  ip link show "$real_node_bridge" >/dev/null 2>&1 || ip link add "$real_node_bridge" type bridge
  ip addr replace "$real_node_gateway/24" dev "$real_node_bridge"
  ip link set "$real_node_bridge" up
  fake_network_on_bridge "$real_node_bridge"
  # Pods reach Services through the host (kube-proxy's DNAT), which must
  # forward, also between ports of the bridge; `down` restores the values
  # found here.
  local key saved; saved=$(real_node_dir)/sysctls
  for key in net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables; do
    grep -q "^$key " "$saved" 2>/dev/null || echo "$key $(cat "/proc/sys/$key")" >>"$saved"
    echo 1 >"/proc/sys/$key"
  done
}

# Pods reach the API server as the `kubernetes` Service (as in any
# cluster) and the AWS emulator at the bridge's address. Both listen on
# 127.0.0.1 only; a forwarder bound to the bridge carries each, so only
# the node's pods and this host reach them.
real_node_api() {
  local api_port=$1 moto_port
  moto_port=$(sed -n 's/^moto_port=//p' "$state/ports.env")
  start api-forward socat "TCP-LISTEN:$api_port,bind=$real_node_gateway,fork,reuseaddr" "TCP:127.0.0.1:$api_port"
  start moto-forward socat "TCP-LISTEN:$moto_port,bind=$real_node_gateway,fork,reuseaddr" "TCP:127.0.0.1:$moto_port"
  # The API server runs with --endpoint-reconciler-type none (it is on
  # loopback): the Service's endpoint is the forwarder.
  kctl apply -f - >/dev/null <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels: {kubernetes.io/service-name: kubernetes, endpointslice.kubernetes.io/managed-by: cro-testenv}
addressType: IPv4
endpoints: [{addresses: ["$real_node_gateway"], conditions: {ready: true}}]
ports: [{name: https, port: $api_port, protocol: TCP}]
EOF
}

start_real_node() {
  local why d
  why=$(real_node_unsupported)
  if [ -n "$why" ]; then
    log "no real node: $why; in-cluster workloads run on kwok only"
    echo "$why" >"$state/real-node.unsupported"
    return 0
  fi
  build_real_node_images
  if [ -f "$real_node_claim" ]; then
    log "clearing what a killed real node ($(cat "$real_node_claim")) left on this host"
    real_node_clear_host
  fi
  echo "$state" >"$real_node_claim"
  d=$(real_node_dir)
  local kubelet_port healthz_port proxy_metrics_port api_port
  kubelet_port=$(free_port); healthz_port=$(free_port); proxy_metrics_port=$(free_port)
  api_port=$(sed -n 's/^api_port=//p' "$state/ports.env")
  write_real_node_config "$api_port" "$kubelet_port" "$healthz_port" "$proxy_metrics_port"
  real_node_network_up
  real_node_api "$api_port"

  # The mount namespace: /var/lib/cni and the log directories kubelet
  # insists on are bind mounts of our state.
  local holder=$d/mounts.sh
  cat >"$holder" <<EOF
#!/bin/bash
set -e
mount --make-rprivate /
for p in /var/lib/cni:$d/cni-cache /var/log/containers:$d/log-containers; do
  target=\${p%%:*}; source=\${p#*:}
  mkdir -p "\$target"
  mount --bind "\$source" "\$target"
done
exec -a "$d/mounts" sleep infinity
EOF
  chmod +x "$holder"
  # Records which host directories did not exist, to remove them on down.
  local p
  for p in /var/lib/cni /var/log/containers; do [ -e "$p" ] || echo "$p" >>"$d/created-dirs"; done
  start real-node-mounts unshare --mount --propagation private -- "$holder"
  wait_for "the real node's mount namespace" 10 \
    grep -q " /var/log/containers " "/proc/$(cat "$state/pids/real-node-mounts.pid")/mountinfo"

  start containerd nsenter --mount --target "$(cat "$state/pids/real-node-mounts.pid")" -- \
    containerd --config "$d/containerd.toml"
  wait_for "containerd" 30 ctr_ version
  ctr_ images import "$(real_node_images)/pause.tar" >"$state/logs/images-import.log"
  ctr_ images import "$(real_node_images)/images.tar" >>"$state/logs/images-import.log"
  ctr_ images import "$(real_node_images)/servers.tar" >>"$state/logs/images-import.log"

  start coredns "$coredns_bin/coredns" -conf "$d/Corefile"
  start kube-proxy "$k8s_bin/kube-proxy" --config "$d/kube-proxy.yaml"
  start kubelet nsenter --mount --target "$(cat "$state/pids/real-node-mounts.pid")" -- \
    "$k8s_bin/kubelet" --config "$d/kubelet.yaml" --kubeconfig "$d/kubeconfig" \
    --root-dir "$d/kubelet" --hostname-override "$real_node_name" --node-ip "$real_node_gateway" \
    --node-labels "cro-testenv/real-node=true"
  wait_for "kube-proxy" 30 curl -sf "http://127.0.0.1:$proxy_metrics_port/metrics"
  wait_for "CoreDNS" 30 bash -c "exec 3<>/dev/tcp/$real_node_gateway/53"
  wait_for "$real_node_name Ready (kubelet)" 120 \
    sh -c "'$k8s_bin/kubectl' --kubeconfig '$state/kubeconfig' get node $real_node_name -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
}

real_node_alive() {
  [ -f "$state/real-node.unsupported" ] && return 0
  local p
  for p in real-node-mounts containerd kubelet kube-proxy coredns api-forward moto-forward; do pid_alive "$p" || return 1; done
}

# What to stop, in order: kubelet (so it restarts nothing), every container
# (killed through its cgroup), containerd and its shims, the mount
# namespace, then the host's network state and cgroups.
stop_real_node() {
  local d; d=$(real_node_dir)
  [ -d "$d" ] || return 0
  stop_one kubelet
  real_node_kill_pods
  stop_one containerd "$d/containerd.toml"
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $d/containerd.sock" || true); do
    kill -9 "$pid" 2>/dev/null || true
  done
  stop_one kube-proxy
  stop_one coredns
  stop_one api-forward socat
  stop_one moto-forward socat
  stop_one real-node-mounts "$d/mounts"
  real_node_clear_host
  if [ -f "$d/sysctls" ]; then
    local key value
    while read -r key value; do echo "$value" >"/proc/sys/$key"; done <"$d/sysctls"
  fi
  if [ -f "$d/created-dirs" ]; then
    while read -r p; do rmdir "$p" 2>/dev/null || true; done <"$d/created-dirs"
  fi
  [ "$(cat "$real_node_claim" 2>/dev/null)" != "$state" ] || rm -f "$real_node_claim"
  rm -rf "$d"
}

# Every container, killed through its cgroup.
real_node_kill_pods() {
  local cg
  for cg in /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$cg" ] || continue
    find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  done
}

# What a stopped (or killed) real node leaves on the host: the processes
# still in the kubepods cgroups, kube-proxy's rules, then what kubelet
# (KUBE-*) and the bridge plugin (CNI-*) left (the rules that jump to
# their chains, then the chains), the bridge and the cgroups.
real_node_clear_host() {
  real_node_kill_pods
  # kube-proxy's rules, then what kubelet (KUBE-*) and the bridge plugin
  # (CNI-*) left: the rules that jump to their chains, then the chains.
  "$k8s_bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
  local table chain rule
  for table in nat filter mangle; do
    for chain in $(iptables -t "$table" -S 2>/dev/null | sed -n 's/^-N \(\(KUBE\|CNI\)-[^ ]*\)$/\1/p'); do
      iptables -t "$table" -S | grep -- "-j $chain\( \|$\)" | sed 's/^-A /-D /' |
        while read -r rule; do eval "iptables -t $table $rule" || true; done || true
    done
    for chain in $(iptables -t "$table" -S 2>/dev/null | sed -n 's/^-N \(\(KUBE\|CNI\)-[^ ]*\)$/\1/p'); do
      iptables -t "$table" -F "$chain" 2>/dev/null || true
    done
    for chain in $(iptables -t "$table" -S 2>/dev/null | sed -n 's/^-N \(\(KUBE\|CNI\)-[^ ]*\)$/\1/p'); do
      iptables -t "$table" -X "$chain" 2>/dev/null || true
    done
  done
  ip link del "$real_node_bridge" 2>/dev/null || true
  local cg
  for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}
