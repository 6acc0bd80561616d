"""An AWS endpoint that loses requests and answers, in front of moto.

Real networks and AWS's 5xx lose calls two ways: the request never
arrives (nothing changed), or it arrives, AWS acts, and the answer never
comes back (the change was made, the caller does not know). The second is
the one that matters: a retry then meets what the first attempt did
("already exists", "not found", "invalid state"). This proxy makes both
happen, at seeded rates, for any client pointed at it:

    fault_proxy.py --upstream http://127.0.0.1:MOTO_PORT --seed 1 \
        --drop-request 0.2 --drop-answer 0.2 [--port 0] [--log FILE] \
        [--lose-first-answer CreateDBInstance,CreateBucket,...]

`--unavailable SERVICE --unavailable-flag FILE` answers every call to
SERVICE (the signing name in the request's credential scope: `rds`,
`elasticache`, `s3`, `iam`, ...) with 503 ServiceUnavailable, without
passing it on, while FILE exists: one AWS service down for a while, the
others up.

`--not-visible-for SECONDS` plays AWS's eventual consistency: for that
long after a create of an RDS instance, an ElastiCache replication group
or an S3 bucket reached AWS (its answer passed or lost), a describe of it
by its identifier answers as if it did not exist (`DBInstanceNotFound`,
`ReplicationGroupNotFoundFault`, S3's 404 `NoSuchBucket`), as AWS's
documentation warns a read right after a write may.

`--stale-listing IDS --stale-flag FILE` plays the same for listings: while
FILE exists, a DescribeDBInstances or DescribeReplicationGroups without an
identifier (a listing) answers without the databases named in IDS
(comma-separated), as a listing AWS has not yet brought up to date.

`--hold ACTIONS --hold-flag FILE` holds each request of the actions named
while FILE exists, before it reaches AWS, then passes it on: a call a
client sent and AWS has not yet acted on, for as long as a test needs to
make something happen in between (another operator's work).

`--hang-first-answer ACTIONS` holds the answer of the first call of each
action named for `--hang-seconds` (default 70) after AWS acted, then
closes the connection: a hung answer.

`--sts-expires-in SECONDS` shortens the credentials STS gives for a web
identity (AssumeRoleWithWebIdentity) to expire SECONDS after the answer,
and `--expired-tokens FILE` answers ExpiredTokenException, as STS does, to
one whose token is a line of FILE (read at each call): a projected
ServiceAccount token the kubelet has rotated away, and credentials that
must be renewed with the new one within a test's time.

`--lose-first-answer` loses, whatever the dice say, the answer of the
first call of each action named (S3 calls are named `CreateBucket`,
`DeleteBucket` and `HeadBucket` where they are those, else `METHOD
/path?query-keys`), so each create meets its own resource on retry at
least once.

A dropped request or answer is a connection closed with no response (what
a client sees when a connection dies or a load balancer gives up). The
proxy prints `listening on 127.0.0.1:PORT` once it serves, and appends a
JSON line per call to --log as its request arrives (outcome `received`)
and another once it is done with it (`passed`, `request-dropped`,
`answer-dropped`, ...), each with the call (action or method and path) and
`received`, when its request line and headers had arrived, so tests can show the faults hit the calls
they meant to test, and which calls a client began after a given time. Standard library only; stops on SIGTERM.
"""

import argparse
import http.client
import json
import os
import random
import re
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
}


class Faults:
    """Seeded decisions, one pair per call, in the order calls arrive."""

    def __init__(self, seed, drop_request, drop_answer, lose_first, log_path, not_visible_for=0.0, hang_first=()):
        self.rng = random.Random(seed)
        self.drop_request = drop_request
        self.drop_answer = drop_answer
        self.lose_first = set(lose_first)
        self.hang_first = set(hang_first)
        self.not_visible_for = not_visible_for
        # (service, identifier) -> when a describe first sees it.
        self.visible_at = {}
        self.lock = threading.Lock()
        self.log = open(log_path, "a", buffering=1) if log_path else None

    def hangs(self, call):
        """Whether this call's answer is held (the first of its action)."""
        with self.lock:
            if call in self.hang_first:
                self.hang_first.discard(call)
                return True
            return False

    def created(self, key):
        """AWS acted on a create of `key`: not visible for a while."""
        if key and self.not_visible_for > 0:
            with self.lock:
                self.visible_at.setdefault(key, time.time() + self.not_visible_for)

    def hidden(self, key):
        with self.lock:
            return key is not None and time.time() < self.visible_at.get(key, 0)

    def decide(self, call):
        """(lose the request, lose the answer) for the next call."""
        with self.lock:
            drop_request = self.rng.random() < self.drop_request
            drop_answer = self.rng.random() < self.drop_answer
            if call in self.lose_first:
                self.lose_first.discard(call)
                return (False, True)
            return (drop_request, drop_answer)

    def record(self, call, outcome, received=None):
        if self.log is None:
            return
        line = json.dumps({"time": time.time(), "received": received, "call": call, "outcome": outcome})
        with self.lock:
            self.log.write(line + "\n")


