#!/usr/bin/env python3
"""A stateful stand-in for GCP's Cloud SQL Admin API (sqladmin v1beta4),
through gcp_network.py for the Compute Engine and Service Networking calls
of a cluster's private services access, and through gcp_redis.py for
Memorystore for Redis (redis v1), each API at its own service
path as at its own host; all held to Google's published contract rather than to what the operator
sends: every request and every answer is checked against the API's
discovery document (unknown fields, types, int64-as-string, enum values,
read-only fields in requests, query parameters the method does not take),
and a request outside it is answered 400 naming the field, as GCP does.

What it keeps as GCP does (each from the API reference of the method):
instances are created PENDING_CREATE and become RUNNABLE, deleted through
PENDING_DELETE, and their long-running operations go PENDING, RUNNING,
DONE; a name is refused while it exists and for a week after its instance
was deleted (Cloud SQL reserves it); an instance with
`deletionProtectionEnabled` is not deleted; a second operation on an
instance while one runs is refused 409 `operationInProgress`; a disk is
never shrunk and a major version never goes down; `rootPassword` is never
returned; a private IP needs a Service Networking connection of its
network (with the `allocatedIpRange`), and is taken from that range. The words of the refusals GCP does not publish are this file's.

Access tokens are Google's for a service account ("Using OAuth 2.0 for
Server to Server Applications"): at start it makes one account's RSA key
and writes its key file as Google issues them (CRO_GCP_KEY_FILE, `type:
service_account`, `token_uri` this server's /token). POST /token takes a
`jwt-bearer` grant (RFC 7523) whose JWT is RS256-signed with that key,
names the account (`iss`), a scope and the token_uri (`aud`), and lasts
an hour at most; it answers a token lasting 3599 s, or RFC 6749's error
(`invalid_grant`, ...). API calls need a token it issued and that has not
expired (401 UNAUTHENTICATED otherwise). Faults may name the method
`oauth2.token`.

Faults (CRO_GCP_FAULTS, a JSON list) answer matching calls with an error,
or do the call and lose its answer, as a network does:
  {"id", "method": "sql.instances.insert" | "*", "match": "<text of the
   path or body>", "code": 429, "status": "RESOURCE_EXHAUSTED",
   "reason": "rateLimitExceeded", "message": "...", "times": N,
   "lose_answer": true}

Usage: CRO_GCP_KEY_FILE=PATH gcp_server.py PORT DISCOVERY_DIR
"""

import base64
import json
import os
import secrets
import re
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from gcp_common import GoogleError, invalid, now_text
from gcp_network import HANDLERS as NETWORK_HANDLERS, Network
from gcp_redis import HANDLERS as REDIS_HANDLERS, Memorystore

DELAY = float(os.environ.get("CRO_GCP_TRANSITION_SECONDS", "3"))
FAULTS = os.environ.get("CRO_GCP_FAULTS")
NAME_RESERVED_SECONDS = 7 * 24 * 3600
APIS = ["sqladmin.v1beta4", "compute.v1", "servicenetworking.v1", "redis.v1"]

_lock = threading.Lock()
_fault_uses = {}


# --- OAuth 2.0 for service accounts ---------------------------------------------

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_SECONDS = 3599


