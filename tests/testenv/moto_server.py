"""moto's server with realistic lifecycle transitions.

Stock moto creates RDS instances and ElastiCache replication groups
already `available`, never finishes deleting a replication group, and
ignores a final snapshot requested on delete. Real AWS takes minutes in
`creating`, `modifying` and `deleting`; the operator's in-progress paths
must be exercised. This launcher wraps the backends so that:

- a new RDS instance is `creating`, and a modified one `modifying`, for
  CRO_MOTO_TRANSITION_SECONDS (default 3) before `available`;
- an RDS instance tagged `cro-test/maintenance-window=held` keeps what AWS
  defers to the maintenance window (class, storage, engine version,
  Multi-AZ) in PendingModifiedValues unless a modify says ApplyImmediately,
  which then applies everything pending, as AWS does (no window ever comes:
  tests see exactly what was pulled forward); untagged instances apply every
  change at once, as stock moto;
- ModifyDBInstance's DBPortNumber moves the endpoint's port at once, as
  AWS does whatever ApplyImmediately says (stock moto ignores it);
- a new replication group is `creating` for that long, and a deleted one
  `deleting` for that long and then gone;
- DeleteReplicationGroup with FinalSnapshotIdentifier takes that snapshot;
- a replication group's members are cache clusters (nodes), holding the
  engine version and maintenance window AWS shows only there, gone with it,
  in zones of the group's region (stock moto says us-east-1a anywhere);
- ModifyReplicationGroup (missing from stock moto) changes the snapshot
  retention and window, node type and maintenance window, and leaves the
  group `modifying` for that long;
- CreateBucket puts the tags of its CreateBucketConfiguration on the new
  bucket, as S3 does since 2025 (stock moto reads only LocationConstraint);
- a DB or cache subnet group, a security group or a subnet that a database
  uses cannot be deleted (InvalidDBSubnetGroupStateFault,
  CacheSubnetGroupInUse, DependencyViolation), as AWS refuses (stock moto
  deletes them under the database).

An RDS instance or replication group tagged with the value
`cro-test-real-backend` answers at the real PostgreSQL / Redis of the test
environment (CRO_MOTO_REAL_POSTGRES, CRO_MOTO_REAL_REDIS): its master user
is created there with its password, as RDS does.

Two test hooks, for query-protocol services (RDS, ElastiCache, IAM, STS;
faults also for S3's CreateBucket, matched on its Bucket and Tags):

- every call is appended to CRO_MOTO_REQUEST_LOG (JSON lines: time,
  service, action, account, parameters), so tests can prove which calls
  the operator made, and made none of (e.g. no write during a migration);
- faults listed in the JSON file CRO_MOTO_FAULTS are returned instead of
  calling moto: `[{"id": "x", "service": "rds", "action": "CreateDBInstance",
  "match": "<text in the parameters>", "code": "InvalidParameterCombination",
  "message": "...", "status": 400, "times": 3, "every": 2}]` (`times`
  absent: always; `every` N: only every Nth matching call; action "*":
  every action of the service), as AWS renders query-protocol errors.

CloudWatch as today's SDKs speak it: the Smithy RPC v2 CBOR protocol
(`POST /service/<service>/operation/<operation>`, CBOR bodies), which
moto does not parse, is carried to moto's JSON 1.0 handler and its answer
back to CBOR, timestamps tagged as the protocol wants them.

Pending maintenance, which stock moto lacks: DescribePendingMaintenanceActions
(RDS) and DescribeUpdateActions (ElastiCache) answer what tests wrote in
the JSON file CRO_MOTO_MAINTENANCE, as AWS shapes it: `{"rds":
[{"ResourceIdentifier": "<arn>", "Action": "system-update", "Description":
"...", "AutoAppliedAfterDate": <unix>, "CurrentApplyDate": <unix>}],
"elasticache": [{"ReplicationGroupId": "...", "ServiceUpdateName": "...",
"ServiceUpdateStatus": "available", "UpdateActionStatus": "not-applied",
"ServiceUpdateRecommendedApplyByDate": <unix>, ...}]}`, filtered by the
call's parameters (one page: tests hold a few).

With IAM enforcement on (/moto-api/reset-auth), HeadBucket is authorized
by s3:ListBucket as in AWS, and signatures are not re-checked (see the
comment at the end).

Everything else is moto's own server (same flags: -H HOST -p PORT).
"""

