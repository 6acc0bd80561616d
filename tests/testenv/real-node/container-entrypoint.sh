#!/bin/sh
# Stands in for `container-entrypoint` of the Red Hat images
# (registry.redhat.io/rhel9/redis-7), which the Go operator's Redis
# readiness probe calls: it runs its arguments.
exec "$@"
