"""A real data-parallel job for the torchrun example: a linear model learns a fixed target with
DistributedDataParallel over gloo (CPU), every process on its own slice of each step's data.

It does what a trainer under robustrl does: reports its steps, GPU activity and checkpoints to its
machine's agent (local rank 0 of each machine), saves a checkpoint every step (rank 0; model and
optimizer), and when robustrl restarts the group resumes from the checkpoint it is told
(``ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP``). Every process prints ``[train] rank R/W pid P …`` as it starts,
and rank 0 the loss of each step; the job ends (exit 0) after ``--steps``.
"""
import argparse
import contextlib
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from robustrl import AgentClient

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--ckpt-dir", required=True)
parser.add_argument("--step-seconds", type=float, default=0.5, help="paces the steps so the run can be watched")
args = parser.parse_args()


def say(line: str) -> None:
    """One write per line: the processes of a machine share torchrun's output."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


dist.init_process_group("gloo")
rank, world, local = dist.get_rank(), dist.get_world_size(), int(os.environ["LOCAL_RANK"])
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
ddp = DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
target = torch.arange(16, dtype=torch.float32).unsqueeze(1) / 16

resume = os.environ.get("ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP", "")
start = 0
if resume:
    state = torch.load(os.path.join(args.ckpt_dir, "step-%s.pt" % resume))
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    start = int(resume) + 1
say("[train] rank %d/%d pid %d (node %s, local %d) starts at step %d" % (rank, world, os.getpid(), os.environ.get("GROUP_RANK"), local, start))

agent = AgentClient() if local == 0 else None
if agent:
    agent.phase("initializing", start)
for step in range(start, args.steps):
    context = agent.training_step(step, "batch-%d" % step) if agent else contextlib.nullcontext()
    with context:
        data = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(32, 16, generator=data)
        loss = torch.nn.functional.mse_loss(ddp(x), x @ target)
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients across every process of every machine
        optimizer.step()
        if agent:
            agent.gpu_activity(0.8)
        time.sleep(args.step_seconds)
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    if rank == 0:
        say("[train] step %d loss %.5f" % (step, mean.item() / world))
        path = os.path.join(args.ckpt_dir, "step-%d.pt" % step)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path + ".tmp")
        os.replace(path + ".tmp", path)
    dist.barrier()  # the checkpoint is on disk before any machine reports it
    if agent:
        agent.phase("checkpoint", step)
        agent.checkpoint_saved(step, "file://" + os.path.join(args.ckpt_dir, "step-%d.pt" % step), 1)
dist.destroy_process_group()
say("[train] rank %d done after step %d" % (rank, args.steps - 1))
