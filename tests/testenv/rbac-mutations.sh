#!/usr/bin/env bash
# Shows every rule of deploy/rbac is needed: removes each rule in turn and
# runs the RBAC test, which must fail every time. Restores the files after
# each run (and on interrupt). Needs the test environment (make testenv-up).
#   tests/testenv/rbac-mutations.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
set -a; . target/testenv/env.sh; set +a
cargo test --quiet --test integration --no-run
test=deploy::the_operator_needs_every_rule_of_its_rbac_and_nothing_more
survivors=0
for file in deploy/rbac/cluster_role.yaml deploy/rbac/leader_election_role.yaml; do
  cp "$file" "$file.orig"
  trap 'mv -f "$file.orig" "$file"' EXIT INT TERM
  rules=$(grep -c '^  - apiGroups' "$file.orig")
  for n in $(seq 1 "$rules"); do
    # Drop the n-th "  - apiGroups" item and its indented lines.
    awk -v n="$n" '/^  - apiGroups/ {i++; skip = (i == n); if (skip) next}
                   skip && /^    / {next} {skip = 0; print}' "$file.orig" >"$file"
    what=$(awk -v n="$n" '/^  - apiGroups/ {i++} i == n && /resources:/ {print; exit}' "$file.orig" | sed 's/^ *//')
    if cargo test --quiet --test integration -- --exact "$test" >/dev/null 2>&1; then
      echo "NOT NEEDED: $file rule $n ($what): the test passed without it"; survivors=$((survivors + 1))
    else
      echo "needed:     $file rule $n ($what)"
    fi
  done
  mv -f "$file.orig" "$file"; trap - EXIT INT TERM
done
[ "$survivors" = 0 ]
