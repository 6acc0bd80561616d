"""Compute Engine's networks, subnetworks, global addresses and global
operations, and Service Networking's connections, as far as a cluster's
private services access needs them (the Go operator's
cluster_network_provider.go), kept as the APIs' references say:

- networks and subnetworks are made with their inserts (as the OpenShift
  installer makes the cluster's), and listed with the `name = "<glob>"`
  filter the Go operator uses;
- a global address with purpose VPC_PEERING is INTERNAL, on a network that
  exists, RESERVING until its operation is DONE, then RESERVED; a name is
  refused while it exists (409 alreadyExists); one a connection uses is
  not deleted (400 resourceInUseByAnotherResource);
- a Service Networking connection names the consumer network and reserved
  ranges of that network; when its operation is done the network has the
  peering `servicenetworking-googleapis-com`; one connection per network
  (another create is refused); deleting it is refused while a Cloud SQL or
  Memorystore instance uses it, and `removePeering` removes the peering.

Every request and answer is held to the discovery documents by
gcp_server.py. The words of refusals Google does not publish are this
file's.
"""

import fnmatch
import random
import re
import time
import uuid

from gcp_common import GoogleError, invalid, now_text

SERVICE = "servicenetworking.googleapis.com"
PEERING = "servicenetworking-googleapis-com"
COMPUTE = "https://www.googleapis.com/compute/v1/"


def not_found(what):
    return GoogleError(404, "NOT_FOUND", "notFound", f"The resource '{what}' was not found")


def network_key(text):
    """(project, name) of a network named by URL or by path."""
    m = re.search(r"projects/([^/]+)/global/networks/([^/]+)$", text or "")
    return (m.group(1), m.group(2)) if m else None


