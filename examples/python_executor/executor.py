#!/usr/bin/env python3
"""A jobwheel executor instance in Python, with the standard library only.

It serves the executor protocol v1 (docs/executor-protocol.json): signed requests
and answers (HMAC-SHA256 with the group's secret), a replay window with a nonce
cache, block strategies, deadlines, kills, long-polled results and per-run logs.
The protocol conformance tests of tests/remote.rs run against it as they run against
the Rust executor server.

    JOBWHEEL_GROUP_SECRET=... python3 executor.py --group billing --bind 127.0.0.1:9102

With `--register http://scheduler:9100` it registers at a scheduler's registration
endpoint (jobwheel's RegistryServer) by heartbeat every `--beat-every` seconds, and
leaves when it stops (SIGTERM or Ctrl-C); without it, schedulers list its address.

A run's log lines go back to the scheduler with the answers to its run and result
requests (`log_offset`), and the scheduler stores them with the run: this process
keeps a run's last 1,000 lines only until they are asked for, and ended runs for
RETENTION_S (10 minutes), so restarting it loses no line a scheduler already read.

Handlers are plain functions of a context: `ctx.payload`, `ctx.log(line)`,
`ctx.cancelled` (a threading.Event set on kill, cover or deadline). A handler
returns to succeed and raises to fail (`Permanent` for a failure not to retry).

OpenTelemetry (optional): when the `opentelemetry` package is installed, each run
executes inside a span `jobwheel.remote_run` whose parent is the scheduler's span for
the run (the request's `traceparent`), in the tracer provider the process sets up;
`--otel-spans FILE` sets one up that writes every finished span to FILE as a JSON
line (opentelemetry-sdk's ConsoleSpanExporter).
"""

import argparse
import hashlib
import hmac
import json
import os
import secrets
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.1.0-python"
MAX_BODY = 1 << 20
MAX_WAIT_MS = 30_000
LOG_LINES = 1_000
MAX_LINE = 4096
RETENTION_S = 600
# Largest total of line bytes in one log chunk (the protocol's MAX_CHUNK_BYTES).
MAX_CHUNK_BYTES = 256 * 1024
# A result poll that asks for log lines is answered this long after it came, at the
# soonest, once lines past its offset are there.
LOG_BATCH_S = 1.0


class Permanent(Exception):
    """A failure the scheduler should not retry."""


def now_ms():
    return int(time.time() * 1000)


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def base_address(url):
    """An instance's base address as signatures name it: lower case, no final `/`."""
    return url.strip().rstrip("/").lower()


class Signer:
    """Checks requests signed with the group's secret and signs answers. A request
    to an instance is signed over the instance's base address and the path (the URL
    the scheduler called), so a request captured on its way to one instance does
    not pass at another: `addresses` are the base addresses this instance answers
    to."""

    def __init__(self, secret, window_ms=60_000, max_nonces=1_000_000, addresses=()):
        if len(secret) < 16:
            raise SystemExit("the group secret must be at least 16 bytes; there is no default")
        self.addresses = [base_address(a) for a in addresses]
        self.key = secret
        self.window = window_ms
        self.max_nonces = max_nonces
        self.nonces = OrderedDict()  # nonce -> expiry (ms)
        self.lock = threading.Lock()

    def mac(self, text):
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def check(self, method, path, headers, body):
        ts, nonce, sig = (headers.get(h) for h in
                          ("x-jobwheel-timestamp", "x-jobwheel-nonce", "x-jobwheel-signature"))
        if not (ts and nonce and sig):
            return "unsigned"
        try:
            ts = int(ts)
        except ValueError:
            return "unsigned"
        if not (16 <= len(nonce) <= 64) or any(c not in "0123456789abcdefABCDEF" for c in nonce):
            return "unsigned"
        digest = sha256_hex(body)
        if not any(hmac.compare_digest(self.mac(f"jobwheel-v1\n{method}\n{a}{path}\n{ts}\n{nonce}\n{digest}"),
                                       sig.lower())
                   for a in self.addresses):
            return "bad_signature"
        now = now_ms()
        if abs(now - ts) > self.window:
            return "skewed_timestamp"
        with self.lock:
            while self.nonces:
                first, expiry = next(iter(self.nonces.items()))
                if expiry > now:
                    break
                self.nonces.popitem(last=False)
            if nonce in self.nonces:
                return "replayed"
            if len(self.nonces) >= self.max_nonces:
                return "overloaded"
            self.nonces[nonce] = max(ts + self.window, now)
        return None

    def sign_answer(self, status, nonce, body):
        ts = now_ms()
        return ts, self.mac(f"jobwheel-v1-response\n{status}\n{nonce}\n{ts}\n{sha256_hex(body)}")