import json
import sys
import threading
import time
import os
from xml.sax.saxutils import escape

from moto.elasticache.models import ElastiCacheBackend
from moto.elasticache.responses import ElastiCacheResponse
from moto.rds.models import DBInstance, RDSBackend
from moto.rds.responses import RDSResponse
import moto.server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import main

DELAY = float(os.environ.get("CRO_MOTO_TRANSITION_SECONDS", "3"))


def _settle(obj, status_attr="status"):
    """Moves a transitional status on once its deadline has passed."""
    until = getattr(obj, "_cro_until", None)
    if until is not None and time.time() >= until:
        setattr(obj, status_attr, obj._cro_then)
        obj._cro_until = None


def _transition(obj, now, then, status_attr="status"):
    setattr(obj, status_attr, now)
    obj._cro_then = then
    obj._cro_until = time.time() + DELAY


# --- RDS -------------------------------------------------------------------
_rds_create = RDSBackend.create_db_instance
_rds_describe = RDSBackend.describe_db_instances
_rds_modify = RDSBackend.modify_db_instance


def rds_create(self, *args, **kwargs):
    db = _rds_create(self, *args, **kwargs)
    _transition(db, "creating", "available")
    return db


def rds_describe(self, *args, **kwargs):
    for db in self.databases.values():
        _settle(db)
    return _rds_describe(self, *args, **kwargs)


# What AWS defers to the instance's maintenance window unless the request
# says ApplyImmediately (ModifyDBInstance in the RDS API reference).
WINDOW_PARAMS = ("DBInstanceClass", "AllocatedStorage", "EngineVersion", "MultiAZ")
HOLD_TAG = "cro-test/maintenance-window"


def _param(kwargs, name):
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    for key in (name, snake, snake.replace("d_b_", "db_")):
        if key in kwargs:
            return key
    return None


def _holds_changes(db):
    return any(t.get("Key") == HOLD_TAG and t.get("Value") == "held" for t in getattr(db, "tags", []) or [])


def rds_modify(self, db_instance_identifier, db_kwargs):
    db = self.describe_db_instances(db_instance_identifier)[0]
    if _holds_changes(db):
        key = _param(db_kwargs, "ApplyImmediately")
        immediately = key is not None and str(db_kwargs[key]).lower() == "true"
        pending = dict(getattr(db, "pending_modified_values", None) or {})
        if immediately:
            # AWS applies everything pending with the request.
            for name, value in pending.items():
                db_kwargs.setdefault(_param(db_kwargs, name) or name, value)
            pending = {}
        else:
            for name in WINDOW_PARAMS:
                key = _param(db_kwargs, name)
                if key is not None:
                    pending[name] = db_kwargs.pop(key)
        db.pending_modified_values = pending or None
    # Stock moto sets an attribute nothing reads; AWS moves the endpoint to
    # the new port at once, "regardless of the value of ApplyImmediately"
    # (DBPortNumber, ModifyDBInstance in the RDS API reference).
    key = _param(db_kwargs, "DBPortNumber")
    if key is not None:
        db.port = int(db_kwargs.pop(key))
    db = _rds_modify(self, db_instance_identifier, db_kwargs)
    _transition(db, "modifying", "available")
    return db


RDSBackend.create_db_instance = rds_create
RDSBackend.describe_db_instances = rds_describe
RDSBackend.modify_db_instance = rds_modify

# --- real servers behind marked instances ------------------------------------
# An RDS instance or replication group with a tag whose value is
# REAL_BACKEND_MARK (the operator's product-name tag, from the CR's
# productName label) answers at the test environment's real PostgreSQL or
# Redis, as RDS does: the master user exists with the master password, and
# a password change reaches the server.
REAL_BACKEND_MARK = "cro-test-real-backend"
REAL_POSTGRES = os.environ.get("CRO_MOTO_REAL_POSTGRES")
REAL_POSTGRES_PASSWORD = os.environ.get("CRO_MOTO_REAL_POSTGRES_PASSWORD", "")
REAL_REDIS = os.environ.get("CRO_MOTO_REAL_REDIS")
# A group with in-transit encryption and an AUTH token answers at the TLS
# Redis (whose own password is the PostgreSQL one), its token added as
# another password of the default user.
REAL_REDIS_TLS = os.environ.get("CRO_MOTO_REAL_REDIS_TLS")


