#!/usr/bin/env bash
# earlier-operator.sh: builds the operator of an earlier commit (default:
# EARLIER_OPERATOR_COMMIT in versions.env) for the upgrade test
# (tests/upgrade/main.rs), and keeps it with that commit's CRDs in
# ~/.cache/cro-testenv/operator/<commit>/: bin/cloud-resource-operator,
# crds/ and deploy/ (the Helm upgrade test installs deploy/helm, whose
# files/ link into deploy/).
# Prints that directory. A second run finds it there; runs at once
# take turns (the second waits for the first's build).
#
# The commit's source comes from this clone's history (git archive; a
# shallow clone must fetch it first). It is built in target/earlier/, a
# target directory of its own: sharing target/ would hold cargo's lock on
# it while the suites run, and the two dependency graphs differ in features
# anyway. Without debug info, which the test does not need, and removed
# once the binary is kept.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck disable=SC1091
. "$repo/tests/testenv/versions.env"
commit=${1:-$EARLIER_OPERATOR_COMMIT}
cache=${CRO_TESTENV_CACHE:-$HOME/.cache/cro-testenv}
out=$cache/operator/$commit
log() { echo "earlier-operator: $*" >&2; }

mkdir -p "$cache/operator"
exec 9>"$cache/operator/.lock"
flock 9
if [ -x "$out/bin/cloud-resource-operator" ] && [ -d "$out/crds" ] && [ -d "$out/deploy/helm" ]; then
  echo "$out"
  exit 0
fi
git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null || {
  log "commit $commit is not in this clone's history (a shallow clone?): git fetch --unshallow, then run again"
  exit 1
}
src=$(mktemp -d "${TMPDIR:-/tmp}/cro-earlier.XXXXXX")
trap 'rm -rf "$src"' EXIT
git -C "$repo" archive "$commit" | tar -x -C "$src"
log "building $commit in target/earlier/"
started=$SECONDS
CARGO_TARGET_DIR="$repo/target/earlier" CARGO_PROFILE_DEV_DEBUG=0 CARGO_INCREMENTAL=0 \
  cargo build --locked --quiet --manifest-path "$src/Cargo.toml" --bin cloud-resource-operator >&2
rm -rf "$out.tmp"
mkdir -p "$out.tmp/bin"
cp "$repo/target/earlier/debug/cloud-resource-operator" "$out.tmp/bin/"
cp -r "$src/crds" "$out.tmp/crds"
cp -r "$src/deploy" "$out.tmp/deploy"
rm -rf "$out"
mv "$out.tmp" "$out"
# The binary is kept above; its build tree (gigabytes) is not needed again.
rm -rf "$repo/target/earlier"
log "built $commit in $((SECONDS - started)) s into $out"
echo "$out"
