"""The reference job's trainer (``robustrl_reference trainer``): one rank, which meets the others at a TCP
barrier before each step, trains on the batch the request manager holds, checkpoints, and (rank 0)
publishes the new weight version through its agent. The module doc of ``robustrl_reference`` tells the
whole job."""

import hashlib
import json
import logging
import os
import socket
import time
from typing import Any, Dict, List, Optional

from robustrl_agent import AgentClient
from robustrl_reference_http import http_json, retrying
from robustrl_reference_ledger import Ledger
from robustrl_reference_policy import BUCKET_BYTES, BUCKETS, weights_bytes
from robustrl_reference_settings import Settings

logger = logging.getLogger("robustrl_reference")


class StepBarrier:
    """Ranks meet before each step, as a collective would: rank 0 listens, the others connect. A rank
    that dies leaves the others waiting (a hung collective), or failing on the closed socket."""

    def __init__(self, rank: int, world: int, host: str, port: int, timeout_s: float = 3600.0) -> None:
        self.rank, self.world = rank, world
        self.peers: List[socket.socket] = []
        self.conn: Optional[socket.socket] = None
        if world == 1:
            return
        if rank == 0:
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("0.0.0.0", port))
            server.listen(world)
            server.settimeout(timeout_s)
            self.peers = [server.accept()[0] for _ in range(world - 1)]
            server.close()
        else:
            self.conn = retrying("rendezvous with rank 0 at {}:{}".format(host, port), lambda: socket.create_connection((host, port), timeout=5), deadline_s=timeout_s)
            self.conn.settimeout(None)

    def wait(self, step: int) -> None:
        token = "{}\n".format(step).encode()
        if self.world == 1:
            return
        if self.rank == 0:
            for peer in self.peers:
                if _read_line(peer) != token:
                    raise ConnectionError("a rank left the group before step {}".format(step))
            for peer in self.peers:
                peer.sendall(token)
        else:
            assert self.conn is not None
            self.conn.sendall(token)
            if _read_line(self.conn) != token:
                raise ConnectionError("rank 0 left the group before step {}".format(step))


    def close(self) -> None:
        for sock in self.peers + ([self.conn] if self.conn else []):
            sock.close()


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(64)
        if not chunk:
            return data
        data += chunk
    return data


class TrainerRank:
    """One trainer rank of the reference job (see the module doc)."""

    def __init__(self, settings: Settings, agent: Optional[AgentClient] = None, env: Optional[Dict[str, str]] = None) -> None:
        env = dict(os.environ if env is None else env)
        self.s = settings
        self.agent = agent or AgentClient()
        self.ledger = Ledger(settings.state_dir)
        self.rank = int(env.get("RANK", "0"))
        self.world = int(env.get("WORLD_SIZE", "1"))
        self.master = (env.get("MASTER_ADDR", "127.0.0.1"), int(env.get("MASTER_PORT", "29500")))
        self.attempt = int(env.get("ROBUSTRL_RESTART_COUNT", "0"))
        self.checkpoints = os.path.join(settings.state_dir, "checkpoints")
        os.makedirs(self.checkpoints, exist_ok=True)

    def last_checkpoint(self) -> int:
        steps = [int(n.split("-")[1]) for n in os.listdir(self.checkpoints) if n.startswith("step-") and not n.endswith(".tmp")]
        return max(steps, default=0)

    def run(self) -> None:
        start = self.last_checkpoint() + 1
        self.agent.phase("initializing", max(start - 1, 0))
        if self.rank == 0:
            self.reconcile_ledger(start - 1)
            self.publish(start - 1)
        barrier = StepBarrier(self.rank, self.world, self.master[0], self.master[1])
        step = start
        while step <= self.s.target_steps():
            batch = self.wait_for_batch(step)
            with self.agent.training_step(step, "step-{}".format(step)):
                # The step's first collective: a dead peer hangs this rank here, in the training phase, as NCCL would.
                barrier.wait(step)
                digest = self.train(step, batch)
            if self.rank == 0:
                self.checkpoint(step, digest)
                self.publish(step)
            step += 1
        self.agent.phase("idle", step - 1)
        logger.info("rank %s: all %s steps trained", self.rank, step - 1)

    def reconcile_ledger(self, step: int) -> None:
        """The checkpoint file is a step's commit; its ledger line follows it. A kill -9 between the two
        leaves a committed step the ledger does not show: it is written now, before anything else."""
        if step > 0 and not any(r.get("kind") == "checkpoint" and r.get("step") == step for r in Ledger.read(self.s.state_dir)):
            self.ledger.append("checkpoint", step=step, recovered=True)

    def wait_for_batch(self, step: int) -> Dict[str, Any]:
        """Idle until the request manager holds the whole batch, then fetch what is within the bound."""
        self.agent.phase("idle", step)
        base = "{}/v1/jobs/{}/batches/step-{}".format(self.s.request_manager_url, self.s.job_id, step)

        def complete() -> Optional[bool]:
            status, progress, _ = http_json("GET", base, timeout=10)
            return True if status == 200 and progress and progress.get("completed", 0) >= self.s.batch_size else None

        retrying("batch step-{}".format(step), complete, deadline_s=24 * 3600)
        query = "{}/completed?currentWeightVersion={}&maxStaleness={}".format(base, step - 1, self.s.max_staleness)

        def fetch() -> Optional[Dict[str, Any]]:
            status, batch, _ = http_json("GET", query, timeout=30)
            return batch if status == 200 else None

        return retrying("fetch batch step-{}".format(step), fetch)

    def train(self, step: int, batch: Dict[str, Any]) -> str:
        trajectories = sorted(batch.get("trajectories", []), key=lambda t: t["trajectoryId"])
        digest = hashlib.sha256(json.dumps([[t["trajectoryId"], [u["turnId"] for u in t.get("turns", [])]] for t in trajectories]).encode()).hexdigest()
        # What DCGM would read during the step (the agent's emulated source takes pushes; a hardware source refuses them).
        self.agent.gpu_activity(tensor_active=0.9, interval_seconds=max(self.s.train_seconds, 0.001))
        time.sleep(self.s.train_seconds)
        self.ledger.append(
            "trained", step=step, rank=self.rank, attempt=self.attempt, trajectories=len(trajectories), stale=len(batch.get("stale", [])), digest=digest
        )
        return digest

    def checkpoint(self, step: int, digest: str) -> None:
        self.agent.phase("checkpoint", step)
        started = time.monotonic()
        path = os.path.join(self.checkpoints, "step-{}".format(step))
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"step": step, "digest": digest}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        self.ledger.append("checkpoint", step=step)
        self.agent.checkpoint_saved(step, "file://" + path, blocking_ms=int((time.monotonic() - started) * 1000))

    def publish(self, version: int) -> None:
        """Write version ``version`` to shared memory and hand it to the agent (rank 0)."""
        self.agent.phase("weight-update", max(version, 0))
        name = "{}-v{}".format(self.s.job_id.replace("/", "_"), version)
        shm_dir = os.environ.get("ROBUSTRL_WEIGHTS_SHM_DIR", "/dev/shm")
        with open(os.path.join(shm_dir, name), "wb") as f:
            f.write(weights_bytes(version))
        answer = retrying("publish version {}".format(version), lambda: self.agent.publish_weights(version, max(version, 0), name, [BUCKET_BYTES] * BUCKETS))
        self.ledger.append("published", version=version, totalBytes=answer.get("totalBytes"))
