"""Registers `rewardbox_session` (a reward) and `run_code` (a tool) with AgentFly,
both over one rewardbox session per rollout.

The tool saves the model's code as solution.py in the rollout's session and
runs it; the reward scores that solution.py against the row's `label` when the
chain ends; AgentFly's `end_resource(scope="rollout")` then removes the
container. Import this module where the agent is built, give the agent the
tool, and train with `agent.reward_name=rewardbox_session`.
"""

from agentfly.rewards import reward
from agentfly.tools import tool

from rewardbox.adapters.agentfly_session import agentfly_session_reward, run_code

__all__ = ["rewardbox_session", "run_code_tool"]

run_code_tool = tool(name="run_code", description="Save Python code as solution.py in your workspace and run it; "
                     "returns the exit status, stdout and stderr. solution.py is graded at the end.")(run_code)
rewardbox_session = reward(name="rewardbox_session")(agentfly_session_reward(label_column="label"))
