#!/bin/sh
# The part of the official postgres image's docker-entrypoint.sh that the
# operator's in-cluster Deployment relies on: with an empty $PGDATA it
# creates a cluster whose superuser is $POSTGRES_USER with password
# $POSTGRES_PASSWORD (SCRAM-SHA-256 over TCP from anywhere, trust on the
# local socket) and a database $POSTGRES_DB, then runs the server listening
# on every address. Runs as whatever user the pod says (the operator: 999,
# or the first UID of an OpenShift namespace's range).
set -eu

# initdb and single-user postgres look the running user up: a UID with no
# passwd entry (as OpenShift assigns) gets one from nss_wrapper, as the
# official image's entrypoint does.
as_known_user() {
  if getent passwd "$(id -u)" >/dev/null 2>&1; then
    "$@"
    return
  fi
  wrapper=$(ls /usr/lib/*/libnss_wrapper.so /usr/lib/libnss_wrapper.so 2>/dev/null | head -n 1)
  passwd=$(mktemp)
  group=$(mktemp)
  printf 'postgres:x:%s:%s:PostgreSQL:%s:/bin/false\n' "$(id -u)" "$(id -g)" "$PGDATA" >"$passwd"
  printf 'postgres:x:%s:\n' "$(id -g)" >"$group"
  LD_PRELOAD=$wrapper NSS_WRAPPER_PASSWD=$passwd NSS_WRAPPER_GROUP=$group "$@"
  rm -f "$passwd" "$group"
}
if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
  set -- postgres "$@"
fi
if [ "$1" = postgres ]; then
  : "${PGDATA:=/var/lib/postgresql/data}"
  : "${POSTGRES_USER:=postgres}"
  : "${POSTGRES_DB:=$POSTGRES_USER}"
  export PGDATA
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
      echo "error: database is uninitialized and POSTGRES_PASSWORD is not set" >&2
      exit 1
    fi
    mkdir -p "$PGDATA"
    chmod 700 "$PGDATA"
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    as_known_user initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
      --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    if [ "$POSTGRES_DB" != postgres ]; then
      db=$(printf '%s' "$POSTGRES_DB" | sed 's/"/""/g')
      echo "CREATE DATABASE \"$db\";" | as_known_user postgres --single -D "$PGDATA" -j postgres >/dev/null
    fi
    echo "PostgreSQL init process complete; ready for start up."
  fi
fi
exec "$@"
