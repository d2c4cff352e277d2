"""verl's worker groups, restarted rank by rank by robustrl (the paper's §6 elastic worker group for verl).

verl's driver builds each role's workers as a ``RayWorkerGroup``: one Ray actor per rank, placed in the
bundles of the role's placement groups, with ``RANK``, ``WORLD_SIZE`` and the group's ``MASTER_ADDR`` in
its environment. When one dies, verl has no way to bring that rank back: the driver fails and the job
restarts. ``ElasticRayWorkerGroup`` is the same class with that way added — use it where verl takes its
worker-group class (``ray_worker_group_cls``), and the driver keeps running while robustrl's controller
restarts what failed::

    from robustrl.verl_workers import ElasticRayWorkerGroup, follow_machines

    ray_worker_group_cls = ElasticRayWorkerGroup          # instead of verl's RayWorkerGroup
    …                                                    # verl builds actor_rollout_wg as usual
    follower = follow_machines(actor_rollout_wg, on_replaced=reinit)   # then robustrl's commands

- ``replace(ranks)`` destroys those ranks' actors and creates them again in the same placement-group
  bundles, with the same environment (rank, world size, master address): the other ranks keep running.
- ``machine_ranks()`` maps the robustrl machine of each rank (its Ray node's ``robustrl-machine:<id>``
  resource, as ``robustrl.ray`` places actors) to its ranks.
- ``follow_machines`` follows every such machine's agent (cooperate mode): ``RestartTrainerGroup``
  replaces every rank of the group (a trainer group restarts whole, from its checkpoint);
  ``RestartRolloutEngine`` replaces the machine's ranks. ``on_replaced(ranks)`` runs after each, for the
  driver to initialise them again (verl's ``init_model``).

Needs verl and Ray. Tested against verl 0.9.1's ``RayWorkerGroup`` on a local Ray cluster
(``test_verl_workers.py``).
"""

import logging
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import ray
from verl.single_controller.ray.base import RayWorkerGroup

from robustrl_agent import AgentClient

from .cooperate import Command, CommandFollower
from .ray_agent_relay import relayed_client
from .ray_placement import RESOURCE_PREFIX

__all__ = ["ElasticRayWorkerGroup", "follow_machines"]

logger = logging.getLogger("robustrl.verl_workers")


