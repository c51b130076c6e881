"""share_forksrv TAG MODE [STEPS=300] [MS=20]: Python's socketserver.ForkingTCPServer (a child
forked per connection, which holds the listener too; no SO_REUSEADDR, so every connection the
server closes first leaves a TIME_WAIT socket on its port) and a forked client process talking
to it over 127.0.0.1: each step a line on a connection kept from the start (its handler lives
throughout) and one on a new connection, each upper-case echo checked. The client prints `TAG
step N`, then `TAG DONE checksum=... steps=STEPS` (ckpt_counter's checksum) and exits non-zero
on a wrong echo; the server then ends with the client's status. MODE is unused ("tcp").

Each handler greets its connection first and the client sends only after the greeting: what a
connection still waiting in the listener's queue had sent is lost at a checkpoint (no one can
read it; crac says so, docs/DECISIONS.md "Listeners and the connections waiting in them"), and
a loaded machine let a checkpoint catch the client's line there."""

import os
import socket
import socketserver
import sys
import threading
import time

from step_sum import FNV_BASIS, fnv_step


class Upper(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(b"ready\n")
        self.wfile.flush()
        for line in self.rfile:
            self.wfile.write(line.upper())
            self.wfile.flush()


def client(tag: str, port: int, steps: int, ms: int) -> int:
    kept = socket.create_connection(("127.0.0.1", port), timeout=120)
    kept_in = kept.makefile("rb")
    greeted = kept_in.readline() == b"ready\n"
    h = FNV_BASIS
    for k in range(1, steps + 1):
        kept.sendall(f"kept {k}\n".encode())
        got = kept_in.readline()
        with socket.create_connection(("127.0.0.1", port), timeout=120) as conn:
            conn_in = conn.makefile("rb")
            greeted = greeted and conn_in.readline() == b"ready\n"
            conn.sendall(f"hello {k}\n".encode())
            got += conn_in.readline()
        if not greeted or got != f"KEPT {k}\nHELLO {k}\n".encode():
            print(f"share_forksrv: FAIL at step {k}: {got!r}", file=sys.stderr)
            return 1
        h = fnv_step(h, k)
        print(f"{tag} step {k}", flush=True)
        time.sleep(ms / 1000)
    kept.close()
    print(f"{tag} DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


def main() -> int:
    tag = sys.argv[1]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    server = socketserver.ForkingTCPServer(("127.0.0.1", 0), Upper)
    port = server.server_address[1]
    kid = os.fork()
    if kid == 0:
        server.socket.close()
        os._exit(client(tag, port, steps, ms))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _, status = os.waitpid(kid, 0)
    server.shutdown()
    server.server_close()  # waits for the handlers
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