class Refused(RuntimeError):
    """The registration endpoint refused this instance's signature: beating again
    will not help."""


class Registrar:
    """Registers the instance at a scheduler's registration endpoint: a signed beat
    every `every` seconds, a signed leave at the end. Answers are checked against
    the group's secret; an endpoint whose clock is off refuses the first request as
    skewed, with its clock in the signed refusal, and is asked again on its clock."""

    def __init__(self, url, signer, info, every, secret_env):
        self.secret_env = secret_env
        self.url = url.rstrip("/")
        self.signer = signer
        self.info = info
        self.every = every
        self.offset = 0  # the endpoint's clock minus ours, ms
        self.stop = threading.Event()

    def call(self, path, body_obj):
        body = json.dumps(body_obj).encode()
        for _ in range(2):
            ts, nonce = now_ms() + self.offset, secrets.token_hex(16)
            # The registration endpoint is not an instance: its signatures name the path.
            sig = self.signer.mac(f"jobwheel-v1\nPOST\n{path}\n{ts}\n{nonce}\n{sha256_hex(body)}")
            req = urllib.request.Request(self.url + path, data=body, method="POST", headers={
                "content-type": "application/json", "x-jobwheel-timestamp": str(ts),
                "x-jobwheel-nonce": nonce, "x-jobwheel-signature": sig})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    status, data, headers = r.status, r.read(MAX_BODY), r.headers
            except urllib.error.HTTPError as e:
                status, data, headers = e.code, e.read(MAX_BODY), e.headers
            answer_ts, answer_sig = headers.get("x-jobwheel-timestamp"), headers.get("x-jobwheel-signature")
            expected = self.signer.mac(f"jobwheel-v1-response\n{status}\n{nonce}\n{answer_ts}\n{sha256_hex(data)}")
            if not (answer_ts and answer_sig and hmac.compare_digest(expected, answer_sig.lower())):
                if status == 401:
                    raise Refused(f"the endpoint refused our signature (HTTP 401): the secret in {self.secret_env} "
                                  f"is not group {self.info['group']}'s secret on that server, or it has no such group")
                raise RuntimeError(f"the endpoint's answer ({status}) does not verify with the group's secret")
            answer = json.loads(data or b"{}")
            if status == 401 and answer.get("error") == "skewed_timestamp":
                self.offset = int(answer_ts) - now_ms()
                continue
            if status == 401:
                raise Refused(f"{status} {answer.get('error')}: {answer.get('message')}")
            if status != 200:
                raise RuntimeError(f"{status} {answer.get('error')}: {answer.get('message')}")
            return answer
        raise RuntimeError("the endpoint refused the timestamp twice")

    def said_registered(self):
        print(f"registered in group {self.info['group']} as {self.info['address']} at {self.url}", file=sys.stderr, flush=True)

    def run(self, registered):
        """Beats every `every` seconds (the first beat is the caller's) until stopped,
        then leaves. The first beat that is written after failures says so."""
        while not self.stop.wait(self.every):
            try:
                self.call("/v1/registry/beat", self.info)
                if not registered:
                    registered = True
                    self.said_registered()
            except (OSError, RuntimeError, ValueError) as e:
                registered = False
                print(f"beat failed: {e}", file=sys.stderr, flush=True)
        try:
            self.call("/v1/registry/leave", {"group": self.info["group"], "address": self.info["address"]})
        except (OSError, RuntimeError, ValueError) as e:
            print(f"leave failed (the registration lapses): {e}", file=sys.stderr, flush=True)


try:
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # tracing is optional: the standard library is enough to serve
    otel_trace = None


def traced(run, fn):
    """Calls fn inside the run's span, the child of the scheduler's run span."""
    parent = run["req"].get("traceparent")
    if otel_trace is None or not isinstance(parent, str):
        return fn()
    cx = TraceContextTextMapPropagator().extract({"traceparent": parent})
    attrs = {"run_id": run["req"]["run_id"], "job": run["job"]["id"], "attempt": run["attempt"]}
    with otel_trace.get_tracer("jobwheel.executor").start_as_current_span(
            "jobwheel.remote_run", context=cx, attributes=attrs):
        return fn()


