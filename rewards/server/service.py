"""What every route shares (`Service`: the registry of rewards, the line for
the sandbox, the settings) and how a route gets it (`request_service`). The
routers import this module, and the app (rewardbox.rewards.server.app)
imports the routers: neither imports the other back.
"""

from collections.abc import Hashable, Sequence

from fastapi import HTTPException, Request

from rewardbox.adapters import score_async
from rewardbox.rewards.base import Reward, RewardOutput, Sample
from rewardbox.rewards.registry import Registry, UnknownRewardError
from rewardbox.rewards.server.config import ServerSettings
from rewardbox.rewards.server.line import Line
from rewardbox.rewards.server.metrics import ServiceMetrics
from rewardbox.rewards.server.session_registry import SessionRegistry
from rewardbox.sandbox.backend import SandboxBackend


class Service:
    """What the routes share. Thread-safe."""

    def __init__(self, registry: Registry, sandbox: SandboxBackend, settings: ServerSettings | None = None):
        self.registry = registry
        self.sandbox = sandbox
        self.settings = settings or ServerSettings()
        s = self.settings
        self.line = Line(s.max_waiting_samples, s.max_held_samples, s.keep_s)
        self.metrics = ServiceMetrics(self)  # a registry of its own: a process may hold several services
        self.sessions = SessionRegistry(s.max_sessions)  # /v1/sessions

    def close_sessions(self) -> None:
        """Closes every session (their containers removed) and refuses new
        ones: the app's lifespan calls it when the service stops. Blocking."""
        self.sessions.close_all()

    def reward(self, name: str | None) -> Reward:
        """The named reward (or mix); the default when None. 400 for an unknown name."""
        try:
            return self.registry.resolve(name or self.settings.default_reward)
        except (UnknownRewardError, ValueError) as exc:
            raise HTTPException(400, str(exc)) from None

    @property
    def waiting(self) -> int:
        """Samples in the sandbox (running or queued for a container)."""
        return self.line.waiting

    @waiting.setter
    def waiting(self, samples: int) -> None:  # for stand-ins of a loaded service in tests
        self.line.waiting = samples

    async def score(self, reward: Reward, samples: Sequence[Sample], key: Hashable | None = None) -> list[RewardOutput]:
        """Every sample scored, in order; a failure of ours raises `SandboxError`.
        Requests of the same `key` (the same content) share one scoring, so
        that a client's retry picks up where it left; `Held` after `hold_s`."""
        if not samples:
            return []

        async def run() -> list[RewardOutput]:
            outputs = await score_async(reward, samples)
            self.metrics.scored(outputs)
            return outputs

        return await self.line.wait(object() if key is None else key, len(samples), run, self.settings.hold_s)

    def check_sizes(self, texts: Sequence[str], what: str) -> None:
        limit = self.settings.max_completion_bytes
        for i, text in enumerate(texts):
            if len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit:
                raise HTTPException(413, f"{what}[{i}] is over the limit of {limit} bytes")


def request_service(request: Request) -> Service:
    service: Service = request.app.state.service  # set by create_app
    return service
