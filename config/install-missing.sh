#!/usr/bin/env bash
# install-missing.sh NAMESPACE: creates each configuration ConfigMap of
# config/ in NAMESPACE where none of its name exists, and leaves every one
# that exists exactly as it is: a platform engineer's edited tiers are
# never overwritten by the samples. Says what it created and what it left.
set -euo pipefail
ns=${1:?usage: $0 NAMESPACE}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for file in "$here"/cloud-resource*.yaml; do
  name=$(kubectl create --dry-run=client -f "$file" -o name)
  if kubectl -n "$ns" get "$name" >/dev/null 2>&1; then
    echo "configuration: left $ns $name as it is (it exists)"
  else
    kubectl -n "$ns" create -f "$file" >/dev/null
    echo "configuration: created $ns $name from config/$(basename "$file")"
  fi
done
