"""Tests of robustrl.verl_workers against verl's own RayWorkerGroup, resource pool and placement groups, on a
real Ray cluster of two machine nodes on this host, with a fake agent per machine (test_cooperate). Needs
verl and Ray: skipped without them unless ROBUSTRL_REQUIRE_VERL=1 (the integration tier sets it).

Run: cd clients/python && python -m unittest -v test_verl_workers
"""

import os
import unittest
from typing import Any, Dict, List

from robustrl.ray_placement import machine_resource
from test_cooperate import CommandAgent, eventually

try:
    import ray
    from ray.cluster_utils import Cluster
    from verl.single_controller.ray.base import RayClassWithInitArgs, RayResourcePool

    from robustrl_agent import AgentClient
    from robustrl.verl_workers import ElasticRayWorkerGroup, follow_machines
except ImportError:  # pragma: no cover - depends on the interpreter
    ray = None
    if os.environ.get("ROBUSTRL_REQUIRE_VERL") == "1":
        raise

needs_verl = unittest.skipIf(ray is None, "verl or Ray is not installed in this interpreter")


class RankWorker:
    """A stand-in for verl's role workers: says its rank, process and node."""

    def where(self) -> Dict[str, Any]:
        import ray as ray_in_worker

        return {"rank": int(os.environ["RANK"]), "world": int(os.environ["WORLD_SIZE"]), "pid": os.getpid(), "node": ray_in_worker.get_runtime_context().get_node_id()}


@needs_verl
class ElasticRayWorkerGroupTest(unittest.TestCase):
    cluster: Any
    machine_of_node: Dict[str, str]

    @classmethod
    def setUpClass(cls) -> None:
        # A head with no CPU to place on, and two machines of two CPUs: each of verl's STRICT_PACK
        # placement groups (two one-CPU bundles) fills one machine.
        cls.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        for machine in ("trainer-0", "trainer-1"):
            cls.cluster.add_node(num_cpus=2, resources={machine_resource(machine): 1})
        ray.init(address=cls.cluster.address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        cls.machine_of_node = {}
        for node in ray.nodes():
            for key in node["Resources"]:
                if key.startswith("robustrl-machine:"):
                    cls.machine_of_node[node["NodeID"]] = key.split(":", 1)[1]

    @classmethod
    def tearDownClass(cls) -> None:
        ray.shutdown()
        cls.cluster.shutdown()

    def setUp(self) -> None:
        pool = RayResourcePool(process_on_nodes=[2, 2], use_gpu=False, max_colocate_count=1)
        # As verl's driver builds a role's group, with this class in its place.
        self.group = ElasticRayWorkerGroup(resource_pool=pool, ray_cls_with_init=RayClassWithInitArgs(cls=ray.remote(RankWorker)), device_name="cpu")
        self.agents: Dict[str, CommandAgent] = {}

    def tearDown(self) -> None:
        for worker in self.group._workers:
            ray.kill(worker, no_restart=True)
        for pg in self.group.resource_pool.pgs or []:
            ray.util.remove_placement_group(pg)
        for agent in self.agents.values():
            agent.close()

    def where(self) -> List[Dict[str, Any]]:
        return ray.get([w.where.remote() for w in self.group._workers], timeout=60)

    def test_a_dead_rank_is_created_again_in_its_place_and_the_others_keep_running(self) -> None:
        before = self.where()
        self.assertEqual([(w["rank"], w["world"]) for w in before], [(0, 4), (1, 4), (2, 4), (3, 4)])
        os.kill(before[1]["pid"], 9)
        eventually("rank 1 seen dead", lambda: self.group.dead_ranks() == [1], timeout=30)
        self.assertEqual(self.group.replace([1]), [1])
        after = self.where()
        self.assertEqual([w["rank"] for w in after], [0, 1, 2, 3])
        self.assertNotEqual(after[1]["pid"], before[1]["pid"])
        # The same bundle: the same machine as before; the other ranks are the same processes.
        self.assertEqual(after[1]["node"], before[1]["node"])
        self.assertEqual([w["pid"] for i, w in enumerate(after) if i != 1], [w["pid"] for i, w in enumerate(before) if i != 1])
        self.assertEqual(self.group.dead_ranks(), [])
        with self.assertRaisesRegex(ValueError, r"ranks \[7\] were not created by this group"):
            self.group.replace([7])

    def test_maps_machines_to_ranks_by_their_nodes(self) -> None:
        ranks = self.group.machine_ranks()
        nodes = [w["node"] for w in self.where()]
        self.assertEqual(sorted(ranks), ["trainer-0", "trainer-1"])
        for machine, its in ranks.items():
            self.assertEqual(len(its), 2)
            self.assertTrue(all(self.machine_of_node[nodes[r]] == machine for r in its))

    def test_follows_each_machines_agent(self) -> None:
        self.agents = {m: CommandAgent() for m in ("trainer-0", "trainer-1")}
        replaced: List[List[int]] = []
        follower = follow_machines(self.group, replaced.append, agents={m: AgentClient(a.url) for m, a in self.agents.items()})
        try:
            ranks = self.group.machine_ranks()
            before = self.where()
            self.agents["trainer-1"].offer({"commandId": "r1/engine", "type": "RestartRolloutEngine", "attempt": 1, "budget": 2})
            eventually("the engine restart's outcome", lambda: self.agents["trainer-1"].outcomes.get("r1/engine"), timeout=60)
            self.assertEqual(self.agents["trainer-1"].outcomes["r1/engine"], {"outcome": "succeeded"})
            self.assertEqual(replaced, [ranks["trainer-1"]])
            after = self.where()
            self.assertEqual(
                [i for i in range(4) if after[i]["pid"] != before[i]["pid"]], ranks["trainer-1"], "only that machine's ranks were created again"
            )
            # A trainer group restart: every rank, from its checkpoint.
            self.agents["trainer-0"].offer({"commandId": "r2/group", "type": "RestartTrainerGroup", "restart": {}, "env": {}})
            eventually("the group restart's outcome", lambda: self.agents["trainer-0"].outcomes.get("r2/group"), timeout=90)
            self.assertEqual(replaced[-1], [0, 1, 2, 3])
            self.assertEqual(len({w["pid"] for w in self.where()} & {w["pid"] for w in after}), 0)
        finally:
            follower.stop()


if __name__ == "__main__":
    unittest.main()
