"""Where a Ray worker group's workers go and what they are told (``robustrl.ray``): a machine's Ray
node is the one offering ``robustrl-machine:<machine id>``, and a trainer worker's environment is what
torchrun would set for its place in the group robustrl formed. Pure: no Ray needed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping

__all__ = ["RESOURCE_PREFIX", "ROLES", "Machine", "machine_resource", "trainer_worker_env"]

RESOURCE_PREFIX = "robustrl-machine:"
ROLES = ("trainer", "rollout")


def machine_resource(machine_id: str) -> str:
    """The custom resource a Ray node offers to host ``machine_id``'s workers."""
    if not isinstance(machine_id, str) or not machine_id:
        raise ValueError("machine_id must be a non-empty string, got {!r}".format(machine_id))
    return RESOURCE_PREFIX + machine_id


@dataclass
class Machine:
    """A GPU machine of the job: its agent's URL and its role (which changes when a rollout is promoted)."""

    machine_id: str
    agent_url: str
    role: str

    def __post_init__(self) -> None:
        machine_resource(self.machine_id)
        if self.role not in ROLES:
            raise ValueError("machine {}: role must be one of {}, got {!r}".format(self.machine_id, ", ".join(ROLES), self.role))


def trainer_worker_env(group_env: Mapping[str, Any], procs_per_machine: int, local: int) -> Dict[str, str]:
    """Worker ``local``'s environment from the machine's group environment (robustrl's ranks count
    machines: ``RANK`` is the node rank, ``WORLD_SIZE`` the number of machines), as torchrun would set it."""
    if procs_per_machine < 1 or not 0 <= local < procs_per_machine:
        raise ValueError("local must be in 0..{}, got {!r}".format(procs_per_machine - 1, local))
    try:
        node, machines = int(group_env["RANK"]), int(group_env["WORLD_SIZE"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError("the group's environment has no usable RANK and WORLD_SIZE: {!r}".format(dict(group_env))) from err
    env = {k: str(v) for k, v in group_env.items()}
    env.update(
        RANK=str(node * procs_per_machine + local),
        WORLD_SIZE=str(machines * procs_per_machine),
        LOCAL_RANK=str(local),
        LOCAL_WORLD_SIZE=str(procs_per_machine),
        GROUP_RANK=str(node),
        NODE_RANK=str(node),
    )
    return env