def call_name(method, path, headers, body):
    """The AWS action (query protocol, JSON target) or `METHOD path`."""
    target = headers.get("X-Amz-Target")
    if target:
        return target.rsplit(".", 1)[-1]
    if body and method == "POST":
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        if "Action" in form:
            return form["Action"][0]
    url = urllib.parse.urlsplit(path)
    segments = [p for p in url.path.split("/") if p]
    bucket_call = {"PUT": "CreateBucket", "DELETE": "DeleteBucket", "HEAD": "HeadBucket"}
    if len(segments) == 1 and not url.query and method in bucket_call:
        return bucket_call[method]
    keys = sorted(urllib.parse.parse_qs(url.query, keep_blank_values=True))
    return f"{method} {url.path}" + (f"?{'&'.join(keys)}" if keys else "")


def form(body):
    try:
        return {k: v[0] for k, v in urllib.parse.parse_qs(body.decode("utf-8", "replace")).items()}
    except ValueError:
        return {}


CREATES = {
    "CreateDBInstance": ("rds", "DBInstanceIdentifier"),
    "RestoreDBInstanceFromDBSnapshot": ("rds", "DBInstanceIdentifier"),
    "CreateReplicationGroup": ("elasticache", "ReplicationGroupId"),
}
DESCRIBES = {
    "DescribeDBInstances": ("rds", "DBInstanceIdentifier", "DBInstanceNotFound", "DBInstance {} not found."),
    "DescribeReplicationGroups": ("elasticache", "ReplicationGroupId", "ReplicationGroupNotFoundFault",
                                  "ReplicationGroup {} not found."),
}


def bucket_of(path):
    segments = [p for p in urllib.parse.urlsplit(path).path.split("/") if p]
    return segments[0] if segments else None


def created_key(call, method, path, body):
    """What a create call makes: (service, identifier), else None."""
    if call in CREATES:
        service, param = CREATES[call]
        return (service, form(body).get(param))
    if call == "CreateBucket":
        return ("s3", bucket_of(path))
    return None


def not_found(call, method, path, body, faults):
    """AWS's answer to a describe of something not visible yet, else None."""
    if call in DESCRIBES:
        service, param, code, message = DESCRIBES[call]
        ident = form(body).get(param)
        if ident and faults.hidden((service, ident)):
            xml = (f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code>"
                   f"<Message>{message.format(ident)}</Message></Error>"
                   f"<RequestId>cro-not-visible</RequestId></ErrorResponse>")
            return 404, "text/xml", xml.encode()
        return None
    bucket = bucket_of(path)
    if method in ("GET", "HEAD") and bucket and len([p for p in urllib.parse.urlsplit(path).path.split("/") if p]) == 1 \
            and faults.hidden(("s3", bucket)):
        xml = (f"<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message>"
               f"<BucketName>{bucket}</BucketName><RequestId>cro-not-visible</RequestId></Error>")
        return 404, "application/xml", xml.encode()
    return None


LISTED = {"DescribeDBInstances": ("DBInstance", "DBInstanceIdentifier"),
          "DescribeReplicationGroups": ("ReplicationGroup", "ReplicationGroupId")}


def stale(call, body, payload, ids):
    """A listing's answer without the databases `ids` (else unchanged)."""
    if call not in LISTED or not ids or form(body).get(DESCRIBES[call][1]):
        return payload
    item, ident = LISTED[call]
    pattern = re.compile(rf"<{item}>.*?</{item}>".encode(), re.DOTALL)

    def keep(m):
        named = re.search(rf"<{ident}>([^<]*)</{ident}>".encode(), m.group(0))
        return b"" if named and named.group(1).decode() in ids else m.group(0)
    return pattern.sub(keep, payload)


def signing_service(headers):
    """The service a SigV4 request is signed for (its credential scope)."""
    auth = headers.get("Authorization", "")
    for part in auth.replace(",", " ").split():
        if part.startswith("Credential="):
            scope = part[len("Credential="):].split("/")
            if len(scope) >= 4:
                return scope[3]
    return None


def read_body(handler):
    length = handler.headers.get("Content-Length")
    if length is not None:
        return handler.rfile.read(int(length))
    if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
        chunks = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    return b""


WEB_IDENTITY = "AssumeRoleWithWebIdentity"


def expired_token(call, body, expired_tokens):
    """STS's refusal of a web identity token listed in `expired_tokens`."""
    if call != WEB_IDENTITY or not expired_tokens or not os.path.exists(expired_tokens):
        return None
    with open(expired_tokens) as f:
        expired = {line.strip() for line in f if line.strip()}
    if form(body).get("WebIdentityToken") not in expired:
        return None
    return (b'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
            b"<Code>ExpiredTokenException</Code><Message>Token expired: current date/time must be before "
            b"the expiration date/time in the token</Message></Error><RequestId>cro-expired</RequestId>"
            b"</ErrorResponse>")


