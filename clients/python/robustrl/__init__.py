"""robustrl's Python side: the agent client, named weights, engine integrations.

``robustrl.named_weights`` (named, sharded weight versions in host memory), ``robustrl.vllm_extension``
(the vLLM worker extension that loads them), ``robustrl.vllm_loader`` (the load sequence over vLLM's
HTTP routes). The agent client is ``robustrl_agent.AgentClient`` (re-exported here).
"""

from robustrl_agent import AgentClient, AgentError

__all__ = ["AgentClient", "AgentError"]