def _marked(tags):
    return any((t.get("Value") if isinstance(t, dict) else None) == REAL_BACKEND_MARK for t in tags or [])


def _psql(sql):
    import subprocess

    host, port = REAL_POSTGRES.rsplit(":", 1)
    subprocess.run(["psql", "-q", "-h", host, "-p", port, "-U", "cro_admin", "-d", "postgres", "-c", sql],
                   env=dict(os.environ, PGPASSWORD=REAL_POSTGRES_PASSWORD, PGSSLMODE="disable"),
                   check=False, capture_output=True, timeout=30)


def _quoted(text, tag="$cro$"):
    return f"{tag}{text}{tag}"


def _real_master(db, password):
    user = '"' + db.master_username.replace('"', '""') + '"'
    _psql(f"CREATE ROLE {user} LOGIN CREATEDB CREATEROLE")
    _psql(f"ALTER ROLE {user} PASSWORD {_quoted(password)}")
    if db.db_name:
        _psql(f'CREATE DATABASE "{db.db_name}" OWNER {user}')


def _real_rds_create(self, db_kwargs):
    key = _param(db_kwargs, "MasterUserPassword")
    password = (db_kwargs.get(key) if key else None) or ""  # moto keeps it write-only
    db = rds_create(self, db_kwargs)
    if REAL_POSTGRES and _marked(db.tags):
        _real_master(db, password)
        db._cro_address, port = REAL_POSTGRES.rsplit(":", 1)
        db.port = int(port)
    return db


def _real_rds_modify(self, db_instance_identifier, db_kwargs):
    key = _param(db_kwargs, "MasterUserPassword")
    password = db_kwargs.get(key) if key else None
    db = rds_modify(self, db_instance_identifier, db_kwargs)
    if password and getattr(db, "_cro_address", None):
        _real_master(db, password)
    return db


_rds_address = DBInstance.address
DBInstance.address = property(lambda db: getattr(db, "_cro_address", None) or _rds_address.fget(db))
RDSBackend.create_db_instance = _real_rds_create
RDSBackend.modify_db_instance = _real_rds_modify

# --- ElastiCache -------------------------------------------------------------
_ec_create = ElastiCacheBackend.create_replication_group
_ec_create_cluster = ElastiCacheBackend.create_cache_cluster
_ec_describe = ElastiCacheBackend.describe_replication_groups
_ec_delete_response = ElastiCacheResponse.delete_replication_group


# What each member cache cluster (node) of a replication group holds and
# the group does not show: AWS reports a group's engine version and
# maintenance window, and where it runs (CacheSubnetGroupName,
# SecurityGroups), only on its nodes (DescribeCacheClusters).
NODE_DEFAULTS = {"engine_version": "7.1", "preferred_maintenance_window": "sun:05:00-sun:06:00"}


def ec_create(self, *args, **kwargs):
    group = _ec_create(self, *args, **kwargs)
    _transition(group, "creating", "available")
    # AWS places a group's nodes in its region's zones; stock moto names
    # us-east-1a and us-east-1b whatever the region.
    for node_group in group.node_groups:
        for member in node_group.get("node_group_members", []):
            zone = member.get("preferred_availability_zone") or ""
            if not zone.startswith(self.region_name):
                member["preferred_availability_zone"] = self.region_name + (zone[-1:] or "a")
    for member in group.member_clusters:
        if member in self.cache_clusters:
            continue
        node = {name: None for name in _ec_create_cluster.__code__.co_varnames[1:_ec_create_cluster.__code__.co_argcount]}
        node.update(cache_cluster_id=member, replication_group_id=group.replication_group_id, num_cache_nodes=1,
                    cache_node_type=group.cache_node_type, engine="redis", tags=[], preferred_availability_zones=[],
                    cache_subnet_group_name=kwargs.get("cache_subnet_group_name"),
                    cache_security_group_names=[], security_group_ids=list(kwargs.get("security_group_ids") or []),
                    snapshot_arns=[], preferred_outpost_arns=[],
                    log_delivery_configurations=[], cache_node_ids_to_remove=[], cache_node_ids_to_reboot=[],
                    engine_version=kwargs.get("engine_version") or NODE_DEFAULTS["engine_version"],
                    preferred_maintenance_window=kwargs.get("preferred_maintenance_window")
                    or NODE_DEFAULTS["preferred_maintenance_window"])
        _ec_create_cluster(self, **node)
        # DescribeCacheClusters' SecurityGroups: the VPC groups, active.
        self.cache_clusters[member].security_groups = [
            {"SecurityGroupId": g, "Status": "active"} for g in node["security_group_ids"]]
    return group


