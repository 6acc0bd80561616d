#!/bin/sh
# Stands in for `run-postgresql` of registry.redhat.io/rhscl/postgresql-13-rhel7,
# the image the Go operator's in-cluster Postgres runs, held to the
# contract of its sources (sclorg/postgresql-container, 13/root/usr/bin/
# run-postgresql and container-scripts/postgresql/common.sh):
# - POSTGRESQL_USER, POSTGRESQL_PASSWORD and POSTGRESQL_DATABASE, all three
#   required; the user is created without superuser rights (`createuser`)
#   and owns the database (`createdb --owner`); its password is set again
#   on every start (`set_passwords`);
# - the cluster in $HOME/data/userdata (HOME /var/lib/pgsql, the volume at
#   /var/lib/pgsql/data), made by initdb's defaults (trust on the local
#   socket and 127.0.0.1, which the Go operator's readiness probe relies
#   on) plus `host all all all md5` (`initialize_database`);
# - runs as whatever uid the pod gives (the image's 26), with a passwd
#   entry from nss_wrapper (`generate_passwd_file`).
set -eu
: "${POSTGRESQL_USER:?POSTGRESQL_USER, POSTGRESQL_PASSWORD and POSTGRESQL_DATABASE are required}"
: "${POSTGRESQL_PASSWORD:?POSTGRESQL_USER, POSTGRESQL_PASSWORD and POSTGRESQL_DATABASE are required}"
: "${POSTGRESQL_DATABASE:?POSTGRESQL_USER, POSTGRESQL_PASSWORD and POSTGRESQL_DATABASE are required}"
HOME=/var/lib/pgsql
PGDATA=$HOME/data/userdata
export HOME PGDATA

passwd=$(mktemp)
printf 'postgres:x:%s:%s:PostgreSQL Server:%s:/bin/sh\n' "$(id -u)" "$(id -g)" "$HOME" >"$passwd"
LD_PRELOAD=$(ls /usr/lib/*/libnss_wrapper.so /usr/lib/libnss_wrapper.so 2>/dev/null | head -n 1)
NSS_WRAPPER_PASSWD=$passwd
NSS_WRAPPER_GROUP=/etc/group
export LD_PRELOAD NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP

quoted() { printf '%s' "$1" | sed "s/'/''/g"; }
ident() { printf '%s' "$1" | sed 's/"/""/g'; }
single() { postgres --single -D "$PGDATA" -j postgres >/dev/null; }

mkdir -p "$PGDATA"
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  initdb -U postgres -E UTF8 --locale=C.UTF-8
  printf '\n# Allow connections from all hosts.\nhost all all all md5\n' >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  echo "CREATE ROLE \"$(ident "$POSTGRESQL_USER")\" LOGIN;" | single
  echo "CREATE DATABASE \"$(ident "$POSTGRESQL_DATABASE")\" OWNER \"$(ident "$POSTGRESQL_USER")\";" | single
fi
echo "ALTER USER \"$(ident "$POSTGRESQL_USER")\" WITH ENCRYPTED PASSWORD '$(quoted "$POSTGRESQL_PASSWORD")';" | single
unset POSTGRESQL_USER POSTGRESQL_PASSWORD POSTGRESQL_DATABASE
exec postgres -D "$PGDATA"
