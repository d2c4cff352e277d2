"""Weight versions out of the trainer: each rank writes its shard of named tensors to host memory.

Every rank computes the same shard assignment (``robustrl.named_weights.shard_assignment`` over the
parameters' sizes), writes the tensors it owns into its own ``/dev/shm`` region and describes it as a
*part*: the region's path, its manifest (name, dtype, shape, bucket, offset of each tensor) and its
buckets. Where the parts go is the publisher's business:

- ``EnginePublisher`` (the local job, no control plane): rank 0 gathers the parts and loads the whole
  version into the engine in place (``robustrl.vllm_loader``);
- ``AgentPublisher`` (under robustrl): each rank hands its part to its own machine's agent, which
  serves it to the rollouts' agents; they pull every shard and load the version into their engines the
  same way (the agent's ``ROBUSTRL_ENGINE_WEIGHTS=vllm``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Dict, List

import torch
import torch.distributed as dist

from robustrl.named_weights import dtype_name, plan, shard_assignment, strip_wrapper_prefixes, write_region
from robustrl.vllm_loader import EngineWeightLoader

__all__ = ["ShardWriter", "EnginePublisher", "AgentPublisher", "region_name"]


def region_name(job_key: str, version: int, shard: int) -> str:
    return f"robustrl-grpo-{job_key}-v{version}-s{shard}"


def job_key_of(state_dir: str) -> str:
    return hashlib.sha256(os.path.abspath(state_dir).encode()).hexdigest()[:10]


class ShardWriter:
    """Writes this rank's shard of a version into ``/dev/shm`` and says where it lies."""

    def __init__(self, model: torch.nn.Module, rank: int, world: int, bucket_bytes: int, state_dir: str, shm_dir: str = "/dev/shm") -> None:
        self.model = model
        self.rank = rank
        self.world = world
        self.bucket_bytes = bucket_bytes
        self.shm_dir = Path(shm_dir)
        self.job_key = job_key_of(state_dir)
        params = self._named()
        self.owner = shard_assignment({n: p.numel() * p.element_size() for n, p in params.items()}, world)

    def _named(self) -> Dict[str, torch.Tensor]:
        # Checkpoint names (what an engine's loader takes): no DDP/compile wrapper prefixes. Tied
        # parameters appear once (named_parameters dedups them), as in the model's own checkpoint.
        named = {}
        for name, param in self.model.named_parameters():
            mapped = strip_wrapper_prefixes(name)
            if mapped is not None:
                named[mapped] = param
        return named

    def write(self, version: int) -> Dict[str, Any]:
        params = self._named()
        mine = [n for n in params if self.owner[n] == self.rank]
        layout = plan([(n, dtype_name(params[n]), tuple(params[n].shape)) for n in mine], self.bucket_bytes)
        path = self.shm_dir / region_name(self.job_key, version, self.rank)
        with torch.no_grad():
            write_region(str(path), layout, params)
        return {
            "version": version,
            "shard": self.rank,
            "shards": self.world,
            "path": str(path),
            "shmName": path.name,
            "tensors": [e.to_json() for e in layout.tensors],
            "bucketSizes": list(layout.bucket_sizes),
            "bucketStarts": layout.bucket_starts,
        }

    def remove_older_than(self, version: int) -> None:
        prefix = f"robustrl-grpo-{self.job_key}-v"
        for path in self.shm_dir.glob(prefix + "*"):
            try:
                v = int(path.name[len(prefix) :].split("-s", 1)[0])
            except ValueError:
                continue
            if v < version and path.name.endswith(f"-s{self.rank}"):
                path.unlink(missing_ok=True)


class EnginePublisher:
    """The local job's publisher: the whole version, every rank's part, loaded into one engine by rank 0."""

    def __init__(self, writer: ShardWriter, engine_url: str) -> None:
        self.writer = writer
        self.loader = EngineWeightLoader(engine_url)

    def publish(self, version: int, step: int) -> Dict[str, Any]:
        part = self.writer.write(version)
        parts: List[Any] = [None] * self.writer.world
        dist.all_gather_object(parts, part)
        result: Dict[str, Any] = {"version": version, "parts": len(parts)}
        if self.writer.rank == 0:
            result = self.loader.load(version, [{k: p[k] for k in ("path", "tensors", "bucketStarts")} for p in parts])
        # No rank deletes its region before the engine has read it.
        dist.barrier()
        self.writer.remove_older_than(version)
        return result


class AgentPublisher:
    """Under robustrl: this rank's shard goes to its machine's agent (``POST /v1/weights/versions`` with
    the manifest and ``shard``). The agent serves the region from memory, so a version's files stay until
    it can no longer be asked for: the newest ``keep`` versions are kept (the staleness bound plus one)."""

    def __init__(self, writer: ShardWriter, agent: Any, keep: int = 2) -> None:
        self.writer = writer
        self.agent = agent
        self.keep = max(1, keep)

    def publish(self, version: int, step: int) -> Dict[str, Any]:
        part = self.writer.write(version)
        answer = self.agent.publish_weights(
            version, step, part["shmName"], part["bucketSizes"], tensors=part["tensors"], shard=self.writer.rank, shards=self.writer.world
        )
        if answer is None:
            raise RuntimeError(f"the agent did not take version {version} (shard {self.writer.rank}); see the robustrl_agent log")
        self.writer.remove_older_than(version - self.keep + 1)
        return {"version": version, "shard": self.writer.rank, "totalBytes": answer.get("totalBytes")}
