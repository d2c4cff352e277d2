"""Distributed checkpoints (``torch.distributed.checkpoint``): every rank saves and loads together.

A checkpoint of step ``s`` lives in ``<state dir>/checkpoints/step-<s>``; it is complete once DCP wrote
its ``.metadata`` file, which the coordinator does last, after every rank wrote its part. A rank killed
mid-save leaves a folder without it: ``latest_complete`` never returns such a step, and the next save
of that step clears it first. Model and optimizer state are saved together, so a resumed trainer
continues the same optimisation, not just the same weights — ``state_digest`` says so in the ledger.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

__all__ = ["checkpoint_dir", "latest_complete", "save", "load", "state_digest"]


def checkpoint_dir(state_dir: str, step: int) -> Path:
    return Path(state_dir) / "checkpoints" / f"step-{step:06d}"


def is_complete(path: Path) -> bool:
    return (path / ".metadata").is_file()


def latest_complete(state_dir: str) -> Optional[int]:
    root = Path(state_dir) / "checkpoints"
    steps = [int(p.name.split("-", 1)[1]) for p in root.glob("step-*") if p.name.split("-", 1)[1].isdigit() and is_complete(p)]
    return max(steps) if steps else None


def save(state_dir: str, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, keep: int = 3) -> Path:
    """Called by every rank. Rank 0 then removes complete checkpoints older than the newest ``keep``
    (a restart resumes from the newest; the rest is disk)."""
    path = checkpoint_dir(state_dir, step)
    if dist.get_rank() == 0 and path.exists() and not is_complete(path):
        shutil.rmtree(path)  # what a rank killed mid-save left
    dist.barrier()
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(path))
    if dist.get_rank() == 0:
        complete = sorted(int(p.name.split("-", 1)[1]) for p in path.parent.glob("step-*") if p.name.split("-", 1)[1].isdigit() and is_complete(p))
        for old in complete[:-keep] if keep > 0 else []:
            shutil.rmtree(checkpoint_dir(state_dir, old), ignore_errors=True)
    return path


def load(state_dir: str, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Path:
    """Called by every rank; the step's checkpoint must be complete."""
    path = checkpoint_dir(state_dir, step)
    if not is_complete(path):
        raise FileNotFoundError(f"checkpoint of step {step} is not complete: {path}")
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return path


def _tensors(prefix: str, value: Any) -> Iterable[Tuple[str, Any]]:
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from _tensors(f"{prefix}/{key}", value[key])
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _tensors(f"{prefix}/{index}", item)
    else:
        yield prefix, value


def state_digest(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Dict[str, str]:
    """sha256 of the parameters and of the optimizer state, byte for byte, in a fixed order."""
    model_state, optim_state = get_state_dict(model, optimizer)
    digests = {}
    for label, state in (("params", model_state), ("optimizer", optim_state)):
        h = hashlib.sha256()
        for key, value in _tensors("", state):
            h.update(key.encode())
            if isinstance(value, torch.Tensor):
                h.update(str(value.dtype).encode())
                h.update(value.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            else:
                h.update(repr(value).encode())
        digests[label] = h.hexdigest()
    return digests
