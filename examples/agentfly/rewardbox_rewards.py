"""Registers `rewardbox_code` in AgentFly's reward registry.

Import this module where the agent is built, then train with
`agent.reward_name=rewardbox_code`. The data rows carry the label in `label`,
in any format rewardbox reads (see the main README).
"""

from agentfly.rewards import reward

from rewardbox.adapters.agentfly import agentfly_async_reward

__all__ = ["rewardbox_code"]

rewardbox_code = reward(name="rewardbox_code")(agentfly_async_reward(name="rewardbox_code", label_column="label"))
