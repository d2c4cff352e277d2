"""Tests of robustrl.ray on a real Ray cluster of three nodes on this host (Ray's own ``Cluster``: a raylet
per node, each offering one machine's resource), with a fake agent per machine that keeps commands as the
real one does (test_cooperate). Needs Ray: skipped without it, unless ROBUSTRL_REQUIRE_RAY=1 (the
integration tier sets it and runs this file in the engine's environment, which has Ray), where a missing
Ray fails instead.

Run: cd clients/python && python -m unittest -v test_ray
"""

import os
import signal
import time
import unittest
from typing import Any, Dict, List

from robustrl.ray_placement import Machine, machine_resource, trainer_worker_env
from test_cooperate import CommandAgent, eventually

try:
    import ray
    from ray.cluster_utils import Cluster

    from robustrl.ray import ElasticWorkerGroup
    from robustrl_agent import AgentError
except ImportError:  # pragma: no cover - depends on the interpreter
    ray = None
    if os.environ.get("ROBUSTRL_REQUIRE_RAY") == "1":
        raise

needs_ray = unittest.skipIf(ray is None, "Ray is not installed in this interpreter")

KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "MASTER_ADDR", "ROBUSTRL_RETRY_STEP", "ROBUSTRL_MACHINE_ID", "ROBUSTRL_AGENT_URL")


class Worker:
    """A worker that says where it runs and with what; ``run()`` ends after E2E_RUN_SECONDS (default:
    never) and raises on the machine named by E2E_RAISE_ON; its constructor raises on E2E_FAIL_ON's."""

    def __init__(self) -> None:
        if os.environ.get("E2E_FAIL_ON") == os.environ.get("ROBUSTRL_MACHINE_ID"):
            raise RuntimeError("the engine would not load its model")
        self.stopped = False

    def where(self) -> Dict[str, Any]:
        import ray as ray_in_worker

        return {"node": ray_in_worker.get_runtime_context().get_node_id(), "pid": os.getpid(), "env": {k: os.environ.get(k) for k in KEYS}}

    def run(self) -> str:
        if os.environ.get("E2E_RAISE_ON") == os.environ.get("ROBUSTRL_MACHINE_ID"):
            raise RuntimeError("the collective broke")
        seconds = float(os.environ.get("E2E_RUN_SECONDS") or "inf")
        end = time.monotonic() + seconds
        while time.monotonic() < end and not self.stopped:
            time.sleep(0.05)
        return "done"

    def stop(self) -> None:
        self.stopped = True


def _group(agents: Dict[str, Any], **options: Any) -> "ElasticWorkerGroup":
    """The tests' worker group: one machine per fake agent (its role from its name), quick timeouts."""
    return ElasticWorkerGroup(
        [Machine(m, a.url, "rollout" if m.startswith("rollout") else "trainer") for m, a in agents.items()],
        trainer=Worker,
        rollout=Worker,
        actor_options={"trainer": {"num_cpus": 0.1}, "rollout": {"num_cpus": 0.1}},
        ready_timeout_s=60,
        stop_grace_s=2,
        follower_wait_s=0.2,
        **options,
    )


