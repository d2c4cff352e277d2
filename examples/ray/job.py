"""The real GRPO job (examples/grpo) as a Ray job under robustrl (examples/ray/README.md).

This driver starts a Ray cluster of one node per machine on this host (Ray's own multi-node ``Cluster``:
a raylet each, offering the machine's resource) and keeps the job's workers in
``robustrl.ray.ElasticWorkerGroup``, which follows each machine's agent (cooperate mode):

- trainer actors (``robustrl_grpo.ray_actors.TrainerActor``, ``--nproc`` per trainer machine): the GRPO
  trainer ranks, DDP over gloo, their batches from robustrl's request manager, their weights published
  through their machines' agents;
- engine actors (``EngineActor``, one per rollout machine): a vLLM engine each, into which the machine's
  agent loads every version it pulls;
- the agent loops run in this driver, as a single-controller framework's rollout loop does: every step's
  samples through robustrl's router, scored, completed in the request manager.

The job's settings are the ``ROBUSTRL_GRPO_*`` variables of this process (examples/grpo/README.md); the
actors get the same. The driver prints ``{"event": "cluster-up"}`` once Ray is up, then waits for
``--machines FILE`` (a JSON list of ``{"machineId", "agentUrl", "role"}``, written once the agents
registered: a cooperating agent vouches for its role only while its framework follows it), and exits 0
when every trainer finished and the loops sampled every step. SIGTERM stops the group and the cluster.
"""

import argparse
import json
import logging
import os
import signal
import sys
import threading
from typing import Dict, List, Optional

# Every actor's lines reach the driver's output (Ray folds repeated lines by default; the example's
# runner reads each actor's pid from its own line).
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from robustrl.ray import ElasticWorkerGroup, Machine, machine_resource  # noqa: E402
from robustrl_grpo.agent_loops import AgentLoops  # noqa: E402
from robustrl_grpo.config import JobConfig  # noqa: E402
from robustrl_grpo.model import load_tokenizer  # noqa: E402
from robustrl_grpo.ray_actors import EngineActor, TrainerActor  # noqa: E402


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _worker_env() -> Dict[str, str]:
    """What every actor gets: the job's settings, and one thread a process (a 2-core machine runs it all)."""
    env = {k: v for k, v in os.environ.items() if k.startswith("ROBUSTRL_GRPO_") or k in ("ROBUSTRL_WEIGHTS_SHM_DIR", "PYTHONDONTWRITEBYTECODE")}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


class DriverLoops:
    """The agent loops on a thread of the driver; ``error`` holds what ended them early."""

    def __init__(self, cfg: JobConfig) -> None:
        self.loops = AgentLoops(cfg, cfg.job_id, cfg.router_url, cfg.request_manager_url, load_tokenizer(cfg.model_dir))
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, name="agent-loops", daemon=True)

    def _run(self) -> None:
        try:
            self.loops.run()
            _say("[driver] the agent loops sampled every step")
        except BaseException as err:  # noqa: BLE001 - reported by the driver, which decides
            self.error = err

    def stop(self) -> None:
        self.loops.stopped.set()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machine-ids", required=True, help="the machines, comma-separated: one Ray node each")
    parser.add_argument("--machines", required=True, help="the file the machines' agents are listed in, once they registered")
    parser.add_argument("--nproc", type=int, default=1, help="trainer actors (ranks) per trainer machine")
    args = parser.parse_args(argv)
    cfg = JobConfig.resolve()
    if cfg.batches != "robustrl" or cfg.publish != "agent" or not cfg.router_url or not cfg.request_manager_url or not cfg.job_id:
        parser.error(
            "the job under robustrl needs ROBUSTRL_GRPO_BATCHES=robustrl, ROBUSTRL_GRPO_PUBLISH=agent, "
            "ROBUSTRL_GRPO_ROUTER_URL, ROBUSTRL_GRPO_REQUEST_MANAGER_URL and ROBUSTRL_GRPO_JOB_ID"
        )
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s driver %(levelname)s %(message)s")
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
    loops = None
    try:
        while not os.path.exists(args.machines) and not stopping.wait(0.2):
            pass
        if stopping.is_set():
            return 143
        with open(args.machines) as listed:
            machines = [Machine(m["machineId"], m["agentUrl"], m["role"]) for m in json.load(listed)]
        group = ElasticWorkerGroup(
            machines,
            trainer=TrainerActor,
            rollout=EngineActor,
            trainer_procs_per_machine=args.nproc,
            worker_env=_worker_env(),
            actor_options={"trainer": {"num_cpus": 0.1}, "rollout": {"num_cpus": 0.1}},
            # An engine actor's stop() ends its vLLM server (up to 20 s).
            stop_grace_s=25,
        )
        group.start()
        loops = DriverLoops(cfg)
        loops.thread.start()
        _say(json.dumps({"event": "driver-ready", "pid": os.getpid()}))
        while not stopping.is_set():
            if loops.error is not None:
                _say(f"[driver] the agent loops failed: {loops.error!r}")
                return 1
            if group.wait(timeout=0.5):
                loops.thread.join(timeout=60)
                if loops.thread.is_alive() or loops.error is not None:
                    _say(f"[driver] the trainers finished but the agent loops did not: {loops.error!r}")
                    return 1
                _say("[driver] every trainer finished its steps: the job is done")
                return 0
        return 143
    finally:
        if loops is not None:
            loops.stop()
        if group is not None:
            group.stop()
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