def _redis_tls_password(token):
    import subprocess

    host, port = REAL_REDIS_TLS.rsplit(":", 1)
    subprocess.run(["redis-cli", "--tls", "--insecure", "-h", host, "-p", port, "ACL", "SETUSER", "default", ">" + token],
                   env=dict(os.environ, REDISCLI_AUTH=REAL_POSTGRES_PASSWORD), check=False, capture_output=True, timeout=30)


def _real_ec_create(self, *args, **kwargs):
    group = ec_create(self, *args, **kwargs)
    encrypted = kwargs.get("transit_encryption_enabled") and kwargs.get("auth_token")
    if REAL_REDIS_TLS and encrypted and _marked(kwargs.get("tags")):
        _redis_tls_password(kwargs["auth_token"])
        host, port = REAL_REDIS_TLS.rsplit(":", 1)
        for node_group in group.node_groups:
            node_group["primary_endpoint_address"] = host
            node_group["port"] = int(port)
            node_group["primary_endpoint"] = {"address": host, "port": int(port)}
    elif REAL_REDIS and _marked(kwargs.get("tags")):
        host, port = REAL_REDIS.rsplit(":", 1)
        for node_group in group.node_groups:
            node_group["primary_endpoint_address"] = host
            node_group["port"] = int(port)
            node_group["primary_endpoint"] = {"address": host, "port": int(port)}
    return group


def ec_describe(self, *args, **kwargs):
    for group_id, group in list(self.replication_groups.items()):
        if group.status == "deleting" and time.time() >= group._cro_until:
            del self.replication_groups[group_id]
            for member in group.member_clusters:
                self.cache_clusters.pop(member, None)
        else:
            _settle(group)
    return _ec_describe(self, *args, **kwargs)


def ec_delete_response(self):
    group_id = self._get_param("ReplicationGroupId")
    final = self._get_param("FinalSnapshotIdentifier")
    if final and group_id in self.elasticache_backend.replication_groups:
        group = self.elasticache_backend.replication_groups[group_id]
        tags = self.elasticache_backend.tagging_service.list_tags_for_resource(group.arn).get("Tags", [])
        self.elasticache_backend.create_snapshot(final, group_id, None, None, tags)
    result = _ec_delete_response(self)
    group = self.elasticache_backend.replication_groups.get(group_id)
    if group is not None:
        _transition(group, "deleting", "deleting")
    return result


def ec_modify_response(self):
    """ModifyReplicationGroup, which stock moto lacks: the settings the
    operator changes, then `modifying` for a while, as AWS does."""
    from moto.core.responses import ActionResult

    group_id = self._get_param("ReplicationGroupId")
    group = self.elasticache_backend.describe_replication_groups(group_id)[0]
    retention = self._get_int_param("SnapshotRetentionLimit")
    if retention is not None:
        group.snapshot_retention_limit = retention
    for param, attr in (("SnapshotWindow", "snapshot_window"), ("CacheNodeType", "cache_node_type"),
                        ("PreferredMaintenanceWindow", "preferred_maintenance_window")):
        value = self._get_param(param)
        if value is not None:
            setattr(group, attr, value)
            for member in group.member_clusters:
                node = self.elasticache_backend.cache_clusters.get(member)
                if node is not None and hasattr(node, attr):
                    setattr(node, attr, value)
    _transition(group, "modifying", "available")
    return ActionResult({"ReplicationGroup": group})


