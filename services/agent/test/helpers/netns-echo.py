"""Listeners and clients for the agent iptables netns suite (run with `ip netns exec`).

  serve <name> <tcp|udp|tproxy>:<port> ...
                                      answer every TCP connection and UDP datagram with one
                                      JSON line: {"at": "<name>:<port>", "original": "<ip>:<port>"|null};
                                      "original" is SO_ORIGINAL_DST, the destination before a
                                      REDIRECT. A tproxy socket (IP_TRANSPARENT, as Envoy's inbound
                                      listener in TPROXY mode) answers its local address, which is
                                      the original destination, and the client's address.
                                      Prints "ready" once every socket is bound.
  tcp <host> <port>                   connect, print the answer line
  udp <host> <port>                   send one datagram, print the answer

Python, because Node has no getsockopt for SO_ORIGINAL_DST.
"""

import json
import socket
import struct
import sys
import threading

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
IP_TRANSPARENT = 19  # linux/in.h


def original_destination(conn):
    try:
        raw = conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    except OSError:
        return None
    port = struct.unpack("!H", raw[2:4])[0]
    return f"{socket.inet_ntoa(raw[4:8])}:{port}"


def serve_tcp(name, port, transparent=False):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if transparent:
        server.setsockopt(socket.SOL_IP, IP_TRANSPARENT, 1)
    server.bind(("0.0.0.0", port))
    server.listen(16)

    def loop():
        while True:
            conn, client = server.accept()
            local = conn.getsockname()
            if transparent:
                answer = {"at": f"{name}:{port}", "original": f"{local[0]}:{local[1]}", "client": client[0]}
            else:
                original = original_destination(conn)
                # Without a REDIRECT, conntrack's original destination is the socket's own address.
                if original == f"{local[0]}:{local[1]}":
                    original = None
                answer = {"at": f"{name}:{port}", "original": original}
            conn.sendall((json.dumps(answer) + "\n").encode())
            conn.close()

    threading.Thread(target=loop, daemon=True).start()


def serve_udp(name, port):
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("0.0.0.0", port))

    def loop():
        while True:
            _, client = server.recvfrom(4096)
            answer = {"at": f"{name}:{port}", "original": None}
            server.sendto((json.dumps(answer) + "\n").encode(), client)

    threading.Thread(target=loop, daemon=True).start()


def main():
    mode = sys.argv[1]
    if mode == "serve":
        name = sys.argv[2]
        for spec in sys.argv[3:]:
            protocol, port = spec.split(":")
            if protocol == "udp":
                serve_udp(name, int(port))
            else:
                serve_tcp(name, int(port), transparent=protocol == "tproxy")
        print("ready", flush=True)
        threading.Event().wait()
    elif mode == "tcp":
        conn = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=10)
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        print(data.decode().strip(), flush=True)
    elif mode == "udp":
        conn = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        conn.settimeout(10)
        conn.sendto(b"query", (sys.argv[2], int(sys.argv[3])))
        data, _ = conn.recvfrom(4096)
        print(data.decode().strip(), flush=True)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