def export_spans_to(path):
    """Sets up a tracer provider writing every finished span to path, one JSON line each."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
    out = open(path, "a", buffering=1)
    line = lambda span: json.dumps(json.loads(span.to_json())) + "\n"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=line)))
    otel_trace.set_tracer_provider(provider)


class Context:
    """What a handler gets: the payload, a log, and the cancellation event."""

    def __init__(self, run, cond):
        self.run = run
        self.payload = run["job"].get("payload")
        self.cancelled = run["cancel"]
        # For a shard of a sharding broadcast: {"index": i, "total": n}; else None.
        self.shard = run["req"].get("shard")
        self._cond = cond

    def log(self, line):
        """Appends a line to the run's log (the last 1,000 lines wait here for the
        scheduler's next poll, which stores them with the run)."""
        raw = str(line).encode()[:MAX_LINE].decode(errors="ignore")
        with self._cond:
            buf = self.run["log"]
            if self.run["phase"] == "done":
                return
            buf.append(raw)
            while len(buf) > LOG_LINES:
                buf.popleft()
                self.run["log_first"] += 1
            self._cond.notify_all()


class State:
    def __init__(self, handlers, capacity, instance):
        self.handlers = handlers
        self.capacity = capacity
        self.instance = instance
        self.runs = {}  # (run_id, shard index or None) -> run
        self.jobs = {}  # job id (and "#shard") -> deque of run keys (running first)
        self.running = 0
        self.cond = threading.Condition()

    def forget_old(self):
        cutoff = time.monotonic() - RETENTION_S
        for rid in [r for r, run in self.runs.items() if run["ended"] and run["ended"] < cutoff]:
            del self.runs[rid]

    def admit(self, req):
        job = req.get("job") or {}
        handler = job.get("handler")
        if not isinstance(handler, str) or not isinstance(job.get("id"), str):
            return 400, {"error": "bad_request", "message": "job.id and job.handler are required"}
        if handler not in self.handlers:
            return 422, {"error": "unknown_handler", "message": f"this instance serves no handler {handler!r}"}
        token, block = req["token"], req.get("block", "serial")
        shard = req.get("shard")
        if shard is not None and not (isinstance(shard, dict) and 0 <= shard.get("index", -1) < shard.get("total", 0)):
            return 400, {"error": "bad_request", "message": "shard.index must be below shard.total"}
        rid = key_of(req["run_id"], shard and shard["index"])
        # Shards of one job are apart for the block strategy: each is its own work.
        block_key = job["id"] if shard is None else f"{job['id']}#{shard['index']}"
        with self.cond:
            self.forget_old()
            if rid in self.runs:
                run = self.runs[rid]
                if run["token"] != token:
                    return 409, {"error": "conflict", "message": "this run id was admitted with another token"}
                # An ended shard asked again with a later attempt is the shard's retry.
                if not (shard is not None and run["phase"] == "done" and req.get("attempt", 1) > run["attempt"]):
                    return 200, state_of(run)
                del self.runs[rid]
            queue = self.jobs.setdefault(block_key, deque())
            start_now = not queue
            if queue and block == "discard_later":
                return 409, {"error": "discarded",
                             "message": "a run of this job is in progress here (block strategy discard_later)"}
            if queue and block == "cover_early":
                for other in list(queue):
                    self.end(self.runs[other], {"status": "cancelled"}, start_next=False)
                start_now = True
            if start_now and self.running >= self.capacity:
                return 429, {"error": "busy", "message": "no free slot on this instance"}
            if not start_now and len(queue) > 1000:
                return 429, {"error": "busy", "message": "too many runs of this job are queued"}
            run = {"id": rid, "block_key": block_key, "attempt": req.get("attempt", 1), "token": token, "job": job,
                   "req": req, "phase": "running" if start_now else "queued",
                   "outcome": None, "cancel": threading.Event(), "ended": None, "log": deque(), "log_first": 0}
            self.runs[rid] = run
            if start_now:
                queue.appendleft(rid)
                self.start(run)
            else:
                queue.append(rid)
            return 200, state_of(run)

    def start(self, run):
        """Starts a run's thread; the caller holds the lock."""
        self.running += 1
        run["phase"] = "running"
        threading.Thread(target=self.execute, args=(run,), daemon=True).start()
        timeout = run["req"].get("timeout_ms")
        if timeout is not None:
            t = threading.Timer(timeout / 1000, self.expire, args=(run,))
            t.daemon = True
            t.start()

    def execute(self, run):
        ctx = Context(run, self.cond)
        try:
            traced(run, lambda: self.handlers[run["job"]["handler"]](ctx))
            outcome = {"status": "succeeded"}
        except Permanent as e:
            outcome = {"status": "failed", "error": str(e), "retry": "never"}
        except Exception as e:  # the handler's failure, retried by the job's policy
            outcome = {"status": "failed", "error": f"{type(e).__name__}: {e}", "retry": "policy"}
        with self.cond:
            self.end(run, outcome)

    def expire(self, run):
        with self.cond:
            self.end(run, {"status": "timed_out"})

    def end(self, run, outcome, start_next=True):
        """Records a run's end (the first one wins) and starts the next queued run of
        its job; the caller holds the lock."""
        if run["phase"] == "done":
            return
        run["cancel"].set()
        if run["phase"] == "running":
            self.running -= 1
        run["phase"], run["outcome"], run["ended"] = "done", outcome, time.monotonic()
        queue = self.jobs.get(run["block_key"], deque())
        if run["id"] in queue:
            queue.remove(run["id"])
        if queue:
            head = self.runs[queue[0]]
            if head["phase"] == "queued" and start_next:
                self.start(head)
        else:
            self.jobs.pop(run["block_key"], None)
        self.cond.notify_all()

    def result(self, rid, token, wait_ms, log_offset=None):
        """The run's state, waiting up to wait_ms for its end; with a log_offset,
        also until lines past it are there (answered LOG_BATCH_S after the request
        at the soonest, so a chatty run's lines come about once a second)."""
        start = time.monotonic()
        deadline = start + min(wait_ms, MAX_WAIT_MS) / 1000
        with self.cond:
            while True:
                run = self.runs.get(rid)
                if run is None or run["token"] != token:
                    return None
                now = time.monotonic()
                left = deadline - now
                if run["phase"] == "done" or left <= 0:
                    return state_of(run)
                if log_offset is not None and run["log_first"] + len(run["log"]) > log_offset:
                    batch = start + LOG_BATCH_S - now
                    if batch <= 0:
                        return state_of(run)
                    left = min(left, batch)
                self.cond.wait(left)

    def kill(self, rid, token):
        with self.cond:
            run = self.runs.get(rid)
            if run is None or run["token"] != token:
                return None
            if run["phase"] == "done":
                return False
            if run["phase"] == "queued":
                run["phase"] = "running"
                self.running += 1
            self.end(run, {"status": "cancelled"})
            return True


