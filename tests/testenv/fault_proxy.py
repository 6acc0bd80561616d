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

`--lose-first-answer` loses, whatever the dice say, the answer of the
first call of each action named (S3 calls are named `CreateBucket`,
`DeleteBucket` and `HeadBucket` where they are those, else `METHOD
/path?query-keys`), so each create meets its own resource on retry at
least once.

A dropped request or answer is a connection closed with no response (what
a client sees when a connection dies or a load balancer gives up). The
proxy prints `listening on 127.0.0.1:PORT` once it serves, and appends a
JSON line per call to --log (action or method and path, and `passed`,
`request-dropped` or `answer-dropped`, and `received`, when its request
line and headers had arrived) so tests can show the faults hit the calls
they meant to test, and which calls a client began after a given time. Standard library only; stops on SIGTERM.
"""

import argparse
import http.client
import json
import os
import random
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

    def __init__(self, seed, drop_request, drop_answer, lose_first, log_path):
        self.rng = random.Random(seed)
        self.drop_request = drop_request
        self.drop_answer = drop_answer
        self.lose_first = set(lose_first)
        self.lock = threading.Lock()
        self.log = open(log_path, "a", buffering=1) if log_path else None

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


def make_handler(upstream, faults, unavailable=None, unavailable_flag=None):
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
    args = parser.parse_args()
    lose_first = [a for a in args.lose_first_answer.split(",") if a]
    faults = Faults(args.seed, args.drop_request, args.drop_answer, lose_first, args.log)
    upstream = urllib.parse.urlsplit(args.upstream)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(upstream, faults, args.unavailable, args.unavailable_flag))
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