@needs_ray
class ElasticWorkerGroupTest(unittest.TestCase):
    cluster: Any
    nodes: Dict[str, str]

    @classmethod
    def setUpClass(cls) -> None:
        # One node per machine; num_cpus so each hosts a few one-CPU-to-place actors.
        cls.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 8, "resources": {machine_resource("trainer-0"): 1}})
        cls.cluster.add_node(num_cpus=8, resources={machine_resource("trainer-1"): 1})
        cls.cluster.add_node(num_cpus=8, resources={machine_resource("rollout-0"): 1})
        ray.init(address=cls.cluster.address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        cls.nodes = {}
        for node in ray.nodes():
            for key in node["Resources"]:
                if key.startswith("robustrl-machine:"):
                    cls.nodes[key.split(":", 1)[1]] = node["NodeID"]

    @classmethod
    def tearDownClass(cls) -> None:
        ray.shutdown()
        cls.cluster.shutdown()

    def setUp(self) -> None:
        self.agents = {m: CommandAgent() for m in ("trainer-0", "trainer-1", "rollout-0")}
        for rank, m in enumerate(("trainer-0", "trainer-1")):
            self.agents[m].launch = {"group": {"rank": rank, "worldSize": 2}, "env": {"RANK": rank, "WORLD_SIZE": 2, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": 29500}}
        self.group = _group(self.agents, trainer_procs_per_machine=2)

    def tearDown(self) -> None:
        self.group.stop()
        for agent in self.agents.values():
            agent.close()

    def places(self, machine: str = None) -> List[Dict[str, Any]]:  # type: ignore[assignment]
        return [dict(ray.get(w["actor"].where.remote(), timeout=30), machine=w["machine"], role=w["role"]) for w in self.group.workers(machine)]

    def test_first_launch_places_every_worker_on_its_machines_node_ranked_as_torchrun_would(self) -> None:
        self.group.start(launch_poll_s=0.05)
        places = self.places()
        for p in places:
            self.assertEqual(p["node"], self.nodes[p["machine"]], p)
            self.assertEqual(p["env"]["ROBUSTRL_MACHINE_ID"], p["machine"])
            self.assertEqual(p["env"]["ROBUSTRL_AGENT_URL"], self.agents[p["machine"]].url)
        trainers = sorted((p["machine"], p["env"]["GROUP_RANK"], p["env"]["RANK"], p["env"]["LOCAL_RANK"], p["env"]["WORLD_SIZE"]) for p in places if p["role"] == "trainer")
        self.assertEqual(
            trainers,
            [("trainer-0", "0", "0", "0", "4"), ("trainer-0", "0", "1", "1", "4"), ("trainer-1", "1", "2", "0", "4"), ("trainer-1", "1", "3", "1", "4")],
        )
        self.assertEqual([p["role"] for p in places if p["machine"] == "rollout-0"], ["rollout"])

    def test_a_killed_worker_is_reported_to_its_machines_agent_and_nothing_else_restarts(self) -> None:
        self.group.start(launch_poll_s=0.05)
        before = {(p["machine"], p["env"]["LOCAL_RANK"]): p["pid"] for p in self.places()}
        victim = before[("trainer-1", "1")]
        # Its agent restarting as the worker dies: the report waits for it.
        self.agents["trainer-1"].down = True
        os.kill(victim, signal.SIGKILL)
        eventually("the death seen", lambda: any(e["event"] == "reported" for e in self.group.events), timeout=30)
        time.sleep(1.5)
        self.assertEqual(self.agents["trainer-1"].errors, [])
        self.agents["trainer-1"].down = False
        eventually("trainer-1's agent told", lambda: self.agents["trainer-1"].errors, timeout=30)
        report = self.agents["trainer-1"].errors[0]
        self.assertEqual(report["signal"], "process-exited")
        self.assertRegex(report["detail"], r"^Ray trainer worker 1 on trainer-1 died \(")
        self.assertEqual(self.agents["trainer-0"].errors + self.agents["rollout-0"].errors, [])
        after = {(p["machine"], p["env"]["LOCAL_RANK"]): p["pid"] for p in self.places()}
        del before[("trainer-1", "1")]
        self.assertEqual(after, before)

    def test_a_group_restart_replaces_that_machines_trainers_with_the_commands_ranks(self) -> None:
        self.group.start(launch_poll_s=0.05)
        before = {p["pid"]: p for p in self.places()}
        env = {"RANK": 1, "WORLD_SIZE": 2, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": 29501, "ROBUSTRL_RETRY_STEP": 7}
        self.agents["trainer-1"].offer({"commandId": "r-1", "type": "RestartTrainerGroup", "restart": {}, "env": env})
        eventually("the restart answered", lambda: "r-1" in self.agents["trainer-1"].outcomes, timeout=60)
        self.assertEqual(self.agents["trainer-1"].outcomes["r-1"], {"outcome": "succeeded"})
        after = self.places()
        fresh = sorted((p["env"]["RANK"], p["env"]["ROBUSTRL_RETRY_STEP"]) for p in after if p["pid"] not in before)
        self.assertEqual(fresh, [("2", "7"), ("3", "7")])
        kept = sorted(p["machine"] for p in after if p["pid"] in before)
        self.assertEqual(kept, ["rollout-0", "trainer-0", "trainer-0"])
        self.assertEqual([e for a in self.agents.values() for e in a.errors], [], "a removed worker's death is not a fault")

    def test_agents_on_their_nodes_are_called_through_a_relay_there(self) -> None:
        group = _group(self.agents, agents_on_nodes=True)
        try:
            group.start(launch_poll_s=0.05)
            relays = {m: group._clients[m]._relay for m in self.agents}  # type: ignore[attr-defined]
            self.assertEqual({m: ray.get(r.node.remote(), timeout=30) for m, r in relays.items()}, self.nodes, "each relay on its machine's node")
            self.agents["rollout-0"].offer({"commandId": "e-r", "type": "RestartRolloutEngine", "attempt": 1, "budget": 2})
            eventually("the relayed command answered", lambda: "e-r" in self.agents["rollout-0"].outcomes, timeout=60)
            self.assertEqual(self.agents["rollout-0"].outcomes["e-r"], {"outcome": "succeeded"})
            # The agent's refusal comes back through the relay as the same error.
            with self.assertRaises(AgentError) as refused:
                group._clients["trainer-0"].report_outcome("no-such-command")
            self.assertEqual((refused.exception.status, refused.exception.message), (404, "no command no-such-command"))
        finally:
            group.stop()

        def gone(relay: Any) -> bool:
            try:
                ray.get(relay.node.remote(), timeout=5)
            except ray.exceptions.RayActorError:
                return True
            except ray.exceptions.GetTimeoutError:
                pass
            return False

        # ray.kill is asynchronous: a call made at once may still reach the relay before it dies.
        for machine, relay in relays.items():
            eventually(machine + "'s relay removed with the group", lambda r=relay: gone(r), timeout=60)

    def test_engine_restart_promotion_and_stop(self) -> None:
        self.group.start(launch_poll_s=0.05)
        rollout_pid = self.places("rollout-0")[0]["pid"]
        self.agents["rollout-0"].offer({"commandId": "e-1", "type": "RestartRolloutEngine", "attempt": 1, "budget": 2})
        eventually("engine restarted", lambda: "e-1" in self.agents["rollout-0"].outcomes, timeout=60)
        self.assertNotEqual(self.places("rollout-0")[0]["pid"], rollout_pid)

        self.agents["rollout-0"].offer({"commandId": "p-1", "type": "PromoteRolloutToTrainer", "replacesMachineId": "trainer-1"})
        eventually("promoted", lambda: "p-1" in self.agents["rollout-0"].outcomes, timeout=60)
        self.assertEqual(self.group.workers("rollout-0"), [])
        self.assertEqual(self.group.role_of("rollout-0"), "trainer")
        self.agents["rollout-0"].offer({"commandId": "r-2", "type": "RestartTrainerGroup", "restart": {}, "env": {"RANK": 1, "WORLD_SIZE": 2}})
        eventually("standby trains", lambda: "r-2" in self.agents["rollout-0"].outcomes, timeout=60)
        standby = self.places("rollout-0")
        self.assertEqual(sorted((p["role"], p["env"]["RANK"]) for p in standby), [("trainer", "2"), ("trainer", "3")])
        for p in standby:
            self.assertEqual(p["node"], self.nodes["rollout-0"])

        self.agents["trainer-0"].offer({"commandId": "stop/fenced/1", "type": "StopRole", "reason": "a newer group"})
        eventually("stopped", lambda: self.group.workers("trainer-0") == [], timeout=30)
        time.sleep(0.5)
        self.assertNotIn("stop/fenced/1", self.agents["trainer-0"].outcomes)
        self.assertEqual(self.agents["trainer-0"].errors, [])

    def test_a_worker_that_does_not_construct_fails_the_command_with_its_reason(self) -> None:
        self.group.start(launch_poll_s=0.05)
        self.group.worker_env["E2E_FAIL_ON"] = "rollout-0"
        self.agents["rollout-0"].offer({"commandId": "e-2", "type": "RestartRolloutEngine", "attempt": 1, "budget": 2})
        eventually("answered", lambda: "e-2" in self.agents["rollout-0"].outcomes, timeout=60)
        outcome = self.agents["rollout-0"].outcomes["e-2"]
        self.assertEqual(outcome["outcome"], "failed")
        self.assertIn("the engine would not load its model", outcome["error"])
        self.assertEqual(self.group.workers("rollout-0"), [])

    def test_the_job_is_done_when_every_trainer_returned_and_a_returning_rollout_is_reported(self) -> None:
        self.group.worker_env["E2E_RUN_SECONDS"] = "1"
        self.group.start(launch_poll_s=0.05)
        self.assertTrue(self.group.wait(timeout=60))
        eventually("the rollout's return reported", lambda: self.agents["rollout-0"].errors, timeout=30)
        self.assertIn("returned: it no longer serves", self.agents["rollout-0"].errors[0]["detail"])
        self.assertEqual(self.agents["trainer-0"].errors + self.agents["trainer-1"].errors, [])


    def test_a_run_that_raises_is_reported_with_the_workers_own_error(self) -> None:
        self.group.worker_env["E2E_RAISE_ON"] = "rollout-0"
        self.group.start(launch_poll_s=0.05)
        eventually("rollout-0's agent told", lambda: self.agents["rollout-0"].errors, timeout=30)
        self.assertEqual(self.agents["rollout-0"].errors[0]["detail"], "Ray rollout worker 0 on rollout-0 died (RuntimeError in run(): the collective broke)")


@needs_ray
class DrainTest(unittest.TestCase):
    """A node Ray drains (a preemption with a deadline) is reported to its machine's agent while its worker
    still runs. A cluster of its own: a drained node takes no new work, and leaves once idle."""

    def test_a_drained_node_is_reported_to_its_machines_agent_once_and_nothing_else_happens(self) -> None:
        from ray.core.generated import autoscaler_pb2

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {machine_resource("trainer-0"): 1}})
        cluster.add_node(num_cpus=2, resources={machine_resource("rollout-0"): 1})
        ray.init(address=cluster.address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        agents = {m: CommandAgent() for m in ("trainer-0", "rollout-0")}
        agents["trainer-0"].launch = {"group": {"rank": 0, "worldSize": 1}, "env": {"RANK": 0, "WORLD_SIZE": 1, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": 29500}}
        group = _group(agents, drain_poll_s=0.5)
        try:
            group.start(launch_poll_s=0.05)
            node = next(n["NodeID"] for n in ray.nodes() if machine_resource("rollout-0") in n["Resources"])
            deadline_ms = int(time.time() * 1000) + 120_000
            accepted, why = ray._raylet.GcsClient(address=cluster.address).drain_node(
                node, autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"), "spot reclaim", deadline_ms
            )
            self.assertTrue(accepted, why)
            eventually("rollout-0's agent told", lambda: agents["rollout-0"].errors, timeout=30)
            report = agents["rollout-0"].errors[0]
            self.assertEqual(report["signal"], "node-draining")
            self.assertRegex(report["detail"], r"^Ray node {} of rollout-0 is being drained: it goes by .* \(in \d+ s\)$".format(node))
            time.sleep(2)  # several more polls: one report per drain
            self.assertEqual(len(agents["rollout-0"].errors), 1)
            self.assertEqual(agents["trainer-0"].errors, [])
            # The group acts on the controller's command, not on the drain: the workers still run.
            self.assertEqual(sorted(w["machine"] for w in group.workers()), ["rollout-0", "trainer-0"])
            self.assertIn("drain-reported", [e["event"] for e in group.events])
        finally:
            group.stop()
            for agent in agents.values():
                agent.close()
            ray.shutdown()
            cluster.shutdown()


class PlacementTest(unittest.TestCase):
    def test_trainer_env_counts_processes_and_keeps_the_groups_variables(self) -> None:
        env = trainer_worker_env({"RANK": "1", "WORLD_SIZE": "3", "MASTER_PORT": 29500, "ROBUSTRL_RETRY_STEP": "4"}, 4, 2)
        self.assertEqual((env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["GROUP_RANK"]), ("6", "12", "2", "1"))
        self.assertEqual((env["MASTER_PORT"], env["ROBUSTRL_RETRY_STEP"]), ("29500", "4"))
        with self.assertRaises(ValueError):
            trainer_worker_env({"WORLD_SIZE": "3"}, 4, 0)
        with self.assertRaises(ValueError):
            trainer_worker_env({"RANK": "0", "WORLD_SIZE": "3"}, 4, 4)

    def test_machines_are_checked(self) -> None:
        with self.assertRaises(ValueError):
            Machine("rollout-0", "http://127.0.0.1:1", "critic")
        with self.assertRaises(ValueError):
            machine_resource("")


if __name__ == "__main__":
    unittest.main()
