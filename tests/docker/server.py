"""A real rewardbox server on a loopback port, for the docker tier: uvicorn
serving `create_app` in a thread of the test process, behind a real socket."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from rewardbox.rewards.registry import configured_registry
from rewardbox.rewards.server import ServerSettings, Service, create_app
from rewardbox.sandbox import Limits, Sandbox


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(sandbox: Sandbox, settings: ServerSettings | None = None,
                   limits: Limits | None = None) -> Iterator[str]:
    """Yields the base URL (http://127.0.0.1:PORT) while the server runs."""
    service = Service(configured_registry(sandbox=sandbox, limits=limits), sandbox, settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        service.registry.get("correctness").close()
