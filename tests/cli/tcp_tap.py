#!/usr/bin/env python3
"""tcp_tap.py PORTFILE TARGET_HOST:PORT CAPTURE -- a TCP proxy for tests.

Listens on 127.0.0.1 (a free port, written to PORTFILE), forwards every
connection to TARGET and appends the bytes of both directions to CAPTURE,
so a test can look at what crosses the wire (test_tls.sh: no plaintext).
Runs until killed.
"""
import socket
import sys
import threading

lock = threading.Lock()


def pump(src, dst, cap):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            with lock:
                cap.write(b)
                cap.flush()
            dst.sendall(b)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    portfile, target, capfile = sys.argv[1:4]
    host, port = target.rsplit(":", 1)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    cap = open(capfile, "ab")
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    import os
    os.rename(portfile + ".tmp", portfile)
    while True:
        c, _ = ls.accept()
        u = socket.create_connection((host, int(port)))
        for a, b in ((c, u), (u, c)):
            threading.Thread(target=pump, args=(a, b, cap), daemon=True).start()


if __name__ == "__main__":
    main()