class OAuthError(Exception):
    def __init__(self, code, error, description):
        super().__init__(description)
        self.code, self.error, self.description = code, error, description

    def body(self):
        return {"error": self.error, "error_description": self.description}


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Tokens:
    """One service account's key, and the tokens issued for it."""

    def __init__(self, base, key_file):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.key_id = secrets.token_hex(20)
        self.email = "cloud-resource-operator@p1.iam.gserviceaccount.com"
        self.token_uri = base + "token"
        self.issued = {}
        pem = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()).decode()
        # The fields and their order as Google's console and
        # `gcloud iam service-accounts keys create` write them.
        document = {
            "type": "service_account", "project_id": "p1", "private_key_id": self.key_id,
            "private_key": pem, "client_email": self.email, "client_id": "100000000000000000001",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": self.token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/"
                                    + self.email.replace("@", "%40"),
            "universe_domain": "googleapis.com",
        }
        partial = key_file + ".partial"
        with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump(document, f, indent=2)
        os.replace(partial, key_file)

    def exchange(self, headers, raw):
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        if not (headers.get("Content-Type") or "").startswith("application/x-www-form-urlencoded"):
            raise OAuthError(400, "invalid_request", "Content-Type must be application/x-www-form-urlencoded")
        form = {k: v[-1] for k, v in parse_qs(raw.decode(errors="replace")).items()}
        if form.get("grant_type") != JWT_BEARER:
            raise OAuthError(400, "unsupported_grant_type", f"Invalid grant_type: {form.get('grant_type', '')}")
        try:
            head, body, signature = form.get("assertion", "").split(".")
            header, claims = json.loads(b64url(head)), json.loads(b64url(body))
        except ValueError:
            raise OAuthError(400, "invalid_grant", "Invalid JWT: the assertion is not a JWT.")
        if header.get("alg") != "RS256":
            raise OAuthError(400, "invalid_grant", "Invalid JWT: the algorithm must be RS256.")
        if claims.get("iss") != self.email:
            raise OAuthError(400, "invalid_grant", "Invalid grant: account not found")
        try:
            self.key.public_key().verify(b64url(signature), f"{head}.{body}".encode(),
                                         padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError):
            raise OAuthError(400, "invalid_grant", "Invalid JWT Signature.")
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        if not (isinstance(iat, int) and isinstance(exp, int)) or exp - iat > 3600 or exp <= now \
                or iat > now + 60:
            raise OAuthError(400, "invalid_grant",
                             "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                             "timeframe. Check your iat and exp values in the JWT claim.")
        if claims.get("aud") != self.token_uri:
            raise OAuthError(400, "invalid_grant", f"Invalid JWT: Failed audience check. The right audience is "
                                                   f"{self.token_uri}")
        if not claims.get("scope"):
            raise OAuthError(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        token = "ya29." + secrets.token_urlsafe(48)
        with _lock:
            self.issued = {t: e for t, e in self.issued.items() if e > now}
            self.issued[token] = now + TOKEN_SECONDS
        return {"access_token": token, "expires_in": TOKEN_SECONDS, "token_type": "Bearer"}

    def valid(self, authorization):
        token = (authorization or "").removeprefix("Bearer ")
        with _lock:
            return authorization.startswith("Bearer ") and self.issued.get(token, 0) > time.time()


# --- the discovery document ----------------------------------------------------

class Document:
    def __init__(self, path):
        with open(path) as f:
            self.doc = json.load(f)
        self.methods = []
        self._collect(self.doc.get("resources", {}))

    def _collect(self, resources):
        # The flat path names each segment (`v1/services/{servicesId}/...`)
        # where the path takes several at once (`v1/{+parent}/...`).
        for resource in resources.values():
            for method in resource.get("methods", {}).values():
                path = self.doc.get("servicePath", "") + method.get("flatPath", method["path"])
                pattern = re.sub(r"\{\+?(\w+)\}", r"(?P<\1>[^/]+)", path)
                self.methods.append((method["httpMethod"], re.compile("^/" + pattern + "$"), method))
            self._collect(resource.get("resources", {}))

    def route(self, verb, path):
        for http_method, pattern, method in self.methods:
            m = pattern.match(path)
            if m and http_method == verb:
                return method, m.groupdict()
        return None, None

    def violations(self, schema, value, path, request):
        out = []
        self._check(schema, value, path, request, out)
        return out

    def _check(self, schema, v, path, request, out):
        if "$ref" in schema:
            return self._check(self.doc["schemas"][schema["$ref"]], v, path, request, out)
        if request and schema.get("readOnly"):
            out.append(f"{path}: is output only")
        kind, fmt = schema.get("type"), schema.get("format")
        if kind == "object" and isinstance(v, dict):
            props, extra = schema.get("properties", {}), schema.get("additionalProperties")
            for k, fv in v.items():
                sub = props.get(k, extra)
                if sub is None:
                    out.append(f"{path}.{k}: no such field")
                else:
                    self._check(sub, fv, f"{path}.{k}", request, out)
        elif kind == "array" and isinstance(v, list):
            for i, item in enumerate(v):
                self._check(schema["items"], item, f"{path}[{i}]", request, out)
        elif kind == "string" and isinstance(v, str):
            if fmt in ("int64", "uint64") and not re.fullmatch(r"-?\d+", v):
                out.append(f"{path}: {v!r} is not an int64")
            if "enum" in schema and v not in schema["enum"]:
                out.append(f"{path}: {v!r} is not one of {schema['enum']}")
        elif kind == "string" and fmt in ("int64", "uint64") and isinstance(v, int) and not isinstance(v, bool):
            pass
        elif kind == "integer" and isinstance(v, int) and not isinstance(v, bool):
            pass
        elif kind == "number" and isinstance(v, (int, float)) and not isinstance(v, bool):
            pass
        elif kind == "boolean" and isinstance(v, bool):
            pass
        elif kind == "any":
            pass
        else:
            out.append(f"{path}: {json.dumps(v)} is not of type {kind}")


# --- Cloud SQL -------------------------------------------------------------------

class CloudSql:
    def __init__(self, base):
        self.base = base
        self.instances = {}   # (project, name) -> instance
        self.deleted = {}     # (project, name) -> when its name is free again
        self.operations = {}  # name -> operation
        self.busy = {}        # (project, name) -> operation name running on it

    def _settle(self):
        t = time.time()
        for key, inst in list(self.instances.items()):
            until = inst.get("_until")
            if until is None or t < until:
                continue
            inst.pop("_until")
            if inst["state"] == "PENDING_DELETE":
                del self.instances[key]
                self.deleted[key] = t + NAME_RESERVED_SECONDS
            else:
                inst["state"] = "RUNNABLE"
        for op in self.operations.values():
            if op["status"] != "DONE" and t >= op["_done_at"]:
                op["status"], op["endTime"] = "DONE", now_text()
                self.busy.pop((op["targetProject"], op["targetId"]), None)
            elif op["status"] == "PENDING" and t >= op["_done_at"] - DELAY / 2:
                op["status"], op["startTime"] = "RUNNING", now_text()

    def _operation(self, project, name, kind):
        op_name = str(uuid.uuid4())
        op = {"kind": "sql#operation", "name": op_name, "operationType": kind, "status": "PENDING",
              "targetId": name, "targetProject": project, "insertTime": now_text(), "user": "cro-test@example.com",
              "targetLink": f"{self.base}sql/v1beta4/projects/{project}/instances/{name}",
              "selfLink": f"{self.base}sql/v1beta4/projects/{project}/operations/{op_name}",
              "_done_at": time.time() + DELAY}
        self.operations[op_name] = op
        self.busy[(project, name)] = op_name
        return op

    def _found(self, project, name):
        inst = self.instances.get((project, name))
        if inst is None:
            raise GoogleError(404, "NOT_FOUND", "instanceDoesNotExist", "The Cloud SQL instance does not exist.")
        return inst

    def _not_busy(self, project, name):
        if (project, name) in self.busy:
            raise GoogleError(409, "ABORTED", "operationInProgress",
                              "Operation failed because another operation was already in progress.")

    def insert(self, params, body):
        project, name = params["project"], body.get("name", "")
        if not re.fullmatch(r"[a-z][a-z0-9-]*", name) or len(name) > 98:
            raise invalid(f"Invalid instance name {name!r}: lowercase letters, digits and hyphens, starting with a letter.")
        if not body.get("databaseVersion") or not (body.get("settings") or {}).get("tier"):
            raise invalid("databaseVersion and settings.tier are required.")
        key = (project, name)
        if key in self.instances or self.deleted.get(key, 0) > time.time():
            raise GoogleError(409, "ALREADY_EXISTS", "instanceAlreadyExists",
                              "The Cloud SQL instance already exists. When you delete an instance, you can't reuse "
                              "the name of the deleted instance until one week from the deletion date.")
        inst = json.loads(json.dumps(body))
        inst.pop("rootPassword", None)
        s = inst.setdefault("settings", {})
        s.setdefault("storageAutoResize", True)
        s.setdefault("dataDiskSizeGb", "10")
        s["settingsVersion"] = "1"
        s["kind"] = "sql#settings"
        private = self.net.private_address(project, name, s)
        inst.update({
            "kind": "sql#instance", "state": "PENDING_CREATE", "project": project,
            "region": inst.get("region") or "us-central1",
            "connectionName": f"{project}:{inst.get('region') or 'us-central1'}:{name}",
            "selfLink": f"{self.base}sql/v1beta4/projects/{project}/instances/{name}",
            "gceZone": (inst.get("region") or "us-central1") + "-a", "backendType": "SECOND_GEN",
            "instanceType": "CLOUD_SQL_INSTANCE", "createTime": now_text(),
            "serviceAccountEmailAddress": f"p{abs(hash(project)) % 10**12}-abcd@gcp-sa-cloud-sql.iam.gserviceaccount.com",
            "ipAddresses": [{"type": "PRIVATE", "ipAddress": private}] if private
            else [{"type": "PRIMARY", "ipAddress": "192.0.2.10"}],
            "_until": time.time() + DELAY,
        })
        self.instances[key] = inst
        self.deleted.pop(key, None)
        return self._operation(project, name, "CREATE")

    def get(self, params):
        inst = self._found(params["project"], params["instance"])
        return {k: v for k, v in inst.items() if not k.startswith("_")}

    def patch(self, params, body):
        project, name = params["project"], params["instance"]
        inst = self._found(project, name)
        self._not_busy(project, name)
        if inst["state"] != "RUNNABLE":
            raise GoogleError(409, "ABORTED", "operationInProgress", f"The instance is {inst['state']}.")
        have, want = inst.get("databaseVersion", ""), body.get("databaseVersion")
        if want and want != have:
            major = lambda v: int(re.match(r"POSTGRES_(\d+)", v).group(1)) if re.match(r"POSTGRES_\d+", v) else 0
            if major(want) < major(have):
                raise invalid(f"Cannot downgrade the database version from {have} to {want}.")
        s, new = inst["settings"], body.get("settings") or {}
        if "dataDiskSizeGb" in new and int(new["dataDiskSizeGb"]) < int(s.get("dataDiskSizeGb", "0")):
            raise invalid("The disk size cannot be decreased.")
        for k, v in body.items():
            if k == "settings":
                merge(s, v)
            elif k != "rootPassword":
                inst[k] = v
        s["settingsVersion"] = str(int(s.get("settingsVersion", "0")) + 1)
        return self._operation(project, name, "UPDATE")

    def delete(self, params):
        project, name = params["project"], params["instance"]
        inst = self._found(project, name)
        self._not_busy(project, name)
        if inst["settings"].get("deletionProtectionEnabled"):
            raise GoogleError(400, "FAILED_PRECONDITION", "deletionProtectionEnabled",
                              "The instance is protected from deletion: set settings.deletionProtectionEnabled to false first.")
        inst["state"], inst["_until"] = "PENDING_DELETE", time.time() + DELAY
        return self._operation(project, name, "DELETE")

    def operation(self, params):
        op = self.operations.get(params["operation"])
        if op is None or op["targetProject"] != params["project"]:
            raise GoogleError(404, "NOT_FOUND", "operationDoesNotExist", "The operation does not exist.")
        return {k: v for k, v in op.items() if not k.startswith("_")}

    def list(self, params):
        items = [self.get({"project": p, "instance": n}) for (p, n) in self.instances if p == params["project"]]
        return {"kind": "sql#instancesList", "items": items} if items else {"kind": "sql#instancesList"}


def merge(into, patch):
    """A PATCH's fields replace the instance's; a message merges, a map
    (userLabels) is replaced whole, as Cloud SQL does."""
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict) and k != "userLabels":
            merge(into[k], v)
        else:
            into[k] = v


HANDLERS = {
    "sql.instances.insert": lambda sql, p, b: sql.insert(p, b),
    "sql.instances.get": lambda sql, p, b: sql.get(p),
    "sql.instances.patch": lambda sql, p, b: sql.patch(p, b),
    "sql.instances.delete": lambda sql, p, b: sql.delete(p),
    "sql.instances.list": lambda sql, p, b: sql.list(p),
    "sql.operations.get": lambda sql, p, b: sql.operation(p),
}


def fault_for(method_id, text):
    try:
        with open(FAULTS) as f:
            faults = json.load(f)
    except (TypeError, OSError, ValueError):
        return None
    for fault in faults:
        if fault.get("method") not in (method_id, "*") or fault.get("match", "") not in text:
            continue
        # Counted per fault as written: a test replacing its fault starts anew.
        key = json.dumps(fault, sort_keys=True)
        used = _fault_uses.get(key, 0)
        if fault.get("times") is not None and used >= fault["times"]:
            continue
        _fault_uses[key] = used + 1
        return fault
    return None


def route(docs, verb, path):
    """The document and method serving `verb` on `path`, and its path's
    parameters: each API is served at its own service path, as on its own
    host (`compute/v1/...`, `sql/v1beta4/...`, `v1/services/...`)."""
    for doc in docs:
        method, params = doc.route(verb, path)
        if method is not None:
            return doc, method, params
    return None, None, None


def make_handler(docs, sql, net, tokens):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _answer(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self, verb):
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if verb == "POST" and url.path == "/token":
                return self._token(raw)
            try:
                self._answer(200, self._call(verb, url, raw))
            except GoogleError as e:
                self._answer(e.code, e.body())
            except LostAnswer:
                self.close_connection = True
                self.connection.close()

        def _token(self, raw):
            with _lock:
                fault = fault_for("oauth2.token", raw.decode(errors="replace"))
            try:
                if fault and not fault.get("lose_answer"):
                    raise OAuthError(fault.get("code", 503), fault.get("error", "temporarily_unavailable"),
                                     fault.get("message", "injected"))
                answer = tokens.exchange(self.headers, raw)
                if fault:
                    raise LostAnswer()
                self._answer(200, answer)
            except OAuthError as e:
                self._answer(e.code, e.body())
            except LostAnswer:
                self.close_connection = True
                self.connection.close()

        def _call(self, verb, url, raw):
            authorization = self.headers.get("Authorization")
            if not authorization:
                raise GoogleError(401, "UNAUTHENTICATED", "required",
                                  "Request is missing required authentication credential.")
            if not tokens.valid(authorization):
                raise GoogleError(401, "UNAUTHENTICATED", "authError",
                                  "Request had invalid authentication credentials. Expected OAuth 2 access "
                                  "token, login cookie or other valid authentication credential.")
            doc, method, params = route(docs, verb, url.path)
            if method is None:
                raise GoogleError(404, "NOT_FOUND", "notFound", f"No method {verb} {url.path}")
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            for k in query:
                if k not in method["parameters"] and k not in ("alt", "prettyPrint", "fields"):
                    raise invalid(f"Invalid JSON payload received. Unknown name {k!r}: Cannot bind query parameter.")
            body = None
            if "request" in method:
                try:
                    body = json.loads(raw or b"null")
                except ValueError as e:
                    raise invalid(f"Invalid JSON payload received. {e}")
                refused = doc.violations(method["request"], body, "", True) if isinstance(body, dict) \
                    else ["the body is not a JSON object"]
                if refused:
                    raise invalid("Invalid JSON payload received. " + "; ".join(r.lstrip(".") for r in refused))
            with _lock:
                fault = fault_for(method["id"], url.path + raw.decode(errors="replace"))
                if fault and not fault.get("lose_answer"):
                    raise GoogleError(fault.get("code", 503), fault.get("status", "UNAVAILABLE"),
                                      fault.get("reason", "backendError"), fault.get("message", "injected"))
                sql._settle()
                net.settle()
                sql.redis.settle()
                answer = None
                for handlers, state in ((HANDLERS, sql), (NETWORK_HANDLERS, net), (REDIS_HANDLERS, sql.redis)):
                    if method["id"] in handlers:
                        answer = handlers[method["id"]](state, {**params, **query}, body)
                if answer is None:
                    raise GoogleError(501, "UNIMPLEMENTED", "notImplemented", f"{method['id']} is not served here")
                answer = {k: v for k, v in answer.items() if not k.startswith("_")}
            wrong = doc.violations(method["response"], answer, "", False) if "response" in method else []
            if wrong:
                # The double broke the contract: say so loudly.
                raise GoogleError(500, "INTERNAL", "doubleBroken", "gcp_server.py's answer: " + "; ".join(wrong))
            if fault and fault.get("lose_answer"):
                raise LostAnswer()
            return answer

        def do_GET(self):
            self._serve("GET")

        def do_POST(self):
            self._serve("POST")

        def do_PATCH(self):
            self._serve("PATCH")

        def do_DELETE(self):
            self._serve("DELETE")

    return Handler


class LostAnswer(Exception):
    pass


def main():
    port, discovery = int(sys.argv[1]), sys.argv[2]
    docs = [Document(os.path.join(discovery, api + ".json")) for api in APIS]
    base = f"http://127.0.0.1:{port}/"
    tokens = Tokens(base, os.environ["CRO_GCP_KEY_FILE"])
    sql = CloudSql(base)
    sql.net = Network(DELAY, sql)
    sql.redis = Memorystore(DELAY, sql.net)
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(docs, sql, sql.net, tokens))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
