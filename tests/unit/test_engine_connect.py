"""Connecting to the engine is one round trip: the API version's request,
which is also the check that the engine answers (issue 21: every round trip
before the first container is in the command line's time to its first
sample)."""

import http.server
import json
import socketserver
import threading

from rewardbox.sandbox.engine import DockerEngine


class _Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def test_connecting_asks_the_engine_once(tmp_path):
    paths: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            paths.append(self.path)
            body = json.dumps({"ApiVersion": "1.41", "Version": "test"}).encode() if "version" in self.path else b"OK"
            self.send_response(200)
            self.send_header("Content-Type", "application/json" if body != b"OK" else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def address_string(self) -> str:  # a Unix socket has no client address
            return "engine"

        def log_message(self, *args: object) -> None:
            pass

    socket_path = str(tmp_path / "engine.sock")
    with _Engine(socket_path, Handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        engine = DockerEngine(base_url=f"unix://{socket_path}", retry_s=1)
        engine.close()
        server.shutdown()
    assert [p.rsplit("/", 1)[-1] for p in paths] == ["version"]