def ec_delete_subnet_group_response(self):
    """DeleteCacheSubnetGroup, which stock moto lacks; refused while a
    replication group uses the group (`CacheSubnetGroupInUse`), as AWS does."""
    from moto.core.responses import EmptyResult
    from moto.elasticache.exceptions import CacheSubnetGroupNotFound

    name = self._get_param("CacheSubnetGroupName")
    backend = self.elasticache_backend
    if name not in backend.cache_subnet_groups:
        raise CacheSubnetGroupNotFound(name)
    users = [g for g, group in backend.replication_groups.items()
             if getattr(group, "cache_subnet_group_name", None) == name]
    if users:
        body = (
            "<ErrorResponse><Error><Type>Sender</Type><Code>CacheSubnetGroupInUse</Code>"
            f"<Message>Cache subnet group {escape(name)} is in use by {escape(users[0])}</Message>"
            "</Error><RequestId>cro-moto-shim</RequestId></ErrorResponse>"
        )
        return 400, {"Content-Type": "text/xml"}, body
    del backend.cache_subnet_groups[name]
    return EmptyResult()


def ec_modify_subnet_group_response(self):
    """ModifyCacheSubnetGroup, which stock moto lacks: the new subnets."""
    from moto.core.responses import ActionResult

    name = self._get_param("CacheSubnetGroupName")
    group = self.elasticache_backend.describe_cache_subnet_groups(name)[0]
    subnet_ids = self._get_param("SubnetIds", [])
    if subnet_ids:
        group.subnet_ids = subnet_ids
    return ActionResult({"CacheSubnetGroup": group})


def rds_delete_subnet_group(self, subnet_name):
    """Refused while an instance uses the group, as AWS does
    (`InvalidDBSubnetGroupStateFault`)."""
    from moto.rds.exceptions import RDSClientError

    for db in self.databases.values():
        if getattr(db, "_db_subnet_group_name", None) == subnet_name:
            raise RDSClientError("InvalidDBSubnetGroupStateFault",
                                 f"DB subnet group {subnet_name} is in use by {db.db_instance_identifier}")
    return _rds_delete_subnet_group(self, subnet_name)


_rds_delete_subnet_group = RDSBackend.delete_subnet_group
RDSBackend.delete_subnet_group = rds_delete_subnet_group
ElastiCacheResponse.delete_cache_subnet_group = ec_delete_subnet_group_response
ElastiCacheResponse.modify_cache_subnet_group = ec_modify_subnet_group_response
ElastiCacheBackend.create_replication_group = _real_ec_create
ElastiCacheBackend.describe_replication_groups = ec_describe
ElastiCacheResponse.delete_replication_group = ec_delete_response
ElastiCacheResponse.modify_replication_group = ec_modify_response

# --- EC2: what databases use ----------------------------------------------------
# An RDS instance or ElastiCache node has network interfaces in its subnets,
# behind its security groups: AWS refuses to delete either while they exist
# (DependencyViolation, "has a dependent object" / "has dependencies and
# cannot be deleted"). Stock moto deletes them under a running database.
# moto places no interfaces, so every subnet of a database's subnet group
# counts as used: stricter than AWS, which refuses only the subnets that
# hold an interface (one for a single-AZ instance).
from moto.ec2.exceptions import DependencyViolationError  # noqa: E402
from moto.ec2.models.security_groups import SecurityGroupBackend  # noqa: E402
from moto.ec2.models.subnets import SubnetBackend  # noqa: E402


def _databases_in(ec2):
    """(identifier, security group ids, subnet ids) of each database of the
    EC2 backend's account and region."""
    from moto.elasticache.models import elasticache_backends
    from moto.rds.models import rds_backends

    rds = rds_backends[ec2.account_id][ec2.region_name]
    for db in list(rds.databases.values()):
        group = rds.subnet_groups.get(getattr(db, "_db_subnet_group_name", None) or "")
        subnets = [getattr(s, "id", s) for s in getattr(group, "_subnets", None) or []]
        yield db.db_instance_identifier, list(db.vpc_security_group_ids or []), subnets
    cache = elasticache_backends[ec2.account_id][ec2.region_name]
    for group_id, group in list(cache.replication_groups.items()):
        subnet_group = cache.cache_subnet_groups.get(getattr(group, "cache_subnet_group_name", None) or "")
        yield group_id, list(getattr(group, "security_group_ids", None) or []), \
            list(getattr(subnet_group, "subnet_ids", None) or [])


