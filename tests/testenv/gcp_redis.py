"""Memorystore for Redis (redis v1), as far as the operator's Redis needs it,
kept as the API reference says:

- instances.create takes `instanceId` and an Instance; the ID is 1 to 40
  lowercase letters, digits and hyphens starting with a letter; the
  instance is CREATING, then READY when its long-running operation is
  done; an ID in use is refused 409 ALREADY_EXISTS;
- PRIVATE_SERVICE_ACCESS needs a Service Networking connection of the
  `authorizedNetwork`, and `reservedIpRange` one of its ranges: the host is
  taken from it, the port is 6379;
- instances.patch changes the fields `updateMask` names (snake_case or
  camelCase), only those the reference lets it (display name, labels,
  memory, Redis configs, replicas, maintenance policy, ...), while the
  instance is READY (UPDATING meanwhile); instances.upgrade moves
  `redisVersion` up, never down; one operation at a time per instance;
- instances.delete: DELETING, then gone.

Every request and answer is held to the discovery document by
gcp_server.py. The words of refusals Google does not publish are this
file's.
"""

import re
import time
import uuid

from gcp_common import GoogleError, invalid, now_text
from gcp_network import network_key

VERSIONS = ["REDIS_3_2", "REDIS_4_0", "REDIS_5_0", "REDIS_6_X", "REDIS_7_0", "REDIS_7_2"]
PATCHABLE = {"display_name", "labels", "memory_size_gb", "redis_configs", "replica_count",
             "maintenance_policy", "persistence_config", "read_replicas_mode", "secondary_ip_range",
             "auth_enabled"}


def snake(path):
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), path)


def camel(path):
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), path)