def shortened(call, payload, expires_in):
    """An AssumeRoleWithWebIdentity answer whose credentials expire
    `expires_in` seconds from now."""
    if call != WEB_IDENTITY or not expires_in:
        return payload
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + expires_in)).encode()
    return re.sub(rb"<Expiration>[^<]*</Expiration>", b"<Expiration>" + at + b"</Expiration>", payload)


def make_handler(upstream, faults, unavailable=None, unavailable_flag=None, hang_seconds=70.0,
                 stale_ids=(), stale_flag=None, held=(), hold_flag=None, sts_expires_in=0.0,
                 expired_tokens=None):
    host, port = upstream.hostname, upstream.port or 80

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def lose(self, call, outcome):
            faults.record(call, outcome, self.received)
            self.close_connection = True

        def relay(self):
            # Its request line and headers are in: the client began sending.
            self.received = time.time()
            body = read_body(self)
            call = call_name(self.command, self.path, self.headers, body)
            # Logged on receipt, before anything can fail or hang: a client
            # that gives up (or exits) before its answer is still seen.
            faults.record(call, "received", self.received)
            service = signing_service(self.headers)
            if unavailable and service == unavailable and os.path.exists(unavailable_flag):
                faults.record(call, "unavailable", self.received)
                payload = (b"<ErrorResponse><Error><Type>Receiver</Type><Code>ServiceUnavailable</Code>"
                           b"<Message>injected: service unavailable</Message></Error>"
                           b"<RequestId>cro-unavailable</RequestId></ErrorResponse>")
                self.send_response_only(503, "Service Unavailable")
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
                return
            hidden = not_found(call, self.command, self.path, body, faults)
            if hidden is not None:
                status, kind, payload = hidden
                faults.record(call, "not-visible-yet", self.received)
                self.send_response_only(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
                return
            refusal = expired_token(call, body, expired_tokens)
            if refusal is not None:
                faults.record(call, "token-expired", self.received)
                self.send_response_only(400, "Bad Request")
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(refusal)))
                self.end_headers()
                self.wfile.write(refusal)
                return
            if call in held and hold_flag and os.path.exists(hold_flag):
                faults.record(call, "held", self.received)
                while os.path.exists(hold_flag):
                    time.sleep(0.05)
            drop_request, drop_answer = faults.decide(call)
            if drop_request:
                return self.lose(call, "request-dropped")
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            conn = http.client.HTTPConnection(host, port, timeout=120)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                payload = answer.read()
            except OSError:
                return self.lose(call, "upstream-failed")
            finally:
                conn.close()
            if answer.status < 300:
                faults.created(created_key(call, self.command, self.path, body))
                payload = shortened(call, payload, sts_expires_in)
                if stale_flag and os.path.exists(stale_flag):
                    listed = payload
                    payload = stale(call, body, payload, stale_ids)
                    if payload != listed:
                        faults.record(call, "stale-listing", self.received)
            if faults.hangs(call):
                time.sleep(hang_seconds)
                return self.lose(call, "answer-hung")
            if drop_answer:
                return self.lose(call, "answer-dropped")
            self.send_response_only(answer.status, answer.reason)
            for k, v in answer.getheaders():
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            faults.record(call, "passed", self.received)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = relay

    return Handler


class QuietServer(ThreadingHTTPServer):
    """A client hanging up (the SDK's timeout, an operator stopped) is part
    of the faults under test, not an error: no traceback for it (they
    filled the test output where the failures should be read)."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drop-request", type=float, default=0.0)
    parser.add_argument("--drop-answer", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log")
    parser.add_argument("--lose-first-answer", default="")
    parser.add_argument("--unavailable")
    parser.add_argument("--unavailable-flag")
    parser.add_argument("--not-visible-for", type=float, default=0.0)
    parser.add_argument("--hang-first-answer", default="")
    parser.add_argument("--hang-seconds", type=float, default=70.0)
    parser.add_argument("--stale-listing", default="")
    parser.add_argument("--stale-flag")
    parser.add_argument("--hold", default="")
    parser.add_argument("--hold-flag")
    parser.add_argument("--sts-expires-in", type=float, default=0.0)
    parser.add_argument("--expired-tokens")
    args = parser.parse_args()
    lose_first = [a for a in args.lose_first_answer.split(",") if a]
    hang_first = [a for a in args.hang_first_answer.split(",") if a]
    faults = Faults(args.seed, args.drop_request, args.drop_answer, lose_first, args.log,
                    args.not_visible_for, hang_first)
    upstream = urllib.parse.urlsplit(args.upstream)
    stale_ids = {i for i in args.stale_listing.split(",") if i}
    held = {a for a in args.hold.split(",") if a}
    handler = make_handler(upstream, faults, args.unavailable, args.unavailable_flag, args.hang_seconds,
                           stale_ids, args.stale_flag, held, args.hold_flag, args.sts_expires_in,
                           args.expired_tokens)
    server = QuietServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
