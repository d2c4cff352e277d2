"""robustrl as a verl checkpoint engine: weight versions from verl's actor to its rollouts through
robustrl's agents (docs/integrators/integrate-your-job.md "verl"; paper §5.2.1).

verl moves weights with a ``CheckpointEngine`` (``verl.checkpoint_engine``): each actor rank walks the
model's per-tensor generator in ``send_weights``, each rollout's checkpoint-engine worker yields named
tensors from ``receive_weights`` to its server adapter's ``update_weights``. This backend does both
through robustrl:

- **Actor side.** Every actor rank walks the whole generator (producing a tensor is collective over the
  actor group) and keeps its share: each tensor goes to the rank carrying the fewest bytes so far, in the
  generator's order, so every rank computes the same split without talking. A rank writes its share into
  a ``/dev/shm`` region (``robustrl.named_weights``: named, aligned buckets) and hands it to its machine's
  agent as shard ``rank`` of ``world`` of version ``global_steps``. The agents serve the version to the
  rollouts' agents over UCX, relay by relay, as for any robustrl job.
- **Rollout side.** ``receive_weights`` waits until this machine's agent holds the version whole (every
  shard pulled), then yields its tensors by name, read in place from the agent's regions.

In verl's configuration (``actor_rollout_ref.rollout.checkpoint_engine``)::

    checkpoint_engine:
      backend: robustrl
      custom_backend_module: robustrl.verl     # imported by verl, which registers the backend
      update_weights_bucket_megabytes: 512
      engine_kwargs:
        robustrl:
          agent_url: null                      # default: $ROBUSTRL_AGENT_URL (the machine's agent)
          receive_timeout_s: 600

``global_steps`` is the version: robustrl versions are whole numbers that only grow. The rollout takes
the version it is asked for, or a newer one its agent already holds (robustrl's relays may be ahead).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

from verl.checkpoint_engine import CheckpointEngine, CheckpointEngineRegistry

from robustrl_agent import AgentClient

from robustrl.named_weights import TensorEntry, dtype_name, plan, read_tensors, write_region

__all__ = ["RobustrlCheckpointEngine", "BACKEND", "StreamingShare"]

logger = logging.getLogger("robustrl.verl")

BACKEND = "robustrl"


class StreamingShare:
    """Which actor rank publishes each tensor, decided as the tensors stream by: the rank with the
    fewest bytes so far (ties: the lowest rank). Every rank sees the same names and sizes in the same
    order, so every rank computes the same split without talking."""

    def __init__(self, world: int) -> None:
        if world < 1:
            raise ValueError("world must be >= 1, got {!r}".format(world))
        self.load = [0] * world
        self.seen: set = set()

    def owner(self, name: str, nbytes: int) -> int:
        if name in self.seen:
            raise ValueError("tensor {!r} appears twice in the weights".format(name))
        self.seen.add(name)
        rank = min(range(len(self.load)), key=lambda r: (self.load[r], r))
        self.load[rank] += nbytes
        return rank


@CheckpointEngineRegistry.register(BACKEND)
class RobustrlCheckpointEngine(CheckpointEngine):
    """verl's ``CheckpointEngine`` over robustrl's agents (module doc).

    :param bucket_size: verl's ``update_weights_bucket_megabytes`` in bytes: the largest bucket of a region.
    :param agent_url: this machine's agent (default ``$ROBUSTRL_AGENT_URL``).
    :param receive_timeout_s: how long a rollout waits for its agent to hold the version whole.
    :param keep_versions: regions an actor rank keeps (the agent serves a version from them until retired).
    :param shm_dir: where regions are written (the agent maps them by name from ``/dev/shm``).
    :param name: a name for this job's regions (default ``$ROBUSTRL_JOB_ID``, else ``verl``).
    """

    wire_format = "named_tensors"

    def __init__(
        self,
        bucket_size: int,
        agent_url: Optional[str] = None,
        receive_timeout_s: float = 600.0,
        poll_s: float = 0.2,
        keep_versions: int = 2,
        shm_dir: str = "/dev/shm",
        name: Optional[str] = None,
        is_master: bool = False,
    ) -> None:
        if not isinstance(bucket_size, int) or bucket_size < 256:
            raise ValueError("bucket_size must be an int of at least 256 bytes, got {!r}".format(bucket_size))
        if receive_timeout_s <= 0 or poll_s <= 0:
            raise ValueError("receive_timeout_s and poll_s must be > 0")
        self.bucket_size = bucket_size
        self.agent = AgentClient(url=agent_url, timeout=30.0, raise_on_error=True)
        self.receive_timeout_s = receive_timeout_s
        self.poll_s = poll_s
        self.keep_versions = max(1, keep_versions)
        self.shm_dir = Path(shm_dir)
        label = name or os.environ.get("ROBUSTRL_JOB_ID") or "verl"
        self.region_prefix = "robustrl-verl-{}-v".format(hashlib.sha256(label.encode()).hexdigest()[:10])
        # Set by init_process_group on actor ranks; None on a rollout.
        self.rank: Optional[int] = None
        self.world: Optional[int] = None

    # -- verl's protocol: prepare → build_topology → init_process_group → send/receive → finalize --

    def prepare(self) -> Dict[str, Any]:
        """Nothing to allocate: regions are made per version. The metadata names the agent."""
        return {"backend": BACKEND, "agent": self.agent.url}

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: List[Dict[str, Any]]) -> Tuple[Dict[str, List[Any]], Dict[str, List[Any]]]:
        """Actor ranks publish shard ``rank`` of ``world``; rollouts need nothing: their agents pull."""
        if actor_wg_world_size < 1:
            raise ValueError("the actor worker group has no ranks")
        actor = {"rank": list(range(actor_wg_world_size)), "world_size": [actor_wg_world_size] * actor_wg_world_size}
        return actor, {}

    def init_process_group(self, rank: Optional[int] = None, world_size: Optional[int] = None, **_: Any) -> None:
        if rank is not None:
            if world_size is None or not 0 <= rank < world_size:
                raise ValueError("an actor rank needs 0 <= rank < world_size, got rank {!r} of {!r}".format(rank, world_size))
            self.rank, self.world = rank, world_size

    def finalize(self) -> None:
        """Nothing held between updates; old regions are removed after each publish."""

    async def send_weights(self, weights: Any, global_steps: Optional[int] = None) -> Dict[str, Any]:
        """Actor rank: walks every tensor, publishes its share as shard ``rank`` of version ``global_steps``."""
        if self.rank is None or self.world is None:
            raise RuntimeError("send_weights on a rank without a place: init_process_group(rank=, world_size=) first")
        if global_steps is None or int(global_steps) < 0:
            raise ValueError("robustrl needs the version: call send_weights with global_steps (a whole number that grows)")
        version = int(global_steps)
        started = time.monotonic()
        share = StreamingShare(self.world)
        kept: Dict[str, Any] = {}
        async for name, tensor in _each(weights):
            if share.owner(name, tensor.numel() * tensor.element_size()) == self.rank:
                # Off the device now: the generator may reuse its buffer for the next tensor.
                kept[name] = tensor.detach().to("cpu", copy=True)
        layout = plan([(n, dtype_name(t), tuple(t.shape)) for n, t in kept.items()], self.bucket_size)
        path = self.shm_dir / "{}{}-s{}".format(self.region_prefix, version, self.rank)
        # The copy and the agent's answer block: off verl's event loop, which serves the worker's other calls.
        await asyncio.to_thread(write_region, str(path), layout, kept)
        await asyncio.to_thread(
            self.agent.publish_weights,
            version,
            version,
            path.name,
            list(layout.bucket_sizes) or [0],
            tensors=[e.to_json() for e in layout.tensors],
            shard=self.rank,
            shards=self.world,
        )
        self._remove_older_than(version - self.keep_versions + 1)
        return {"robustrl/shard_bytes": layout.total_bytes, "robustrl/publish_s": time.monotonic() - started}

    async def receive_weights(self, global_steps: Optional[int] = None) -> AsyncIterator[Tuple[str, Any]]:
        """Rollout: the version's named tensors once this machine's agent holds it whole."""
        latest = await self._wait_for(global_steps)
        for part in latest.get("parts") or []:
            if part.get("tensors") is None:
                raise RuntimeError("version {} shard {} was published as opaque bytes, not named tensors".format(latest["version"], part.get("shard")))
            if not part.get("path"):
                raise RuntimeError(
                    "version {} shard {} lies in a GPU target ({}): the engine's worker extension loads those, not this backend".format(
                        latest["version"], part.get("shard"), part.get("target")
                    )
                )
            entries = [TensorEntry.from_json(t) for t in part["tensors"]]
            for name, tensor in read_tensors(part["path"], entries, part["bucketStarts"]):
                yield name, tensor

    # -- internals -------------------------------------------------------------------------------

    async def _wait_for(self, global_steps: Optional[int]) -> Dict[str, Any]:
        deadline = time.monotonic() + self.receive_timeout_s
        held: Optional[int] = None
        while True:
            latest = await asyncio.to_thread(self.agent.latest_weights)
            if latest is not None:
                held = int(latest["version"])
                if global_steps is None or held >= int(global_steps):
                    if global_steps is not None and held > int(global_steps):
                        logger.info("asked for version %s, the agent holds the newer %s: loading that", global_steps, held)
                    return latest
            if time.monotonic() > deadline:
                raise TimeoutError(
                    "robustrl: this machine's agent ({}) did not hold version {} whole within {} s (it holds {})".format(
                        self.agent.url, "any" if global_steps is None else global_steps, self.receive_timeout_s, "none" if held is None else "version {}".format(held)
                    )
                )
            await asyncio.sleep(self.poll_s)

    def _remove_older_than(self, version: int) -> None:
        for path in self.shm_dir.glob(self.region_prefix + "*"):
            stem = path.name[len(self.region_prefix) :]
            try:
                v = int(stem.split("-s", 1)[0])
            except ValueError:
                continue
            if v < version and stem.endswith("-s{}".format(self.rank)):
                path.unlink(missing_ok=True)


async def _each(weights: Any) -> AsyncIterator[Tuple[str, Any]]:
    """verl hands a generator or an async generator of (name, tensor)."""
    if hasattr(weights, "__aiter__"):
        async for item in weights:
            yield item
    else:
        for item in weights:
            yield item
