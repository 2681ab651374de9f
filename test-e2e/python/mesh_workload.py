"""A Bookinfo-style mesh workload on gRPC C-core (Python grpcio), the twin of
libs/bookinfo/src/mesh-workload.ts: the same service, the same roles, the same
HTTP control protocol, so a test drives either kind the same way.

It joins the mesh as a proxyless app does under Istio: grpcio reads the
bootstrap the agent wrote (GRPC_XDS_BOOTSTRAP), talks xDS to the agent, and
takes its certificates from the files the agent keeps fresh.

  WORKLOAD_ROLE=server WORKLOAD_NAME=reviews-v1 WORKLOAD_ADDRESS=127.0.0.51:19080 python3 mesh_workload.py
  WORKLOAD_ROLE=client CONTROL_PORT=18080 python3 mesh_workload.py

A server serves /bookinfo.Reviews/Whoami (its name) and /bookinfo.Reviews/Caller
(the caller's SPIFFE id, "plaintext" without mTLS). With FAIL_FIRST_OF=N it
fails the first N-1 of every N calls with UNAVAILABLE, to exercise retries.

A client answers on 127.0.0.1:CONTROL_PORT:
  GET /tally?target=xds:///host:port&calls=N[&header=name:value]  -> {"counts": {answer: n}, "errors": [..]}
  GET /caller?target=xds:///host:port                             -> {"answer": "..."}
An answer is the server's reply, or "error:<STATUS_NAME>".

Messages are raw UTF-8 bytes, as in grpc-app.ts: generic handlers, no protoc.
"""

import json
import os
import signal
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import grpc
import grpc.experimental

SERVICE = "bookinfo.Reviews"


def required(name):
    value = os.environ.get(name)
    if not value:
        print(f"mesh_workload: {name} is required", file=sys.stderr, flush=True)
        sys.exit(2)
    return value


def say(payload):
    print(json.dumps(payload), flush=True)


def caller_identity(context):
    """The peer's SPIFFE id from the TLS auth context, or "plaintext"."""
    auth = context.auth_context()
    spiffe = auth.get("peer_spiffe_id")
    if spiffe:
        return spiffe[0].decode()
    for san in auth.get("x509_subject_alternative_name", []):
        if san.startswith(b"spiffe://"):
            return san.decode()
    return "plaintext"


def run_server():
    name = required("WORKLOAD_NAME")
    address = required("WORKLOAD_ADDRESS")
    fail_first_of = int(os.environ.get("FAIL_FIRST_OF", "0"))
    lock = threading.Lock()
    calls = [0]

    def whoami(_request, context):
        with lock:
            calls[0] += 1
            number = calls[0]
        if fail_first_of > 1 and number % fail_first_of != 0:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{name} fails call {number} on purpose")
        return name.encode()

    def caller(_request, context):
        return caller_identity(context).encode()

    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Whoami": grpc.unary_unary_rpc_method_handler(whoami),
            "Caller": grpc.unary_unary_rpc_method_handler(caller),
        },
    )
    # xds=True: the server waits for its inbound listener from push and
    # applies its TLS and authorization; until then it does not serve.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), xds=True)
    server.add_generic_rpc_handlers((handler,))
    server.add_secure_port(address, grpc.xds_server_credentials(grpc.insecure_server_credentials()))
    server.start()
    say({"started": True, "grpc": grpc.__version__})

    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    server.stop(None)


def call(channel, method, metadata, timeout=5.0):
    invoke = channel.unary_unary(f"/{SERVICE}/{method}")
    try:
        return {"answer": invoke(b"", metadata=metadata, timeout=timeout).decode()}
    except grpc.RpcError as error:
        return {"answer": f"error:{error.code().name}", "error": error.details() or ""}


def run_client():
    port = int(required("CONTROL_PORT"))
    channels = {}
    channels_lock = threading.Lock()

    def channel_for(target):
        with channels_lock:
            channel = channels.get(target)
            if channel is None:
                # Plaintext unless the cluster push sent asks for mTLS.
                credentials = grpc.xds_channel_credentials(grpc.experimental.insecure_channel_credentials())
                channel = grpc.secure_channel(target, credentials)
                channels[target] = channel
            return channel

    class Control(BaseHTTPRequestHandler):
        def log_message(self, *_):
            pass

        def do_GET(self):
            url = urlparse(self.path)
            query = parse_qs(url.query)
            target = (query.get("target") or [None])[0]
            if not target:
                self.send_error(400, "target is required")
                return
            metadata = []
            for header in query.get("header", []):
                key, _, value = header.partition(":")
                if key:
                    metadata.append((key.lower(), value))
            channel = channel_for(target)
            if url.path == "/caller":
                body = call(channel, "Caller", metadata)
            elif url.path == "/tally":
                counts = {}
                errors = set()
                for _ in range(int((query.get("calls") or ["20"])[0])):
                    result = call(channel, "Whoami", metadata)
                    counts[result["answer"]] = counts.get(result["answer"], 0) + 1
                    if "error" in result:
                        errors.add(f"{result['answer']}: {result['error']}")
                body = {"counts": counts, "errors": sorted(errors)}
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    http = ThreadingHTTPServer(("127.0.0.1", port), Control)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=http.shutdown).start())
    say({"control": port, "grpc": grpc.__version__})
    http.serve_forever()
    for channel in channels.values():
        channel.close()


if __name__ == "__main__":
    role = os.environ.get("WORKLOAD_ROLE")
    if role == "server":
        run_server()
    elif role == "client":
        run_client()
    else:
        print("mesh_workload: WORKLOAD_ROLE must be server or client", file=sys.stderr)
        sys.exit(2)
