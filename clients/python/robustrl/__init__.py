"""robustrl's Python side: the agent client, following the agent's commands, launchers, named weights,
engine integrations.

- ``robustrl.AgentClient`` — the agent's local API (``robustrl_agent``, re-exported here);
- ``robustrl.cooperate`` — a framework that owns its processes follows the agent's commands
  (``CommandFollower``);
- ``robustrl.torchrun`` — ``python -m robustrl.torchrun --nproc-per-node N -- train.py``: torchrun ranked
  and restarted by robustrl;
- ``robustrl.ray`` — ``ElasticWorkerGroup``: a Ray driver's workers created and destroyed as robustrl's
  controller says (needs Ray);
- ``robustrl.named_weights`` (named, sharded weight versions in host memory), ``robustrl.vllm_extension``
  (the vLLM worker extension that loads them), ``robustrl.vllm_loader`` (the load sequence over vLLM's
  HTTP routes).
"""

from robustrl_agent import AgentClient, AgentError

__version__ = "0.2.0"

__all__ = ["AgentClient", "AgentError", "__version__"]