def ec2_delete_security_group(self, name=None, group_id=None):
    for db, groups, _ in _databases_in(self):
        if group_id and group_id in groups:
            raise DependencyViolationError(f"resource {group_id} has a dependent object ({db})")
    return _ec2_delete_security_group(self, name=name, group_id=group_id)


def ec2_delete_subnet(self, subnet_id):
    for db, _, subnets in _databases_in(self):
        if subnet_id in subnets:
            raise DependencyViolationError(
                f"The subnet '{subnet_id}' has dependencies and cannot be deleted ({db})")
    return _ec2_delete_subnet(self, subnet_id)


_ec2_delete_security_group = SecurityGroupBackend.delete_security_group
_ec2_delete_subnet = SubnetBackend.delete_subnet
SecurityGroupBackend.delete_security_group = ec2_delete_security_group
SubnetBackend.delete_subnet = ec2_delete_subnet

# --- S3 -------------------------------------------------------------------------
from moto.s3.responses import S3Response
from moto.s3.exceptions import MissingBucket

_s3_bucket_put = S3Response._bucket_response_put


def _create_bucket_tags(body):
    """The Tags of a CreateBucketConfiguration body, as {key: value}."""
    import xmltodict

    if not body:
        return {}
    try:
        config = xmltodict.parse(body).get("CreateBucketConfiguration") or {}
    except Exception:  # an unparsable body is moto's to refuse
        return {}
    tags = (config.get("Tags") or {}).get("Tag") or []
    if isinstance(tags, dict):
        tags = [tags]
    return {t["Key"]: t.get("Value") or "" for t in tags}


def s3_bucket_put(self, request, bucket_name, querystring):
    creating = not querystring
    if creating:
        # Matched as query-protocol faults are: on the parameters as JSON.
        params = {"Bucket": bucket_name, "Tags": _create_bucket_tags(self.body)}
        fault = _fault_for("s3", "CreateBucket", json.dumps(params, sort_keys=True))
        if fault is not None:
            code, message = escape(fault["code"]), escape(fault.get("message", "injected fault"))
            error = (f"<Error><Code>{code}</Code><Message>{message}</Message>"
                     "<RequestId>cro-injected-fault</RequestId></Error>")
            return fault.get("status", 403), {"Content-Type": "application/xml"}, error
        try:
            self.backend.get_bucket(bucket_name)
            existed = True
        except MissingBucket:
            existed = False
    answer = _s3_bucket_put(self, request, bucket_name, querystring)
    status = answer[0] if isinstance(answer, tuple) else 200
    if creating and not existed and status == 200:
        tags = _create_bucket_tags(self.body)
        if tags:
            self.backend.put_bucket_tagging(bucket_name, tags)
    return answer


S3Response._bucket_response_put = s3_bucket_put

# --- request log and fault injection ------------------------------------------
from moto.core.responses import BaseResponse

_call_action = BaseResponse.call_action
_lock = threading.Lock()
_fault_uses = {}
_fault_seen = {}
REQUEST_LOG = os.environ.get("CRO_MOTO_REQUEST_LOG")
FAULTS = os.environ.get("CRO_MOTO_FAULTS")


MAINTENANCE = os.environ.get("CRO_MOTO_MAINTENANCE")

# UpdateAction members that are dates.
_UPDATE_DATES = ("ServiceUpdateReleaseDate", "ServiceUpdateEndDate", "ServiceUpdateRecommendedApplyByDate",
                 "UpdateActionAvailableDate", "UpdateActionStatusModifiedDate")


def _maintenance(service):
    try:
        with open(MAINTENANCE) as f:
            return json.load(f).get(service, [])
    except (TypeError, OSError, ValueError):
        return []


def _dated(item, keys):
    from datetime import datetime, timezone

    return {k: (datetime.fromtimestamp(v, timezone.utc) if k in keys and v is not None else v)
            for k, v in item.items()}


def rds_pending_maintenance_response(self):
    from moto.core.responses import ActionResult

    wanted = self._get_param("ResourceIdentifier")
    by_resource = {}
    for action in _maintenance("rds"):
        arn = action["ResourceIdentifier"]
        if wanted and arn != wanted:
            continue
        detail = {k: v for k, v in action.items() if k != "ResourceIdentifier"}
        by_resource.setdefault(arn, []).append(_dated(detail, ("AutoAppliedAfterDate", "CurrentApplyDate")))
    return ActionResult({"PendingMaintenanceActions": [
        {"ResourceIdentifier": arn, "PendingMaintenanceActionDetails": details}
        for arn, details in by_resource.items()]})


