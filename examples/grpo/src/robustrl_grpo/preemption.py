"""Whole-job preemption: a SIGTERM to every rank ends the job at the end of the step in progress, saved.

A scheduler reclaiming the whole job (a higher-priority job, a spot fleet taken back, a pod deleted)
signals every process. With ``on_sigterm = "finish-step"`` the first SIGTERM only sets a flag: the rank
finishes the step it is in (train, checkpoint, publish), the ranks agree after it (an all-reduce of the
flag, so all stop after the same step) and stop, writing what an exact resume needs in the ledger
(``preempted``: the step saved, the step a resume begins with) and each rank's RNG state beside the
checkpoint. The prompts of a step and each sample's seed are functions of the job's seed and the step
(``task.problems_for_step``, ``rollouts.sample_seed``), so a resume from the saved step draws exactly the
prompts an uninterrupted run would have; under robustrl the batches already generated for later steps
stay in the request manager and are taken again (``kept_batches.py``).

The default, ``"exit"``, keeps SIGTERM's default: the rank ends at once. An agent restarting a role in
place relies on it — a rank blocked in a collective on a dead peer never reaches the end of its step. A
second SIGTERM ends a rank at once either way.
"""

from __future__ import annotations

import hashlib
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import List, Optional

import torch
import torch.distributed as dist

from .grpo import Sample

__all__ = ["StepEndStop", "prompt_digest", "rng_path", "save_rng", "restore_rng"]


class StepEndStop:
    def __init__(self, on_sigterm: str) -> None:
        self.enabled = on_sigterm == "finish-step"
        self.requested_at: Optional[float] = None
        if self.enabled:
            signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.requested_at is not None:
            raise SystemExit(128 + signum)
        self.requested_at = time.time()
        print("SIGTERM: the job is preempted; finishing the step in progress, then stopping (again: stop now)", file=sys.stderr, flush=True)

    def agreed(self) -> bool:
        """Whether any rank was asked to stop: every rank calls it after each step, and all get the same answer."""
        if not self.enabled:
            return False
        flag = torch.tensor([1 if self.requested_at is not None else 0], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


def prompt_digest(samples: List[Sample]) -> str:
    """sha256 of a batch's prompts, as token ids, in a fixed order: equal for equal prompts, however sampled."""
    h = hashlib.sha256()
    for prompt in sorted(tuple(s.prompt_ids) for s in samples):
        h.update((",".join(map(str, prompt)) + ";").encode())
    return h.hexdigest()


def rng_path(state_dir: str, step: int, rank: int) -> Path:
    return Path(state_dir) / "checkpoints" / f"rng-step-{step:06d}-rank-{rank}.pt"


def save_rng(state_dir: str, step: int, rank: int) -> str:
    """This rank's torch RNG state, kept beside the step's checkpoint; its sha256."""
    state = torch.get_rng_state()
    torch.save(state, rng_path(state_dir, step, rank))
    return hashlib.sha256(state.numpy().tobytes()).hexdigest()


def restore_rng(state_dir: str, step: int, rank: int) -> Optional[str]:
    """The RNG state a preemption kept for this step and rank, restored; its sha256, or None when none was kept."""
    path = rng_path(state_dir, step, rank)
    if not path.exists():
        return None
    state = torch.load(path)
    torch.set_rng_state(state)
    return hashlib.sha256(state.numpy().tobytes()).hexdigest()
