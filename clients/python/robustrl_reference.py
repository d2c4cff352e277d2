"""A reference RL job for robustrl: a trainer, a rollout engine and the agent loops, standard library only.

It trains nothing, but it walks every path the control plane protects the way a real framework does, so
a deployment (or the chaos campaign) can be exercised end to end without GPUs or an ML framework:

    python3 robustrl_reference.py trainer       # one trainer rank; its agent runs it (ROBUSTRL_TRAINER_COMMAND)
    python3 robustrl_reference.py engine        # a rollout machine's inference engine (ROBUSTRL_ROLLOUT_COMMAND)
    python3 robustrl_reference.py agent-loops   # the agent workers: every step's prompts through the router

The job (semi-synchronous, one step off-policy):

- Weight version ``v`` is the policy after training step ``v``; version 0 is the initial policy.
- Step ``s`` (1..steps) trains on batch ``step-s``: ``batch_size`` prompts ``s<s>-p<k>``, one sample each,
  each a multi-turn trajectory with tool calls, generated through the router while the trainer trains
  step ``s-1`` (the agent loops start batch ``s`` once an engine serves version ``s-2`` or newer).
- The trainer waits for the batch in the request manager, fetches its completed trajectories within
  the staleness bound, "trains" (a digest of the trajectories, and a sleep), checkpoints after every
  step (so a restart retries exactly the step that failed), and rank 0 publishes the new version
  through its agent. Ranks meet at a TCP barrier at ``MASTER_ADDR:MASTER_PORT`` before each step, as
  NCCL would: a dead rank leaves the others stuck in the barrier, which is what the detector must see.
- An engine serves the version its agent holds whole (``/v1/weights/latest``), and writes it into every
  answer (``v<version>:``), so a turn's content says which weights produced it.

Everything a run did is appended to ``<state dir>/ledger.jsonl`` (one JSON object per line, fsync'd):
``trained`` (step, rank, attempt, trajectories used, digest), ``published``, ``checkpoint``, ``completed``
(agent loops: trajectory, turns, restarts). The campaign reads it to check its invariants.

Configuration comes from the environment the agent gives its role process (ROBUSTRL_JOB_ID,
ROBUSTRL_AGENT_URL, RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ROBUSTRL_RETRY_STEP...) and from
ROBUSTRL_REF_* variables (see ``Settings``); command-line flags override both.

This module is the command line; the job's parts are modules of their own beside it:
``robustrl_reference_settings``, ``_ledger``, ``_policy``, ``_http``, ``_trainer``, ``_engine`` and ``_loops``.
"""

import argparse
import logging
import os
import sys
from typing import List, Optional

from robustrl_reference_engine import ReferenceEngine
from robustrl_reference_http import http_json, retrying  # noqa: F401 (re-exported)
from robustrl_reference_ledger import Ledger
from robustrl_reference_loops import AgentLoops
from robustrl_reference_policy import BUCKET_BYTES, BUCKETS, engine_reply, tool_result, weights_bytes  # noqa: F401 (re-exported)
from robustrl_reference_settings import Settings
from robustrl_reference_trainer import StepBarrier, TrainerRank  # noqa: F401 (re-exported)

__all__ = ["Settings", "Ledger", "TrainerRank", "ReferenceEngine", "AgentLoops", "engine_reply", "tool_result", "weights_bytes", "main"]

logger = logging.getLogger("robustrl_reference")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="robustrl_reference.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=["trainer", "engine", "agent-loops"])
    for name, (kind, default, help_text) in Settings.FIELDS.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, default=None, help="{} (ROBUSTRL_REF_{}, default {!r})".format(help_text, name.upper(), default))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s[{}] %(levelname)s %(message)s".format(args.role))
    try:
        settings = Settings.from_env(dict(os.environ), {k: v for k, v in vars(args).items() if k != "role"})
        role = {"trainer": TrainerRank, "engine": ReferenceEngine, "agent-loops": AgentLoops}[args.role](settings)
    except ValueError as err:
        parser.error(str(err))
    if isinstance(role, ReferenceEngine):
        role.serve()
    else:
        role.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