class Memorystore:
    def __init__(self, delay, net):
        self.delay, self.net = delay, net
        self.instances = {}    # (project, location, id) -> instance
        self.operations = {}   # name -> operation
        self.busy = {}         # instance key -> operation name

    def settle(self):
        t = time.time()
        for name, op in self.operations.items():
            if not op["done"] and t >= op["_done_at"]:
                op.pop("_apply")()
                op["done"] = True
                op["metadata"]["endTime"] = now_text()
                self.busy = {k: v for k, v in self.busy.items() if v != name}

    def _operation(self, key, verb, apply):
        project, location, iid = key
        name = f"projects/{project}/locations/{location}/operations/operation-{int(time.time() * 1000)}-" \
               f"{uuid.uuid4().hex[:12]}"
        target = f"projects/{project}/locations/{location}/instances/{iid}"
        op = {"name": name, "done": False, "_done_at": time.time() + self.delay,
              "metadata": {"@type": "type.googleapis.com/google.cloud.redis.v1.OperationMetadata",
                           "createTime": now_text(), "target": target, "verb": verb, "apiVersion": "v1"}}

        def finish():
            apply()
            inst = self.instances.get(key)
            if inst is not None:
                op["response"] = {"@type": "type.googleapis.com/google.cloud.redis.v1.Instance",
                                  **{k: v for k, v in inst.items() if not k.startswith("_")}}
        op["_apply"] = finish
        self.operations[name] = op
        self.busy[key] = name
        return op

    def _found(self, p):
        key = (p["projectsId"], p["locationsId"], p["instancesId"])
        inst = self.instances.get(key)
        if inst is None:
            raise GoogleError(404, "NOT_FOUND", "notFound",
                              f"Resource 'projects/{key[0]}/locations/{key[1]}/instances/{key[2]}' was not found")
        return key, inst

    def _ready(self, key, inst):
        if key in self.busy or inst["state"] != "READY":
            raise GoogleError(400, "FAILED_PRECONDITION", "failedPrecondition",
                              f"The instance is {inst['state']}; another operation is in progress.")

    def create(self, p, body):
        key = (p["projectsId"], p["locationsId"], p.get("instanceId", ""))
        if not re.fullmatch(r"[a-z][a-z0-9-]{0,39}", key[2]) or key[2].endswith("-"):
            raise invalid(f"instanceId {key[2]!r}: 1 to 40 lowercase letters, digits and hyphens, "
                          "starting with a letter and not ending with a hyphen.")
        if key in self.instances:
            raise GoogleError(409, "ALREADY_EXISTS", "alreadyExists",
                              f"Resource 'projects/{key[0]}/locations/{key[1]}/instances/{key[2]}' already exists")
        tier, memory = body.get("tier"), body.get("memorySizeGb")
        if tier not in ("BASIC", "STANDARD_HA"):
            raise invalid("tier: BASIC or STANDARD_HA is required.")
        if not isinstance(memory, int) or not 1 <= memory <= 300:
            raise invalid("memorySizeGb: 1 to 300 GB is required.")
        version = body.get("redisVersion") or "REDIS_7_0"
        if version not in VERSIONS:
            raise invalid(f"redisVersion {version!r} is not supported.")
        host = self._host(key, body)
        inst = {**body, "name": f"projects/{key[0]}/locations/{key[1]}/instances/{key[2]}",
                "redisVersion": version, "state": "CREATING", "createTime": now_text(),
                "host": host, "port": 6379, "currentLocationId": key[1] + "-a", "locationId": key[1] + "-a",
                "persistenceIamIdentity": f"serviceAccount:service-1@cloud-redis.iam.gserviceaccount.com"}
        self.instances[key] = inst
        return self._operation(key, "create", lambda: inst.update(state="READY"))

    def _host(self, key, body):
        if body.get("connectMode", "DIRECT_PEERING") != "PRIVATE_SERVICE_ACCESS":
            return f"10.200.{len(self.instances) % 250}.4"
        network = network_key(body.get("authorizedNetwork"))
        connection = self.net.connections.get(network)
        wanted = body.get("reservedIpRange")
        if connection is None or (wanted and wanted not in connection["reservedPeeringRanges"]):
            raise invalid(f"Invalid authorized network {body.get('authorizedNetwork')!r}: private service access "
                          "is not set up on it (no Service Networking connection with the reserved range).")
        address = self.net.addresses[(network[0], wanted or connection["reservedPeeringRanges"][0])]["address"]
        return f"{address.rsplit('.', 2)[0]}.{128 + len(self.instances) % 120}.4"

    def get(self, p):
        return self._found(p)[1]

    def list(self, p):
        items = [i for (proj, loc, _), i in self.instances.items()
                 if proj == p["projectsId"] and loc in (p["locationsId"], "-")]
        return {"instances": items} if items else {}

    def patch(self, p, body):
        key, inst = self._found(p)
        self._ready(key, inst)
        paths = [x for x in (p.get("updateMask") or "").split(",") if x]
        if not paths:
            raise invalid("updateMask: at least one path is required.")
        for path in paths:
            if snake(path) not in PATCHABLE:
                raise invalid(f"updateMask: {path!r} cannot be updated.")
        memory = body.get("memorySizeGb")
        if "memory_size_gb" in map(snake, paths) and (not isinstance(memory, int) or not 1 <= memory <= 300):
            raise invalid("memorySizeGb: 1 to 300 GB.")
        changes = {camel(snake(path)): body.get(camel(snake(path))) for path in paths}
        inst["state"] = "UPDATING"

        def apply():
            for k, v in changes.items():
                if v is None:
                    inst.pop(k, None)
                else:
                    inst[k] = v
            inst["state"] = "READY"
        return self._operation(key, "update", apply)

    def upgrade(self, p, body):
        key, inst = self._found(p)
        self._ready(key, inst)
        want, have = body.get("redisVersion"), inst["redisVersion"]
        if want not in VERSIONS or VERSIONS.index(want) <= VERSIONS.index(have):
            raise invalid(f"redisVersion {want!r}: an instance of {have} upgrades to a later version only.")
        inst["state"] = "UPDATING"
        return self._operation(key, "upgrade", lambda: inst.update(state="READY", redisVersion=want))

    def delete(self, p):
        key, inst = self._found(p)
        if key in self.busy and inst["state"] != "READY":
            raise GoogleError(400, "FAILED_PRECONDITION", "failedPrecondition",
                              f"The instance is {inst['state']}; another operation is in progress.")
        inst["state"] = "DELETING"
        return self._operation(key, "delete", lambda: self.instances.pop(key, None))

    def operation(self, p):
        name = f"projects/{p['projectsId']}/locations/{p['locationsId']}/operations/{p['operationsId']}"
        op = self.operations.get(name)
        if op is None:
            raise GoogleError(404, "NOT_FOUND", "notFound", f"Operation '{name}' was not found")
        return op


HANDLERS = {
    "redis.projects.locations.instances.create": lambda r, p, b: r.create(p, b),
    "redis.projects.locations.instances.get": lambda r, p, b: r.get(p),
    "redis.projects.locations.instances.list": lambda r, p, b: r.list(p),
    "redis.projects.locations.instances.patch": lambda r, p, b: r.patch(p, b),
    "redis.projects.locations.instances.upgrade": lambda r, p, b: r.upgrade(p, b),
    "redis.projects.locations.instances.delete": lambda r, p, b: r.delete(p),
    "redis.projects.locations.operations.get": lambda r, p, b: r.operation(p),
}