def ec_update_actions_response(self):
    from moto.core.responses import ActionResult

    groups = self._get_param("ReplicationGroupIds", [])
    statuses = self._get_param("UpdateActionStatus", [])
    service_status = self._get_param("ServiceUpdateStatus", [])
    found = [
        _dated(update, _UPDATE_DATES) for update in _maintenance("elasticache")
        if (not groups or update.get("ReplicationGroupId") in groups)
        and (not statuses or update.get("UpdateActionStatus") in statuses)
        and (not service_status or update.get("ServiceUpdateStatus") in service_status)
    ]
    return ActionResult({"UpdateActions": found})


def _faults():
    try:
        with open(FAULTS) as f:
            return json.load(f)
    except (TypeError, OSError, ValueError):
        return []


def _fault_for(service, action, params_text):
    for fault in _faults():
        if fault.get("service") != service or fault.get("action") not in (action, "*"):
            continue
        if fault.get("match", "") not in params_text:
            continue
        with _lock:
            # `every`: only every Nth matching call fails (a share, as a
            # throttled account sees), the others go through.
            seen = _fault_seen[fault.get("id")] = _fault_seen.get(fault.get("id"), 0) + 1
            if seen % max(int(fault.get("every", 1)), 1) != 0:
                continue
            used = _fault_uses.get(fault.get("id"), 0)
            times = fault.get("times")
            if times is not None and used >= times:
                continue
            _fault_uses[fault.get("id")] = used + 1
        return fault
    return None


def call_action(self):
    try:
        action = self._get_action()
    except Exception:  # noqa: BLE001 - not a query-protocol call
        return _call_action(self)
    params = {k: v for k, v in (self.querystring or {}).items() if k not in ("Action", "Version")}
    params_text = json.dumps(params, sort_keys=True)
    if REQUEST_LOG:
        line = json.dumps({"time": time.time(), "service": self.service_name, "action": action,
                           "account": getattr(self, "current_account", None), "params": params})
        with _lock, open(REQUEST_LOG, "a") as log:
            log.write(line + "\n")
    fault = _fault_for(self.service_name, action, params_text)
    if fault is None:
        return _call_action(self)
    code, message = escape(fault["code"]), escape(fault.get("message", "injected fault"))
    if self.service_name == "ec2":
        # EC2 answers errors in its own shape, not the query protocol's.
        body = (f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
                "<RequestID>cro-injected-fault</RequestID></Response>")
    else:
        body = (
            "<ErrorResponse><Error><Type>Sender</Type>"
            f"<Code>{code}</Code><Message>{message}</Message>"
            "</Error><RequestId>cro-injected-fault</RequestId></ErrorResponse>"
        )
    return fault.get("status", 400), {"Content-Type": "text/xml"}, body


BaseResponse.call_action = call_action
ElastiCacheResponse.describe_update_actions = ec_update_actions_response
RDSResponse.describe_pending_maintenance_actions = rds_pending_maintenance_response

def _cbor_timestamps(value, shape):
    """`value` (moto's JSON answer) with every timestamp of `shape` as the
    RPC v2 CBOR protocol carries it: tag 1 on epoch seconds."""
    import cbor2
    from datetime import datetime

    if value is None or shape is None:
        return value
    if shape.type_name == "timestamp":
        if isinstance(value, str):
            value = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        return cbor2.CBORTag(1, float(value))
    if shape.type_name == "structure" and isinstance(value, dict):
        return {k: _cbor_timestamps(v, shape.members.get(k)) for k, v in value.items()}
    if shape.type_name == "list" and isinstance(value, list):
        return [_cbor_timestamps(v, shape.member) for v in value]
    if shape.type_name == "map" and isinstance(value, dict):
        return {k: _cbor_timestamps(v, shape.value) for k, v in value.items()}
    return value


def _json_ready(value):
    """A decoded CBOR request as JSON 1.0 has it (timestamps as epoch
    seconds, blobs as base64)."""
    import base64
    from datetime import datetime

    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_ready(v) for v in value]
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


