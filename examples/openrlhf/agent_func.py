"""rewardbox's multi-step coding agent for OpenRLHF. Pass this file's path:

    --train.agent_func_path /path/to/agent_func.py    (OpenRLHF 0.10.2 and later)
    --agent_func_path /path/to/agent_func.py          (earlier releases)

Each episode: the model answers, the tests run, failing tests and their errors
come back as a user turn; it ends when the tests pass or after
REWARDBOX_MAX_STEPS attempts, with the reward of the last attempt. The steps
of an episode run in one rewardbox session (a container of its own, removed
when the episode ends). Settings come from REWARDBOX_* environment variables
(README.md).
"""

import asyncio
import copy

from openrlhf.utils.agent import AgentExecutorBase, AgentInstanceBase

from rewardbox.adapters.openrlhf import CodingEpisode


class AgentInstance(AgentInstanceBase):
    def __init__(self, *args, **kwargs):
        self.episode = CodingEpisode()

    async def reset(self, states: dict, **kwargs):
        return self.episode.reset(states)

    async def step(self, states: dict, **kwargs):
        # The tests take seconds; the rollout's event loop must not wait for them.
        return await asyncio.to_thread(self.episode.step, states)


try:
    from openrlhf.utils.agent import MultiTurnAgentExecutor
except ImportError:  # earlier releases: the base class runs the episode and takes the trainer's arguments

    class AgentExecutor(AgentExecutorBase):
        def __init__(self, *args, **kwargs):
            super().__init__(AgentInstance, *args, **kwargs)

else:

    class AgentExecutor(MultiTurnAgentExecutor):
        def __init__(self):
            super().__init__(AgentInstance)

        async def execute(self, *args, **kwargs):
            if not hasattr(self, "agent_instance"):  # 0.9.1.post1 and later: an instance per episode already
                return await super().execute(*args, **kwargs)
            # 0.9.1 builds ONE instance in __init__ and runs every episode on it at
            # once; an episode's steps, prompt and reward paid so far would mix.
            episode = copy.copy(self)
            episode.agent_instance = AgentInstance()
            return await MultiTurnAgentExecutor.execute(episode, *args, **kwargs)
