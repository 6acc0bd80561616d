#!/bin/sh
# Renders one of these policies for an install: every <NAME> placeholder
# replaced by the NAME=VALUE given, TAG_KEY_PREFIX=... (the operator's
# --tag-key-prefix) replacing the default "integreatly.org/" of the tag
# keys the conditions read. Refuses to print a policy with a placeholder
# left, so a policy is never created with a condition no resource meets.
#
#   deploy/aws/render.sh deploy/aws/operator-policy.json \
#     CLUSTER_ID=mycluster-x7k2p ACCOUNT_ID=123456789012 > policy.json
set -eu
[ $# -ge 1 ] || { echo "usage: $0 POLICY.json NAME=VALUE..." >&2; exit 2; }
file=$1
shift
script=
for pair in "$@"; do
  name=${pair%%=*}
  value=${pair#*=}
  case $name in
    '' | *[!A-Z_]*) echo "$0: '$pair' is not NAME=VALUE (NAME in capitals, e.g. CLUSTER_ID=...)" >&2; exit 2 ;;
  esac
  case $value in
    '' | *[!A-Za-z0-9._:/-]*) echo "$0: the value of $name ('$value') may hold only letters, digits and . _ : / -" >&2; exit 2 ;;
  esac
  if [ "$name" = TAG_KEY_PREFIX ]; then
    script="$script s|Tag/integreatly\\.org/|Tag/$value|g;"
  else
    script="$script s|<$name>|$value|g;"
  fi
done
out=$(sed -e "$script" "$file")
left=$(printf '%s\n' "$out" | grep -o '<[A-Z_]*>' | sort -u | tr '\n' ' ' || true)
if [ -n "$left" ]; then
  echo "$0: $file still has $left; give each as NAME=VALUE" >&2
  exit 1
fi
printf '%s\n' "$out"
