"""Ray's node drains as evidence (docs/integrators/integrate-your-job.md "Ray").

A node Ray drains (``DrainNode``: autoscaler preemption, a spot reclaim, ``ray drain-node``) is leaving,
with a deadline or without one. The elastic worker group watches for drains of the nodes its machines run
on and reports each to that machine's agent as the ``node-draining`` signal, once per drain, with the
deadline in the detail and the time left beside it: the detector confirms it at once as the machine's fault, and the controller's
rules replace the machine (or lend a warm standby) while its workers still run, rather than after they
are gone. Acting on the deadline itself (checkpoint first, hand trajectories over) is the planned-failure
path (``docs/planned-failures.md``), not this module's.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Callable, Dict, List, Mapping, Optional, Set, Tuple

from robustrl.ray_placement import RESOURCE_PREFIX

__all__ = ["DrainWatcher", "machines_by_node", "drain_detail"]

logger = logging.getLogger("robustrl.ray")


def machines_by_node(nodes: List[Mapping[str, object]]) -> Dict[str, str]:
    """Ray node id (hex) → the machine whose resource it offers, from ``ray.nodes()`` (living nodes)."""
    out: Dict[str, str] = {}
    for node in nodes:
        if not node.get("Alive", True):
            continue
        resources = node.get("Resources") or {}
        for key in resources:  # type: ignore[union-attr]
            if isinstance(key, str) and key.startswith(RESOURCE_PREFIX):
                out[str(node["NodeID"])] = key[len(RESOURCE_PREFIX) :]
    return out


def drain_detail(node_id: str, machine_id: str, deadline_ms: int, now_s: float) -> str:
    if deadline_ms <= 0:
        return "Ray node {} of {} is being drained (no deadline)".format(node_id, machine_id)
    at = datetime.fromtimestamp(deadline_ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")
    return "Ray node {} of {} is being drained: it goes by {} (in {:.0f} s)".format(node_id, machine_id, at, max(0.0, deadline_ms / 1000 - now_s))


class DrainWatcher:
    """Polls ``draining()`` every ``poll_s`` and calls ``report(machine_id, detail, departs_in_s)`` (the
    time left, None without a deadline) once per drain of a node that hosts one of ``machines()``. A
    report that raises is tried again at the next poll."""

    def __init__(
        self,
        draining: Callable[[], Mapping[str, int]],
        nodes: Callable[[], Dict[str, str]],
        machines: Callable[[], Set[str]],
        report: Callable[[str, str, Optional[float]], None],
        poll_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._draining, self._nodes, self._machines, self._report = draining, nodes, machines, report
        self.poll_s = poll_s
        self._clock = clock
        self._reported: Set[Tuple[str, int]] = set()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def poll(self) -> List[Tuple[str, str]]:
        """One look: the (machine, detail) pairs reported now."""
        drains = dict(self._draining())
        if not drains:
            return []
        nodes, mine = self._nodes(), self._machines()
        reported: List[Tuple[str, str]] = []
        for node_id, deadline_ms in drains.items():
            machine_id = nodes.get(node_id)
            key = (node_id, int(deadline_ms))
            if machine_id is None or machine_id not in mine or key in self._reported:
                continue
            now = self._clock()
            detail = drain_detail(node_id, machine_id, int(deadline_ms), now)
            departs_in_s = max(0.0, int(deadline_ms) / 1000 - now) if int(deadline_ms) > 0 else None
            try:
                self._report(machine_id, detail, departs_in_s)
            except Exception as err:  # the agent restarting: the next poll tries again
                logger.warning("could not report the drain of %s to its agent (will retry): %s", machine_id, err)
                continue
            self._reported.add(key)
            reported.append((machine_id, detail))
        return reported

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="robustrl-ray-drains", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception as err:  # Ray's state API unreachable for a moment: keep watching
                logger.warning("reading Ray's drains failed (retrying): %s", err)