# CloudWatch's service shape name, the `<service>` of its RPC v2 paths.
CLOUDWATCH_TARGET = "GraniteServiceVersion20100801"


def cbor_aware(app):
    """`app` answering Smithy RPC v2 CBOR requests through moto's JSON 1.0
    handlers."""
    import io
    import cbor2
    import botocore.session

    models = {}

    def model(service):
        if service not in models:
            models[service] = botocore.session.get_session().get_service_model(service)
        return models[service]

    def wrapped(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if environ.get("HTTP_SMITHY_PROTOCOL") != "rpc-v2-cbor" or "/operation/" not in path:
            return app(environ, start_response)
        target, operation = path.rstrip("/").split("/")[-3], path.rstrip("/").split("/")[-1]
        if target != CLOUDWATCH_TARGET:
            # Only CloudWatch's model is used below; anything else as is.
            return app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        body = json.dumps(_json_ready(cbor2.loads(raw) if raw else {})).encode()
        environ = dict(environ, PATH_INFO="/", CONTENT_TYPE="application/x-amz-json-1.0",
                       CONTENT_LENGTH=str(len(body)), HTTP_X_AMZ_TARGET=f"{target}.{operation}")
        environ["wsgi.input"] = io.BytesIO(body)
        answer = {}

        def capture(status, headers, exc_info=None):
            answer["status"], answer["headers"] = status, headers

        chunks = b"".join(app(environ, capture))
        parsed = json.loads(chunks) if chunks.strip() else {}
        if answer["status"].startswith("2"):
            output = model("cloudwatch").operation_model(operation).output_shape
            parsed = _cbor_timestamps(parsed, output)
        else:
            # moto's JSON error: {"__type": code, "message": ...}.
            parsed = {"__type": parsed.get("__type", "InternalFailure"),
                      "message": parsed.get("message") or parsed.get("Message", "")}
        out = cbor2.dumps(parsed)
        headers = [(k, v) for k, v in answer["headers"] if k.lower() not in ("content-type", "content-length")]
        headers += [("Content-Type", "application/cbor"), ("Content-Length", str(len(out))),
                    ("smithy-protocol", "rpc-v2-cbor")]
        start_response(answer["status"], headers)
        return [out]

    return wrapped


class _CborAwareDispatcher(DomainDispatcherApplication):
    def __call__(self, environ, start_response):
        return cbor_aware(super().__call__)(environ, start_response)


moto.server.DomainDispatcherApplication = _CborAwareDispatcher

# IAM enforcement (off unless a test turns it on through
# /moto-api/reset-auth, as tests/integration/iam_policy.rs does), made to
# judge what AWS judges:
# - HeadBucket is authorized by s3:ListBucket (S3 API Reference,
#   HeadBucket: "you must have permissions to perform the s3:ListBucket
#   action"); moto asks for an action `s3:HeadBucket`, which IAM has not.
# - moto re-signs each request from its parsed form to check the
#   signature, and its re-encoding of some EC2 bodies (TagSpecifications)
#   differs from the SDK's byte for byte: a correct signature is refused
#   as AuthFailure. The signature is not what the policy test checks; the
#   key still has to be an IAM user's (moto looks it up before this).
import moto.s3.responses as _s3_responses  # noqa: E402
from moto.iam.access_control import IAMRequestBase  # noqa: E402

_s3_responses.ACTION_MAP["BUCKET"]["HEAD"]["DEFAULT"] = "ListBucket"
IAMRequestBase.check_signature = lambda self: None

# - moto names an action after the service's signing name (`tagging`,
#   `monitoring`); IAM's action prefixes are `tag` and `cloudwatch`.
IAM_PREFIX = {"tagging": "tag", "monitoring": "cloudwatch"}
_iam_request_init = IAMRequestBase.__init__


def _iam_request_init_prefixed(self, *args, **kwargs):
    _iam_request_init(self, *args, **kwargs)
    service, _, action = self._action.partition(":")
    self._action = f"{IAM_PREFIX.get(service, service)}:{action}"


IAMRequestBase.__init__ = _iam_request_init_prefixed


if __name__ == "__main__":
    main(sys.argv[1:])