class Network:
    def __init__(self, delay, sql):
        self.delay, self.sql = delay, sql
        self.networks, self.subnetworks, self.addresses = {}, {}, {}
        self.connections = {}   # (project, network) -> connection
        self.operations = {}    # compute: (project, name); servicenetworking: name -> operation

    def settle(self):
        t = time.time()
        for op in self.operations.values():
            if op.get("status") == "DONE" or op.get("done"):
                continue
            if t >= op["_done_at"]:
                op.pop("_apply")()
                if "status" in op:
                    op.update(status="DONE", progress=100, endTime=now_text())
                else:
                    op["done"] = True
            elif "status" in op and t >= op["_done_at"] - self.delay / 2:
                op.update(status="RUNNING", progress=50, startTime=now_text())

    # --- compute ----------------------------------------------------------------

    def _compute_op(self, project, kind, target, apply):
        name = f"operation-{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}"
        op = {"kind": "compute#operation", "id": str(random.randrange(10**18, 10**19)), "name": name,
              "operationType": kind, "targetLink": target, "status": "PENDING", "progress": 0,
              "insertTime": now_text(), "user": "cloud-resource-operator@p1.iam.gserviceaccount.com",
              "selfLink": f"{COMPUTE}projects/{project}/global/operations/{name}",
              "_done_at": time.time() + self.delay, "_apply": apply}
        self.operations[(project, name)] = op
        return op

    def _link(self, project, path):
        return f"{COMPUTE}projects/{project}/{path}"

    def network_insert(self, p, body):
        project, name = p["project"], body.get("name", "")
        if (project, name) in self.networks:
            raise GoogleError(409, "ALREADY_EXISTS", "alreadyExists",
                              f"The resource 'projects/{project}/global/networks/{name}' already exists")
        net = {**body, "kind": "compute#network", "id": str(random.randrange(10**18, 10**19)),
               "creationTimestamp": now_text(), "selfLink": self._link(project, f"global/networks/{name}"),
               "subnetworks": [], "peerings": []}
        self.networks[(project, name)] = net
        return self._compute_op(project, "insert", net["selfLink"], lambda: None)

    def network_get(self, p):
        net = self.networks.get((p["project"], p["network"]))
        if net is None:
            raise not_found(f"projects/{p['project']}/global/networks/{p['network']}")
        return net

    def network_list(self, p):
        flt = p.get("filter", "")
        m = re.fullmatch(r'\s*name\s*=\s*"([^"]*)"\s*', flt) if flt else None
        if flt and not m:
            raise invalid(f"Invalid value for field 'filter': '{flt}'. This stand-in reads name = \"<glob>\".")
        items = [n for (proj, name), n in self.networks.items()
                 if proj == p["project"] and (m is None or fnmatch.fnmatchcase(name, m.group(1)))]
        out = {"kind": "compute#networkList", "id": f"projects/{p['project']}/global/networks",
               "selfLink": self._link(p["project"], "global/networks")}
        return {**out, "items": items} if items else out

    def remove_peering(self, p, body):
        net = self.network_get(p)
        name = body.get("name", "")
        if not any(x["name"] == name for x in net["peerings"]):
            raise invalid(f"There is no peering named '{name}' in network '{net['name']}'.")
        net["peerings"] = [x for x in net["peerings"] if x["name"] != name]
        return self._compute_op(p["project"], "removePeering", net["selfLink"], lambda: None)

    def subnetwork_insert(self, p, body):
        project, region, name = p["project"], p["region"], body.get("name", "")
        key = network_key(body.get("network"))
        if key not in self.networks:
            raise invalid(f"Invalid value for field 'resource.network': '{body.get('network')}'.")
        if (project, region, name) in self.subnetworks:
            raise GoogleError(409, "ALREADY_EXISTS", "alreadyExists",
                              f"The resource 'projects/{project}/regions/{region}/subnetworks/{name}' already exists")
        link = self._link(project, f"regions/{region}/subnetworks/{name}")
        sub = {**body, "kind": "compute#subnetwork", "id": str(random.randrange(10**18, 10**19)),
               "region": self._link(project, f"regions/{region}"), "selfLink": link,
               "network": self.networks[key]["selfLink"], "creationTimestamp": now_text()}
        self.subnetworks[(project, region, name)] = sub
        self.networks[key]["subnetworks"].append(link)
        return self._compute_op(project, "insert", link, lambda: None)

    def subnetwork_get(self, p):
        sub = self.subnetworks.get((p["project"], p["region"], p["subnetwork"]))
        if sub is None:
            raise not_found(f"projects/{p['project']}/regions/{p['region']}/subnetworks/{p['subnetwork']}")
        return sub

    def address_insert(self, p, body):
        project, name = p["project"], body.get("name", "")
        if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 63:
            raise invalid(f"Invalid value for field 'resource.name': '{name}'. Must be a match of regex "
                          "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'")
        if (project, name) in self.addresses:
            raise GoogleError(409, "ALREADY_EXISTS", "alreadyExists",
                              f"The resource 'projects/{project}/global/addresses/{name}' already exists")
        if body.get("purpose") == "VPC_PEERING":
            if body.get("addressType") != "INTERNAL":
                raise invalid("Invalid value for field 'resource.addressType': a VPC_PEERING range is INTERNAL.")
            if network_key(body.get("network")) not in self.networks:
                raise invalid(f"Invalid value for field 'resource.network': '{body.get('network')}'.")
            prefix = body.get("prefixLength")
            if not isinstance(prefix, int) or not 8 <= prefix <= 29:
                raise invalid("Invalid value for field 'resource.prefixLength': a VPC_PEERING range is /8 to /29.")
        address = body.get("address") or f"10.{100 + len(self.addresses) % 100}.0.0"
        link = self._link(project, f"global/addresses/{name}")
        entry = {**body, "kind": "compute#address", "id": str(random.randrange(10**18, 10**19)),
                 "address": address, "status": "RESERVING", "creationTimestamp": now_text(), "selfLink": link}
        if "network" in body:
            entry["network"] = self.networks[network_key(body["network"])]["selfLink"]
        self.addresses[(project, name)] = entry
        return self._compute_op(project, "insert", link, lambda: entry.update(status="RESERVED"))

    def address_get(self, p):
        a = self.addresses.get((p["project"], p["address"]))
        if a is None:
            raise not_found(f"projects/{p['project']}/global/addresses/{p['address']}")
        return a

    def address_delete(self, p):
        a = self.address_get(p)
        for (project, network), c in self.connections.items():
            if project == p["project"] and p["address"] in c["reservedPeeringRanges"]:
                raise GoogleError(400, "FAILED_PRECONDITION", "resourceInUseByAnotherResource",
                                  f"The address resource 'projects/{project}/global/addresses/{p['address']}' is "
                                  f"already being used by 'projects/{project}/global/networks/{network}'")
        del self.addresses[(p["project"], p["address"])]
        return self._compute_op(p["project"], "delete", a["selfLink"], lambda: None)

    def compute_operation(self, p):
        op = self.operations.get((p["project"], p["operation"]))
        if op is None:
            raise not_found(f"projects/{p['project']}/global/operations/{p['operation']}")
        return op

    # --- servicenetworking -------------------------------------------------------

    def _sn_op(self, apply, response):
        name = f"operations/pssn.p24-{uuid.uuid4().hex}"
        op = {"name": name, "done": False, "_done_at": time.time() + self.delay,
              "_apply": lambda: (apply(), self.operations[name].update(response=response))}
        self.operations[name] = op
        return op

    def _service(self, p):
        if p.get("servicesId") != SERVICE:
            raise not_found(f"services/{p.get('servicesId')}")

    def connections_list(self, p):
        self._service(p)
        key = network_key(p.get("network"))
        if key is None:
            raise invalid("network: required, as projects/{project}/global/networks/{network}.")
        c = self.connections.get(key)
        return {"connections": [c]} if c else {}

    def connection_create(self, p, body):
        self._service(p)
        key = network_key(body.get("network"))
        if key not in self.networks:
            raise invalid(f"Invalid network: '{body.get('network')}' does not exist.")
        if key in self.connections:
            raise GoogleError(400, "FAILED_PRECONDITION", "failedPrecondition",
                              "Cannot modify allocated ranges in CreateConnection. Please use UpdateConnection.")
        if any(not op.get("done") and op.get("_network") == key for op in self.operations.values()
               if "status" not in op):
            raise GoogleError(400, "FAILED_PRECONDITION", "failedPrecondition",
                              "Another operation on this network's connection is still in progress.")
        ranges = body.get("reservedPeeringRanges") or []
        for r in ranges:
            a = self.addresses.get((key[0], r))
            if a is None or a.get("purpose") != "VPC_PEERING" or network_key(a.get("network")) != key:
                raise invalid(f"Allocated IP range '{r}' not found in network.")
            if a["status"] == "RESERVING":
                raise invalid(f"Allocated IP range '{r}' is not ready yet.")
        connection = {"network": body["network"], "reservedPeeringRanges": ranges, "peering": PEERING,
                      "service": f"services/{SERVICE}"}
        net = self.networks[key]

        def connect():
            self.connections[key] = connection
            net["peerings"] = [x for x in net["peerings"] if x["name"] != PEERING] + [{
                "name": PEERING, "network": f"{COMPUTE}projects/tenant-{abs(hash(key)) % 10**6}/global/networks/"
                                            "servicenetworking",
                "state": "ACTIVE", "stateDetails": f"[{now_text()}]: Connected.", "autoCreateRoutes": True,
                "exchangeSubnetRoutes": True}]
        op = self._sn_op(connect, {"@type": "type.googleapis.com/google.cloud.servicenetworking.v1.Connection",
                                   **connection})
        op["_network"] = key
        return op

    def connection_delete(self, p, body):
        self._service(p)
        key = network_key(body.get("consumerNetwork"))
        if p.get("connectionsId") != PEERING or key not in self.connections:
            raise not_found(f"services/{SERVICE}/connections/{p.get('connectionsId')}")
        users = [network_key(((inst.get("settings") or {}).get("ipConfiguration") or {}).get("privateNetwork"))
                 for inst in self.sql.instances.values()]
        users += [network_key(inst.get("authorizedNetwork")) for inst in self.sql.redis.instances.values()
                  if inst.get("connectMode") == "PRIVATE_SERVICE_ACCESS"]
        for used in users:
            if used == key:
                raise GoogleError(400, "FAILED_PRECONDITION", "failedPrecondition",
                                  "Failed to delete connection; Producer services (e.g. CloudSQL, Cloud Memstore, "
                                  "etc.) are still using this connection.")

        def disconnect():
            self.connections.pop(key, None)
            net = self.networks.get(key)
            if net:
                net["peerings"] = [x for x in net["peerings"] if x["name"] != PEERING]
        return self._sn_op(disconnect, {"@type": "type.googleapis.com/google.protobuf.Empty"})

    def sn_operation(self, p):
        op = self.operations.get(f"operations/{p['operationsId']}")
        if op is None:
            raise not_found(f"operations/{p['operationsId']}")
        return op

    # --- Cloud SQL's use of it ------------------------------------------------------

    def private_address(self, project, instance, settings):
        """The private IP of a new Cloud SQL instance, or its refusal."""
        ip = (settings or {}).get("ipConfiguration") or {}
        key = network_key(ip.get("privateNetwork"))
        if key is None:
            return None
        c = self.connections.get(key)
        wanted = ip.get("allocatedIpRange")
        if c is None or (wanted and wanted not in c["reservedPeeringRanges"]):
            raise invalid(f"Invalid request: Incorrect Service Networking config for instance: "
                          f"{project}:{instance}:SERVICE_NETWORKING_NOT_ENABLED.")
        base = self.addresses[(key[0], wanted or c["reservedPeeringRanges"][0])]["address"].rsplit(".", 2)[0]
        return f"{base}.{len(self.sql.instances) % 250}.3"


HANDLERS = {
    "compute.networks.insert": lambda n, p, b: n.network_insert(p, b),
    "compute.networks.get": lambda n, p, b: n.network_get(p),
    "compute.networks.list": lambda n, p, b: n.network_list(p),
    "compute.networks.removePeering": lambda n, p, b: n.remove_peering(p, b),
    "compute.subnetworks.insert": lambda n, p, b: n.subnetwork_insert(p, b),
    "compute.subnetworks.get": lambda n, p, b: n.subnetwork_get(p),
    "compute.globalAddresses.insert": lambda n, p, b: n.address_insert(p, b),
    "compute.globalAddresses.get": lambda n, p, b: n.address_get(p),
    "compute.globalAddresses.delete": lambda n, p, b: n.address_delete(p),
    "compute.globalOperations.get": lambda n, p, b: n.compute_operation(p),
    "servicenetworking.services.connections.list": lambda n, p, b: n.connections_list(p),
    "servicenetworking.services.connections.create": lambda n, p, b: n.connection_create(p, b),
    "servicenetworking.services.connections.deleteConnection": lambda n, p, b: n.connection_delete(p, b),
    "servicenetworking.operations.get": lambda n, p, b: n.sn_operation(p),
}
