#!/usr/bin/env bash
# release.sh VERSION [BINARY]: everything a release publishes, from one
# operator binary (default: the release build), in target/dist/VERSION/:
#
#   cloud-resource-operator-VERSION.oci.tar   the image (deploy/image/build.sh),
#                                             named REPOSITORY:VERSION
#   cloud-resource-operator-VERSION.digest    its digest (sha256:...)
#   cloud-resource-operator-VERSION.tgz       the Helm chart, version and
#                                             appVersion VERSION, its image
#                                             pinned to REPOSITORY@digest
#   cloud-resource-operator-bundle-VERSION.tar.gz  the OLM bundle of that
#                                             chart (deploy/bundle/generate.py)
#   kubectl-cro_VERSION_linux_ARCH.tar.gz     the kubectl plugin, and
#   cro.yaml                                  its krew manifest (RELEASE_URL)
#   sbom.cdx.json                             CycloneDX SBOM of the crates
#   RELEASE_NOTES.md                          CHANGELOG.md's section
#   SHA256SUMS                                of every file above
#
# REPOSITORY (default cloud-resource-operator) is where the image will be
# pushed; RELEASE_URL where the plugin archive will be downloadable (default
# this directory, as file://, for `kubectl krew install --manifest`).
# CHANGELOG.md must have a `## [VERSION]` section; a pre-release
# (VERSION-rc.1) takes the [Unreleased] one.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
version=${1:-}
bin=${2:-$repo/target/release/cloud-resource-operator}
die() { echo "release: $*" >&2; exit 1; }

[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  die "VERSION must be semantic (1.2.3 or 1.2.3-rc.1), not '${version}': make release VERSION=1.2.3"
[ -x "$bin" ] || die "no operator binary at $bin (cargo build --release --bin cloud-resource-operator)"

# The notes first: a release without them is refused before any work.
section() { awk -v h="## [$1]" 'index($0, h) == 1 {on = 1; next} on && /^## \[/ {exit} on' "$repo/CHANGELOG.md"; }
notes=$(section "$version")
if [ -z "${notes//[[:space:]]/}" ]; then
  [[ $version == *-* ]] || die "CHANGELOG.md has no section '## [$version]': move the [Unreleased] entries under '## [$version] - $(date -u +%F)' (a pre-release such as $version-rc.1 takes the [Unreleased] section)"
  notes=$(section Unreleased)
fi

. "$repo/tests/testenv/versions.env"
helm=${CRO_TESTENV_CACHE:-$HOME/.cache/cro-testenv}/helm-$HELM_VERSION/bin/helm
[ -x "$helm" ] || "$repo/tests/testenv/testenv.sh" build

out=$repo/target/dist/$version
rm -rf "$out" && mkdir -p "$out"
stage=$(mktemp -d "$repo/target/dist/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
name=cloud-resource-operator

# The image, fully named as `ctr images import` and registries want it.
repository=${REPOSITORY:-$name}
[[ $repository == */* ]] || repository=docker.io/library/$repository
IMAGE_NAME=$repository:$version IMAGE_OUT=$out/$name-$version.oci.tar "$repo/deploy/image/build.sh" "$bin" >&2
mv "$out/$name-$version.oci.digest" "$out/$name-$version.digest"
digest=$(cat "$out/$name-$version.digest")

# The chart, versioned and pinned by digest; values.yaml's comments kept.
chart=$stage/$name
cp -rL "$repo/deploy/helm" "$chart"
sed -i "s/^version: .*/version: $version/; s/^appVersion: .*/appVersion: \"$version\"/" "$chart/Chart.yaml"
sed -i "s|^  repository: .*|  repository: ${REPOSITORY:-$name}|; s|^  digest: \"\"|  digest: \"$digest\"|" "$chart/values.yaml"
grep -q "^  digest: \"$digest\"" "$chart/values.yaml" || die "deploy/helm/values.yaml has no 'image.digest: \"\"' line to pin"
"$helm" package "$chart" --destination "$out" >&2

# The OLM bundle of the same chart.
CHART=$chart python3 "$repo/deploy/bundle/generate.py" "$helm" "$stage/bundle" \
  "image.repository=${REPOSITORY:-$name}" "image.digest=$digest" >&2
tar -C "$stage/bundle" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - . |
  gzip -n >"$out/$name-bundle-$version.tar.gz"

# The kubectl plugin for this machine's architecture, and its krew manifest.
case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) die "no krew name for $(uname -m)" ;; esac
plugin=kubectl-cro_${version}_linux_$arch.tar.gz
mkdir -p "$stage/plugin"
install -m 0755 "$bin" "$stage/plugin/kubectl-cro"
cp "$repo/LICENSE" "$stage/plugin/LICENSE"
tar -C "$stage/plugin" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - kubectl-cro LICENSE |
  gzip -n >"$out/$plugin"
url=${RELEASE_URL:-file://$out}
cat >"$out/cro.yaml" <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: cro
spec:
  version: v$version
  shortDescription: Explain a cloud-resource-operator CR
  description: |
    Prints, for one Postgres, Redis, BlobStorage, SMTPCredentialSet or
    snapshot CR, its phase, conditions, provider, cloud identifier, the
    keys of its Secret (never their values), the objects it owns, pending
    changes, Events and what to change. Read-only.
      kubectl cro status -n NAMESPACE postgres/NAME
  caveats: |
    The binary links glibc (any current Linux distribution has it).
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: $arch
    uri: $url/$plugin
    sha256: $(sha256sum "$out/$plugin" | cut -d' ' -f1)
    bin: kubectl-cro
    files:
    - from: kubectl-cro
      to: .
    - from: LICENSE
      to: .
YAML

# The SBOM of the crates the binary is built from (cargo-cyclonedx, built
# once and cached by version outside the repository).
cyclonedx_version=0.5.9
cyclonedx=$HOME/.cache/cro-tools/cargo-cyclonedx-$cyclonedx_version
[ -x "$cyclonedx/bin/cargo-cyclonedx" ] ||
  cargo install cargo-cyclonedx --version "$cyclonedx_version" --locked --debug --root "$cyclonedx" >&2
# It writes one beside each Cargo.toml of the workspace; the root's lists
# every crate the binary is built from.
sbom=.release-sbom-$$
trap 'rm -rf "$stage"; find "$repo" -path "$repo/target" -prune -o -name "$sbom.json" -exec rm -f {} +' EXIT
(cd "$repo" && "$cyclonedx/bin/cargo-cyclonedx" cyclonedx --format json --spec-version 1.5 \
  --no-build-deps --override-filename "$sbom" >&2)
mv "$repo/$sbom.json" "$out/sbom.cdx.json"

{ echo "## [$version]"; echo "$notes"; } >"$out/RELEASE_NOTES.md"
(cd "$out" && sha256sum -- * >SHA256SUMS)
echo "release $version in ${out#"$repo"/}:"
(cd "$out" && ls -1)
echo "image: $repository:$version@$digest"
