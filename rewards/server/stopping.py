"""`rewardbox serve` until SIGTERM or SIGINT: uvicorn's server stopping the
sandbox (`StoppableSandbox.stop`) at the first signal. Apart from
`rewards/lifecycle.py`, whose stop `rewardbox score` shares: the command line
imports uvicorn only to serve.
"""

import signal
import threading
from types import FrameType
from typing import Any

import uvicorn

from rewardbox.rewards.lifecycle import StoppableSandbox

# In-flight requests that need no container (math) get this long to finish
# after a stop; requests waiting on the sandbox are answered at once.
STOP_GRACE_S = 5  # whole seconds: uvicorn's timeout_graceful_shutdown is an int


class StoppingServer(uvicorn.Server):
    """uvicorn's server, stopping `sandbox` at the first SIGTERM or SIGINT:
    new connections are refused, requests waiting on the sandbox are answered
    (503) at once, the rest get `STOP_GRACE_S`."""

    def __init__(self, config: uvicorn.Config, sandbox: StoppableSandbox):
        super().__init__(config)
        self.sandbox = sandbox
        self.stopping: threading.Thread | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Not uvicorn's own: it records the signal and raises it again after
        # its shutdown, and SIGTERM's default action then ends the process
        # before the sandbox is closed (its containers left behind).
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True
        if self.stopping is None:
            # On a thread: the event loop must go on answering while containers are removed.
            self.stopping = threading.Thread(target=self.sandbox.stop, name="rewardbox-stop")
            self.stopping.start()


def serve(app: Any, sandbox: StoppableSandbox, host: str, port: int, log_level: str) -> None:
    """Serves `app` until SIGTERM or SIGINT; returns once `sandbox` is stopped."""
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=STOP_GRACE_S)
    server = StoppingServer(config, sandbox)
    try:
        server.run()
    finally:
        sandbox.stop()
        if server.stopping is not None:
            server.stopping.join()
