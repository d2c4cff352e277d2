"""robustrl.ray_drains: Ray's node drains reported to the drained machine's agent, once per drain.
The watcher's logic without Ray (test_ray.py drains a node of a real cluster).

Run: cd clients/python && python -m unittest -v test_ray_drains
"""

import unittest
from typing import Dict, List, Optional, Set, Tuple

from robustrl.ray_drains import DrainWatcher, drain_detail, machines_by_node


class DrainWatcherTest(unittest.TestCase):
    def setUp(self) -> None:
        self.drains: Dict[str, int] = {}
        self.nodes = {"n0": "trainer-0", "n1": "rollout-0", "n9": "another-job"}
        self.mine: Set[str] = {"trainer-0", "rollout-0"}
        self.reports: List[Tuple[str, str]] = []
        self.departs: List[Optional[float]] = []
        self.failing = False

        def report(machine: str, detail: str, departs_in_s: Optional[float]) -> None:
            if self.failing:
                raise ConnectionError("agent restarting")
            self.reports.append((machine, detail))
            self.departs.append(departs_in_s)

        self.watcher = DrainWatcher(lambda: self.drains, lambda: self.nodes, lambda: self.mine, report, clock=lambda: 1_000.0)

    def test_a_drained_node_is_reported_once_for_its_machine_with_its_deadline(self) -> None:
        self.assertEqual(self.watcher.poll(), [])
        self.drains["n1"] = 1_030_000
        self.assertEqual(self.watcher.poll(), [("rollout-0", "Ray node n1 of rollout-0 is being drained: it goes by 1970-01-01T00:17:10+00:00 (in 30 s)")])
        self.assertEqual(self.watcher.poll(), [])
        self.assertEqual(len(self.reports), 1)
        self.assertEqual(self.departs, [30.0])
        # Drained again with another deadline: a new notice.
        self.drains["n1"] = 1_060_000
        self.assertEqual([m for m, _ in self.watcher.poll()], ["rollout-0"])

    def test_nodes_of_other_jobs_and_unknown_nodes_are_not_reported(self) -> None:
        self.drains.update({"n9": 0, "nX": 0})
        self.assertEqual(self.watcher.poll(), [])

    def test_a_report_that_fails_is_tried_again(self) -> None:
        self.drains["n0"] = 0
        self.failing = True
        self.assertEqual(self.watcher.poll(), [])
        self.failing = False
        self.assertEqual(self.watcher.poll(), [("trainer-0", "Ray node n0 of trainer-0 is being drained (no deadline)")])
        self.assertEqual(self.departs, [None])

    def test_nodes_map_to_the_machine_whose_resource_they_offer(self) -> None:
        nodes = [
            {"NodeID": "a", "Alive": True, "Resources": {"CPU": 4.0, "robustrl-machine:trainer-0": 1.0}},
            {"NodeID": "b", "Alive": False, "Resources": {"robustrl-machine:rollout-0": 1.0}},
            {"NodeID": "c", "Alive": True, "Resources": {"CPU": 4.0}},
        ]
        self.assertEqual(machines_by_node(nodes), {"a": "trainer-0"})

    def test_a_deadline_in_the_past_reads_as_now(self) -> None:
        self.assertTrue(drain_detail("n", "m", 500_000, 1_000.0).endswith("(in 0 s)"))


if __name__ == "__main__":
    unittest.main()
