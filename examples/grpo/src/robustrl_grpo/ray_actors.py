"""The GRPO job's workers as Ray actors (examples/ray/README.md), what ``robustrl.ray.ElasticWorkerGroup``
creates on each machine's Ray node when robustrl says so:

- ``TrainerActor``: one trainer rank (``trainer.run_trainer``) in the actor's own process, ranked by
  robustrl (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` … in its environment, as torchrun sets them). It
  takes its batches from the request manager, publishes its shard of every version through its machine's
  agent, and resumes from the newest complete checkpoint.
- ``EngineActor``: a vLLM engine (``engine.engine_command``) as the actor's child, on a port of its own.
  Once the engine is healthy the actor tells its machine's agent where it listens (``PUT /v1/engines``):
  the router routes to it, and the agent loads every version it pulls into it. ``run()`` lasts as long as
  the engine; the engine does not outlive the actor (a kill of the actor ends it too: engine_guard.py).

Every actor appends where it runs to the job's ledger (kind ``actor``: role, machine, Ray node, rank,
the checkpoint a trainer resumes from), so a run can be checked against what robustrl commanded.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

from . import checkpoint
from .config import JobConfig
from .ledger import Ledger
from .local import EngineProcess

__all__ = ["TrainerActor", "EngineActor"]


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _say(line: str) -> None:
    print(line, flush=True)


class TrainerActor:
    """One rank of the GRPO trainer group."""

    def run(self) -> int:
        cfg = JobConfig.resolve()
        rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0"))
        machine = os.environ["ROBUSTRL_MACHINE_ID"]
        start = checkpoint.latest_complete(cfg.state_dir) or 0
        told = os.environ.get("ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP") or None
        Ledger(cfg.state_dir).append(
            "actor", role="trainer", machine=machine, node=_node_id(), rank=rank, world=world, local=local,
            resumeFrom=start, told=None if told is None else int(told),
        )  # fmt: skip
        _say(f"[train] rank {rank}/{world} pid {os.getpid()} ({machine}, local {local}) resumes from checkpoint {start}")
        from .trainer import run_trainer  # torch and the process group: in the actor's process only

        run_trainer(cfg)
        return cfg.steps


class EngineActor:
    """A vLLM engine serving rollouts on this machine."""

    def __init__(self) -> None:
        self.engine: Optional[EngineProcess] = None
        self.stopping = False

    def run(self) -> None:
        from robustrl_agent import AgentClient

        cfg = JobConfig.resolve()
        machine = os.environ["ROBUSTRL_MACHINE_ID"]
        logs = Path(cfg.state_dir) / "engine-logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.engine = EngineProcess(cfg.model_dir, logs / f"{machine}-{os.getpid()}.log", die_with_parent=True)
        Ledger(cfg.state_dir).append("actor", role="rollout", machine=machine, node=_node_id(), url=self.engine.url, enginePid=self.engine.process.pid)
        _say(f"[rollout] pid {os.getpid()} on {machine}: vLLM engine starting at {self.engine.url}")
        agent = AgentClient(raise_on_error=True)
        agent.phase("initializing", 0)
        waited = self.engine.wait(timeout=600)
        # From here the router routes to it and the agent loads the versions it holds into it.
        agent.set_engines({"vllm": self.engine.url})
        _say(f"[rollout] {machine}: engine healthy after {waited:.0f} s, registered with its agent")
        while not self.stopping:
            code = self.engine.process.poll()
            if code is not None:
                raise RuntimeError(f"the vLLM engine on {machine} exited with {code}")
            time.sleep(0.5)

    def stop(self) -> None:
        self.stopping = True
        if self.engine is not None:
            self.engine.stop()
