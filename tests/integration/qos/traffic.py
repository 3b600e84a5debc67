"""A tiny bounded iperf for the network QoS test, run inside network namespaces with `ip netns exec`.

    python traffic.py serve PORT SECONDS      # count bytes per source IP for SECONDS, print JSON
    python traffic.py send SRC DST PORT SECONDS

The server's window opens at the first byte received and closes SECONDS later; clients send for
longer than that, so every sender pushes through the whole window. The server prints
`{"<src ip>": bits_per_second, ...}`.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

CHUNK = b"x" * 65536


def serve(port: int, seconds: float) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(8)
    listener.settimeout(0.2)
    print("ready", flush=True)
    counts: dict[str, int] = {}
    lock = threading.Lock()
    window: list[float] = []
    done = threading.Event()

    def reader(conn: socket.socket, peer: str) -> None:
        conn.settimeout(0.2)
        with conn:
            while not done.is_set():
                try:
                    data = conn.recv(262144)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                now = time.monotonic()
                with lock:
                    if not window:
                        window.append(now)
                    if now - window[0] <= seconds:
                        counts[peer] = counts.get(peer, 0) + len(data)

    threads = []
    deadline = time.monotonic() + seconds + 30
    while time.monotonic() < deadline and not (window and time.monotonic() - window[0] > seconds):
        try:
            conn, (peer, _) = listener.accept()
        except TimeoutError:
            continue
        t = threading.Thread(target=reader, args=(conn, peer), daemon=True)
        t.start()
        threads.append(t)
    done.set()
    for t in threads:
        t.join(timeout=2)
    listener.close()
    print(json.dumps({peer: n * 8 / seconds for peer, n in counts.items()}), flush=True)


def send(src: str, dst: str, port: int, seconds: float) -> None:
    sock = socket.create_connection((dst, port), timeout=5, source_address=(src, 0))
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            sock.sendall(CHUNK)
    except OSError:
        pass  # the server closed its window
    finally:
        sock.close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), float(sys.argv[3]))
    else:
        send(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
