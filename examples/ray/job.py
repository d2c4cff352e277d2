"""A Ray job under robustrl (examples/ray/README.md): this driver starts a Ray cluster of one node per
machine on this host (Ray's own multi-node ``Cluster``: a raylet each, offering the machine's resource)
and keeps the job's workers in ``robustrl.ray.ElasticWorkerGroup``, which follows each machine's agent
(cooperate mode).

- Trainer actors (``--nproc`` per trainer machine) train a linear model with DistributedDataParallel over
  gloo, checkpoint every step (rank 0), resume from the checkpoint robustrl names after a group restart,
  and report their machine's steps and checkpoints from local rank 0. They finish after ``--steps``
  (0: never).
- The rollout actor is a stand-in engine: it reports generation throughput to its agent every half
  second.
- With ``--ledger FILE`` every actor appends its place as it starts (JSON line: machine, role, rank,
  world size, local rank, step, pid, Ray node), for tests.

The driver prints ``{"event": "cluster-up"}`` once Ray is up, then waits for ``--machines FILE`` (a JSON
list of ``{"machineId", "agentUrl", "role"}``, written once the agents registered: a cooperating agent
vouches for its role only while its framework follows it, so the group attaches as soon as the agents are
there, not after Ray's start), prints ``{"event": "driver-ready", "pid": …}`` once every worker started,
and exits 0 when every trainer finished. SIGTERM stops the group and the cluster.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Optional

# Every actor's lines reach the driver's output (Ray folds repeated lines by default; the example's
# runner reads each actor's pid from its own line).
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from robustrl import AgentClient  # noqa: E402
from robustrl.ray import ElasticWorkerGroup, Machine, machine_resource  # noqa: E402


def _ledger(**fields: Any) -> None:
    path = os.environ.get("EXAMPLE_LEDGER")
    if not path:
        return
    fields.update(pid=os.getpid(), machine=os.environ["ROBUSTRL_MACHINE_ID"], node=ray.get_runtime_context().get_node_id())
    with open(path, "a") as out:
        out.write(json.dumps(fields) + "\n")


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class TrainerWorker:
    """One DDP process of the trainer group, placed and ranked by robustrl (RANK, WORLD_SIZE, MASTER_ADDR …
    in its environment, as torchrun would set them)."""

    def __init__(self) -> None:
        self.stopped = False

    def run(self) -> int:
        from datetime import timedelta

        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        steps, seconds, ckpt = int(os.environ["EXAMPLE_STEPS"]), float(os.environ["EXAMPLE_STEP_SECONDS"]), os.environ["EXAMPLE_CKPT_DIR"]
        dist.init_process_group("gloo", timeout=timedelta(seconds=60))
        rank, world, local = dist.get_rank(), dist.get_world_size(), int(os.environ["LOCAL_RANK"])
        torch.manual_seed(0)
        model = torch.nn.Linear(16, 1)
        ddp = DistributedDataParallel(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        target = torch.arange(16, dtype=torch.float32).unsqueeze(1) / 16
        resume = os.environ.get("ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP", "")
        step = 0
        if resume:
            state = torch.load(os.path.join(ckpt, "step-%s.pt" % resume))
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            step = int(resume) + 1
        _ledger(role="trainer", rank=rank, world=world, local=local, step=step)
        _say("[train] rank %d/%d pid %d (%s, local %d) starts at step %d" % (rank, world, os.getpid(), os.environ["ROBUSTRL_MACHINE_ID"], local, step))
        agent: Optional[AgentClient] = AgentClient() if local == 0 else None
        if agent:
            agent.phase("initializing", step)
        while not self.stopped and (steps == 0 or step < steps):
            data = torch.Generator().manual_seed(step * 1000 + rank)
            x = torch.randn(32, 16, generator=data)
            if agent:
                agent.step_begin(step, "batch-%d" % step)
                agent.phase("training", step)
            began = time.monotonic()
            loss = torch.nn.functional.mse_loss(ddp(x), x @ target)
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients across every actor of every machine
            optimizer.step()
            end = began + seconds
            while time.monotonic() < end:
                if agent:
                    agent.gpu_activity(0.8)
                time.sleep(min(0.2, max(0.0, end - time.monotonic())))
            if agent:
                agent.step_end(step, "batch-%d" % step, int((time.monotonic() - began) * 1000))
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            if rank == 0:
                _say("[train] step %d loss %.5f" % (step, mean.item() / world))
                path = os.path.join(ckpt, "step-%d.pt" % step)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path + ".tmp")
                os.replace(path + ".tmp", path)
            dist.barrier()  # the checkpoint is on disk before any machine reports it
            if agent:
                agent.phase("checkpoint", step)
                agent.checkpoint_saved(step, "file://" + os.path.join(ckpt, "step-%d.pt" % step), 1)
            step += 1
        dist.destroy_process_group()
        return step

    def stop(self) -> None:
        self.stopped = True


class RolloutWorker:
    """A stand-in engine: it generates nothing and reports throughput, as a serving engine's agent sees it."""

    def __init__(self) -> None:
        self.stopped = False

    def run(self) -> None:
        _ledger(role="rollout", rank=None, world=None, local=0, step=None)
        _say("[rollout] pid %d on %s serving" % (os.getpid(), os.environ["ROBUSTRL_MACHINE_ID"]))
        agent = AgentClient()
        agent.phase("rollout", 0)
        completed = 0
        while not self.stopped:
            completed += 3
            agent.throughput(window_seconds=0.5, tokens_per_second=900.0, completed_requests=completed, in_flight_requests=8, awaiting_tools=0)
            time.sleep(0.5)

    def stop(self) -> None:
        self.stopped = True


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machine-ids", required=True, help="the machines, comma-separated: one Ray node each")
    parser.add_argument("--machines", required=True, help="the file the machines' agents are listed in, once they registered")
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--steps", type=int, default=30, help="trainer steps; 0: train until stopped")
    parser.add_argument("--step-seconds", type=float, default=0.5)
    parser.add_argument("--nproc", type=int, default=2, help="trainer actors per trainer machine")
    parser.add_argument("--ledger", default=None)
    args = parser.parse_args(argv)
    machine_ids = args.machine_ids.split(",")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 4, "include_dashboard": False, "resources": {machine_resource(machine_ids[0]): 1}},
    )
    for machine_id in machine_ids[1:]:
        cluster.add_node(num_cpus=4, resources={machine_resource(machine_id): 1})
    ray.init(address=cluster.address, logging_level="WARNING")
    _say(json.dumps({"event": "cluster-up"}))
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    group = None
    try:
        while not os.path.exists(args.machines) and not stopping.wait(0.2):
            pass
        if stopping.is_set():
            return 143
        with open(args.machines) as listed:
            machines = [Machine(m["machineId"], m["agentUrl"], m["role"]) for m in json.load(listed)]
        env = {"EXAMPLE_STEPS": str(args.steps), "EXAMPLE_STEP_SECONDS": str(args.step_seconds), "EXAMPLE_CKPT_DIR": os.path.abspath(args.ckpt_dir), "OMP_NUM_THREADS": "1"}
        if args.ledger:
            env["EXAMPLE_LEDGER"] = os.path.abspath(args.ledger)
        group = ElasticWorkerGroup(
            machines,
            trainer=TrainerWorker,
            rollout=RolloutWorker,
            trainer_procs_per_machine=args.nproc,
            worker_env=env,
            actor_options={"trainer": {"num_cpus": 0.1}, "rollout": {"num_cpus": 0.1}},
            stop_grace_s=5,
        )
        group.start()
        _say(json.dumps({"event": "driver-ready", "pid": os.getpid()}))
        while not stopping.is_set():
            if group.wait(timeout=0.5):
                _say("[driver] every trainer finished its steps: the job is done")
                return 0
        return 143
    finally:
        if group is not None:
            group.stop()
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