class ElasticRayWorkerGroup(RayWorkerGroup):  # type: ignore[misc]
    """verl's ``RayWorkerGroup`` whose ranks can be destroyed and created again one by one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # How each rank was created, to create it again the same way (filled by verl's own construction).
        self._creations: Dict[int, Dict[str, Any]] = {}
        self._replacing = threading.Lock()
        super().__init__(*args, **kwargs)

    def _create_worker(self, rank: int, pg_idx: int, pg: Any, local_rank: int, resource_pool: Any, ray_cls_with_init: Any, worker_env: Any, detached: bool) -> None:
        self._creations[rank] = dict(
            rank=rank,
            pg_idx=pg_idx,
            pg=pg,
            local_rank=local_rank,
            resource_pool=resource_pool,
            ray_cls_with_init=ray_cls_with_init,
            worker_env=worker_env,
            detached=detached,
        )
        super()._create_worker(rank, pg_idx, pg, local_rank, resource_pool, ray_cls_with_init, worker_env, detached)

    def dead_ranks(self, timeout_s: float = 10.0) -> List[int]:
        """Ranks whose actor is dead (asked of each actor; one too busy to answer within ``timeout_s`` is alive)."""
        refs = [worker.__ray_ready__.remote() for worker in self._workers]
        dead = []
        for rank, ref in enumerate(refs):
            try:
                ray.get(ref, timeout=timeout_s)
            except ray.exceptions.GetTimeoutError:
                pass
            except ray.exceptions.RayActorError:
                dead.append(rank)
        return dead

    def replace(self, ranks: Sequence[int], name_free_timeout_s: float = 60.0) -> List[int]:
        """Destroy the actors of ``ranks`` (dead or alive) and create each again in its bundle, as verl did.

        Returns the ranks replaced, in order. The new actors are not initialised: run the role's
        initialisation (verl's ``init_model``) on them, as after the group was built.
        """
        wanted = sorted(set(int(r) for r in ranks))
        unknown = [r for r in wanted if r not in self._creations]
        if unknown:
            raise ValueError("ranks {} were not created by this group (ranks 0..{})".format(unknown, len(self._workers) - 1))
        with self._replacing:
            for rank in wanted:
                old, name = self._workers[rank], self._worker_names[rank]
                ray.kill(old, no_restart=True)
                # The new actor takes the old one's name, which Ray frees once the kill is through.
                _wait_name_free(name, name_free_timeout_s)
                RayWorkerGroup._create_worker(self, **self._creations[rank])
                self._workers[rank] = self._workers.pop()
                self._worker_names[rank] = self._worker_names.pop()
                logger.info("rank %d of worker group %s created again", rank, self.name_prefix)
        return wanted

    def machine_ranks(self) -> Dict[str, List[int]]:
        """Each robustrl machine hosting ranks of this group, with its ranks (by its Ray node's resource)."""
        machine_of_node: Dict[str, str] = {}
        for node in ray.nodes():
            for resource in node.get("Resources", {}):
                if resource.startswith(RESOURCE_PREFIX):
                    machine_of_node[node["NodeID"]] = resource[len(RESOURCE_PREFIX) :]
        ranks: Dict[str, List[int]] = {}
        for rank, creation in sorted(self._creations.items()):
            # The node of the rank's bundle (the GCS's placement table: no dashboard needed).
            nodes = ray.util.placement_group_table(creation["pg"]).get("bundles_to_node_id", {})
            machine = machine_of_node.get(nodes.get(creation["local_rank"], ""))
            if machine is not None:
                ranks.setdefault(machine, []).append(rank)
        return ranks


def _wait_name_free(name: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name)
        except ValueError:
            return
        time.sleep(0.1)
    raise TimeoutError("the actor {!r} was not gone {} s after it was killed".format(name, timeout_s))


class _GroupFollower:
    """The command loops of every machine hosting ranks of one group (``follow_machines``)."""

    def __init__(self, group: ElasticRayWorkerGroup, agents: Dict[str, AgentClient], on_replaced: Callable[[List[int]], None]) -> None:
        self.group = group
        self.on_replaced = on_replaced
        self.machines = group.machine_ranks()
        self.followers = [CommandFollower(agents[m], lambda c, m=m: self.carry_out(m, c)) for m in self.machines if m in agents]

    def start(self) -> "_GroupFollower":
        for f in self.followers:
            f.start()
        return self

    def stop(self) -> None:
        for f in self.followers:
            f.stop()

    def carry_out(self, machine_id: str, command: Command) -> None:
        kind = command.get("type")
        if kind == "RestartTrainerGroup":
            # The group restarts whole, from its checkpoint: every rank, once per restart however many machines say so.
            ranks = list(range(len(self.group._workers)))
        elif kind == "RestartRolloutEngine":
            ranks = self.machines.get(machine_id, [])
        else:
            logger.info("%s for %s: nothing of this worker group to do", kind, machine_id)
            return
        replaced = self.group.replace(ranks)
        self.on_replaced(replaced)


def follow_machines(
    group: ElasticRayWorkerGroup,
    on_replaced: Callable[[List[int]], None],
    agents: Optional[Dict[str, AgentClient]] = None,
    agent_url: Callable[[str], str] = lambda machine_id: "",
    on_nodes: bool = False,
) -> _GroupFollower:
    """Follow the agent of every machine hosting ranks of ``group`` and carry out its commands on them.

    :param agents: each machine's agent client; default ``AgentClient(agent_url(machine))``, or with
        ``on_nodes`` a client through a relay on the machine's node, ``agent_url(machine)`` being the
        agent's URL there (on Kubernetes ``unix:/run/robustrl/agent.sock``; ``robustrl.ray_agent_relay``).
    :param on_replaced: called with the ranks replaced after each command, before its outcome is sent:
        initialise them there; raise to report the restart failed (the controller's rules apply).
    """
    clients = dict(agents or {})
    for machine in group.machine_ranks():
        if machine not in clients:
            url = agent_url(machine)
            if not url:
                raise ValueError("no agent for machine {!r}: pass agents= or agent_url=".format(machine))
            clients[machine] = relayed_client(machine, url) if on_nodes else AgentClient(url)
    return _GroupFollower(group, clients, on_replaced).start()
