#!/usr/bin/env bash
# build.sh [BINARY]: the operator's image, built with no container daemon,
# as an OCI archive at target/image/cloud-resource-operator.tar, tagged as
# the Helm chart's default image (cloud-resource-operator:<the chart's
# appVersion>), its digest beside it in cloud-resource-operator.digest (the
# same binary gives the same digest). BINARY defaults to the release build.
#
# The same contract as the Dockerfile (the release path, multi-arch with
# buildx): the binary as entrypoint with `run` as its command, user
# 65532:65532 and files any UID may read (OpenShift assigns one), nothing
# written to the root filesystem (it runs read-only), port 8080 for
# /metrics, /healthz and /readyz, CA certificates for AWS. The binary links
# glibc dynamically, so the libraries it names (ldd) are copied beside it
# at their paths, with the loader. IMAGE_NAME names it otherwise (a
# release's registry/repository:version); the digest does not depend on it.
# IMAGE_OUT writes the archive elsewhere (its digest beside it, .digest).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${1:-$repo/target/release/cloud-resource-operator}
[ -x "$bin" ] || { echo "image: no operator binary at $bin (cargo build --release --bin cloud-resource-operator)" >&2; exit 1; }
version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$repo/deploy/helm/Chart.yaml")
[ -n "$version" ] || { echo "image: no appVersion in deploy/helm/Chart.yaml" >&2; exit 1; }
out=${IMAGE_OUT:-$repo/target/image/cloud-resource-operator.tar}
mkdir -p "$(dirname "$out")" "$repo/target/image"
work=$(mktemp -d "$repo/target/image/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

root=$work/rootfs
mkdir -p "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
install -m 0755 "$bin" "$root/cloud-resource-operator"
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
  chmod 0755 "$root$lib"
done
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || { echo "image: $ca is missing (Debian package ca-certificates)" >&2; exit 1; }
install -m 0644 "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
chmod 0644 "$root/etc/passwd" "$root/etc/group"
tar -C "$root" --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -cf "$work/layer.tar" .

cat >"$work/config.json" <<JSON
{"Entrypoint": ["/cloud-resource-operator"], "Cmd": ["run"], "User": "65532:65532",
 "ExposedPorts": {"8080/tcp": {}}, "Env": ["SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"]}
JSON
name=${IMAGE_NAME:-docker.io/library/cloud-resource-operator:$version}
digest=$(IMAGE_CREATED_BY=deploy/image/build.sh python3 "$repo/deploy/image/oci_archive.py" "$out.tmp" "$work/layer.tar" "$work/config.json=$name" | cut -d' ' -f2)
mv "$out.tmp" "$out"
echo "$digest" >"${out%.tar}.digest"
echo "image: $out ($name, $(du -h "$out" | cut -f1))"
echo "digest: $digest (in ${out%.tar}.digest; pin it with the chart's image.digest)"