def key_of(run_id, shard_index):
    """A run on this instance: its id, and its shard's index when it is a shard."""
    return (run_id, shard_index)


def state_of(run):
    s = {"run_id": run["id"][0], "phase": run["phase"]}
    if run["outcome"] is not None:
        s["outcome"] = run["outcome"]
    return s


def make_handler(signer, state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # A client that stops sending mid-request is dropped after this long.
        timeout = 35

        def log_message(self, *args):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            nonce = self.headers.get("x-jobwheel-nonce") or ""
            ts, sig = signer.sign_answer(status, nonce, data)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("x-jobwheel-timestamp", str(ts))
            self.send_header("x-jobwheel-signature", sig)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            raw_length = (self.headers.get("content-length") or "0").strip()
            if not raw_length.isdigit() or not raw_length.isascii():
                # A length that is not a number (or is negative) cannot be trusted to
                # find the end of the body: answer, and close the connection.
                self.close_connection = True
                return self.answer(400, {"error": "bad_request",
                                         "message": "content-length must be a non-negative number"})
            length = int(raw_length)
            if length > MAX_BODY:
                # Read what a client may reasonably send so it sees the answer, then close.
                left = min(length, 64 * MAX_BODY)
                while left > 0:
                    chunk = self.rfile.read(min(left, 65536))
                    if not chunk:
                        break
                    left -= len(chunk)
                self.close_connection = True
                return self.answer(413, {"error": "too_large", "message": f"the body is over {MAX_BODY} bytes"})
            body = self.rfile.read(length)
            refusal = signer.check("POST", self.path, self.headers, body)
            if refusal:
                return self.answer(503 if refusal == "overloaded" else 401,
                                   {"error": refusal, "message": "request refused: " + refusal})
            try:
                req = json.loads(body or b"{}")
            except (ValueError, RecursionError) as e:
                # RecursionError: a body nested deeper than Python's parser goes.
                return self.answer(400, {"error": "bad_request", "message": f"not JSON: {type(e).__name__}"})
            if not isinstance(req, dict):
                return self.answer(400, {"error": "bad_request", "message": "the body must be a JSON object"})
            route = ROUTES.get(self.path)
            if route is None:
                return self.answer(404, {"error": "not_found", "message": "no such endpoint in protocol v1"})
            try:
                status, answer = route(state, req)
            except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
                status, answer = 400, {"error": "bad_request", "message": f"missing or bad field: {type(e).__name__} {e}"[:300]}
            self.answer(status, answer)

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that gave up (a timed-out long poll) is not an error here.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def unknown_run():
    return 404, {"error": "unknown_run", "message": "no run with this id and token on this instance"}


def beat(state, _req):
    with state.cond:
        queued = sum(1 for r in state.runs.values() if r["phase"] == "queued")
        return 200, {"instance": state.instance, "version": VERSION, "handlers": sorted(state.handlers),
                     "capacity": state.capacity, "running": state.running, "queued": queued}


def idle_beat(state, req):
    with state.cond:
        idle = state.running < state.capacity and not state.jobs.get(req["job_id"])
        return 200, {"idle": idle}


def run(state, req):
    status, answer = state.admit(req)
    wait = req.get("wait_ms", 0)
    shard = req.get("shard")
    key = key_of(req["run_id"], shard and shard["index"])
    if status == 200 and answer["phase"] != "done" and wait:
        answer = state.result(key, req["token"], wait, req.get("log_offset")) or answer
    if status == 200:
        answer = with_log(state, key, answer, req.get("log_offset"))
    return status, answer


def result(state, req):
    key = key_of(req["run_id"], req.get("shard"))
    s = state.result(key, req["token"], req.get("wait_ms", 0), req.get("log_offset"))
    return (200, with_log(state, key, s, req.get("log_offset"))) if s else unknown_run()


def kill(state, req):
    k = state.kill(key_of(req["run_id"], req.get("shard")), req["token"])
    return (200, {"killed": k}) if k is not None else unknown_run()


def read_log(state, key, offset, limit):
    """Up to `limit` of a run's lines from `offset` (a LogChunk), or None."""
    with state.cond:
        run = state.runs.get(key)
        if run is None:
            return None
        first = run["log_first"]
        offset = max(offset, first)
        lines, size = [], 0
        for line in list(run["log"])[offset - first:offset - first + limit]:
            size += len(line.encode())
            if size > MAX_CHUNK_BYTES and lines:
                break
            lines.append(line)
        nxt = offset + len(lines)
        return {"lines": lines, "next_offset": nxt, "first_offset": first,
                "done": run["phase"] == "done", "more": nxt < first + len(run["log"])}


def with_log(state, key, answer, offset):
    """A run or result answer with the run's lines from `offset` when the request
    asked for them: the scheduler stores them with the run, so this buffer is only
    where lines wait until the scheduler's next poll."""
    if offset is None:
        return answer
    chunk = read_log(state, key, offset, 1000)
    if chunk is None:
        return answer
    if answer["phase"] == "done":
        chunk["done"] = True
    return dict(answer, log=chunk)


def log(state, req):
    key = key_of(req["run_id"], req.get("shard"))
    with state.cond:
        run = state.runs.get(key)
        if run is None or run["token"] != req["token"]:
            return unknown_run()
    chunk = read_log(state, key, req.get("offset", 0), min(req.get("limit", 200), 1000))
    return (200, chunk) if chunk else unknown_run()


ROUTES = {"/v1/beat": beat, "/v1/idle-beat": idle_beat, "/v1/run": run, "/v1/result": result,
          "/v1/kill": kill, "/v1/log": log}


def report(ctx):
    """The README's example job: says what it reports on, in its log, and succeeds."""
    p = ctx.payload if isinstance(ctx.payload, dict) else {}
    ctx.log(f"report for {p.get('date', 'today')}: started")
    for part in ("orders", "refunds", "totals"):
        ctx.log(f"report: {part} done")
    ctx.log("report: finished")


# The demonstration handlers the conformance tests call.
def echo(ctx):
    ctx.log(f"echo {json.dumps(ctx.payload, sort_keys=True)}")


def fail(_ctx):
    raise Permanent("export failed: disk full")


def wait(ctx):
    ms = (ctx.payload or {}).get("ms") if isinstance(ctx.payload, dict) else None
    ctx.cancelled.wait(None if ms is None else ms / 1000)


def shard(ctx):
    if ctx.shard is None:
        raise Permanent("not a shard")
    ctx.log(f"shard {ctx.shard['index']}/{ctx.shard['total']} attempt {ctx.run['req'].get('attempt', 1)}")
    fail_shard = ctx.payload.get("fail_shard") if isinstance(ctx.payload, dict) else None
    if fail_shard == ctx.shard["index"] and ctx.run["req"].get("attempt", 1) == 1:
        raise RuntimeError(f"shard {fail_shard} failed once")


def chatty(ctx):
    for i in range(3):
        ctx.log(f"step <{i}> line={i}")
    ctx.log("payload " + json.dumps(ctx.payload, separators=(",", ":"), sort_keys=True))
    ctx.cancelled.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--group", required=True)
    p.add_argument("--bind", default="127.0.0.1:0")
    p.add_argument("--instance")
    p.add_argument("--capacity", type=int, default=64)
    p.add_argument("--secret-env", default="JOBWHEEL_GROUP_SECRET",
                   help="the environment variable holding the group's secret")
    p.add_argument("--register", help="a scheduler's registration endpoint to beat at (base URL)")
    p.add_argument("--advertise", help="the address schedulers reach this instance at "
                                       "(default: http:// and the bound address)")
    p.add_argument("--beat-every", type=float, default=30.0, help="seconds between beats (default 30)")
    p.add_argument("--otel-spans", help="write every finished OpenTelemetry span to this file, one JSON "
                                        "line each (needs the opentelemetry-sdk package)")
    a = p.parse_args()
    if a.otel_spans:
        if otel_trace is None:
            raise SystemExit("--otel-spans needs the opentelemetry-sdk package (pip install opentelemetry-sdk)")
        export_spans_to(a.otel_spans)
    secret = os.environ.get(a.secret_env, "").encode()
    host, port = a.bind.rsplit(":", 1)
    server = Server((host, int(port)), None)
    addr = f"{server.server_address[0]}:{server.server_address[1]}"
    # The addresses schedulers call this instance at: the advertised one, and the
    # bound one.
    signer = Signer(secret, addresses=[x for x in (a.advertise, f"http://{addr}") if x])
    state = State({"echo": echo, "fail": fail, "wait": wait, "chatty": chatty, "shard": shard, "report": report}, a.capacity, a.instance or addr)
    server.RequestHandlerClass = make_handler(signer, state)
    registrar = None
    registered = False
    if a.register:
        if not a.advertise and server.server_address[0] in ("0.0.0.0", "::"):
            raise SystemExit("bound to every interface: say where schedulers reach this instance with --advertise")
        info = {"group": a.group, "address": a.advertise or f"http://{addr}", "handlers": sorted(state.handlers),
                "capacity": a.capacity, "version": VERSION}
        registrar = Registrar(a.register, signer, info, a.beat_every, a.secret_env)
        # The first beat before serving: a refused signature ends the program (the
        # secret is wrong; beating again will not help); an endpoint not up yet is
        # tried again by the beats.
        try:
            registrar.call("/v1/registry/beat", info)
            registered = True
        except Refused as e:
            raise SystemExit(f"registration refused: {e}")
        except (OSError, RuntimeError, ValueError) as e:
            print(f"first beat failed (retrying every {a.beat_every}s): {e}", file=sys.stderr, flush=True)
        beats = threading.Thread(target=registrar.run, args=(registered,), daemon=True)
        beats.start()
    print(f"listening on {addr}", flush=True)
    if registered:
        registrar.said_registered()

    def stop(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if registrar is not None:
            registrar.stop.set()
            beats.join(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
