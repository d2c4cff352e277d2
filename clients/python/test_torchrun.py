"""Tests of robustrl.torchrun with a stand-in torchrun (a Python one-liner that records its arguments) and
the fake agent of test_cooperate. Standard library only.

Run: cd clients/python && python3 -m unittest -v test_torchrun
"""

import json
import os
import sys
import tempfile
import threading
import time
import unittest
from typing import Any, Dict, List

from robustrl import AgentClient
from robustrl.torchrun import TorchrunLauncher, torchrun_command
from test_cooperate import CommandAgent, eventually

# Records its arguments, then runs until stopped, or exits with FAKE_TORCHRUN_EXIT after a moment.
FAKE_TORCHRUN = [
    sys.executable,
    "-c",
    "import json, os, sys, time\n"
    "open(os.environ['FAKE_TORCHRUN_LOG'], 'a').write(json.dumps({'argv': sys.argv[1:], 'retry': os.environ.get('ROBUSTRL_RETRY_STEP')}) + '\\n')\n"
    "code = os.environ.get('FAKE_TORCHRUN_EXIT')\n"
    "time.sleep(0.3 if code else 60)\n"
    "sys.exit(int(code or 0))\n",
]

GROUP = {"rank": 1, "worldSize": 2, "masterAddr": "10.0.0.1", "masterPort": 29500, "members": []}


class TorchrunCommandTest(unittest.TestCase):
    def test_node_rank_world_and_rendezvous_from_the_group_and_no_restarts_of_its_own(self) -> None:
        self.assertEqual(
            torchrun_command(["torchrun"], GROUP, 8, ["train.py", "--lr", "1e-5"]),
            ["torchrun", "--nnodes=2", "--node-rank=1", "--nproc-per-node=8", "--master-addr=10.0.0.1", "--master-port=29500", "--max-restarts=0", "train.py", "--lr", "1e-5"],
        )

    def test_a_group_without_a_rendezvous_address_is_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "rendezvous address"):
            torchrun_command(["torchrun"], dict(GROUP, masterAddr=None), 1, ["train.py"])


class TorchrunLauncherTest(unittest.TestCase):
    def setUp(self) -> None:
        self.agent = CommandAgent()
        self.dir = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.dir.name, "torchrun.log")
        os.environ["FAKE_TORCHRUN_LOG"] = self.log
        os.environ.pop("FAKE_TORCHRUN_EXIT", None)
        self.launcher = TorchrunLauncher(AgentClient(url=self.agent.url), ["train.py"], nproc_per_node=2, torchrun=FAKE_TORCHRUN, stop_grace_s=2)

    def tearDown(self) -> None:
        self.launcher.stop()
        self.agent.close()
        self.dir.cleanup()
        os.environ.pop("FAKE_TORCHRUN_LOG", None)
        os.environ.pop("FAKE_TORCHRUN_EXIT", None)

    def runs(self) -> List[Dict[str, Any]]:
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def test_a_group_restart_stops_torchrun_and_starts_it_as_the_command_says(self) -> None:
        self.launcher.start({"group": GROUP, "env": {}})
        eventually("first run", lambda: len(self.runs()) == 1)
        first = self.launcher.launches[0]["pid"]
        restart = {"step": 7, "group": dict(GROUP, rank=0, worldSize=3)}
        self.launcher.handle({"commandId": "c-1", "type": "RestartTrainerGroup", "restart": restart, "env": {"ROBUSTRL_RETRY_STEP": "7"}})
        eventually("second run", lambda: len(self.runs()) == 2)
        second = self.runs()[1]
        self.assertIn("--node-rank=0", second["argv"])
        self.assertIn("--nnodes=3", second["argv"])
        self.assertEqual(second["retry"], "7")
        with self.assertRaises(ProcessLookupError):
            os.kill(first, 0)  # the first torchrun is gone
        self.assertEqual(self.agent.errors, [])  # a stop asked for is no fault

    def test_a_failed_torchrun_is_reported_as_a_process_exit_and_a_finished_one_ends_the_job(self) -> None:
        os.environ["FAKE_TORCHRUN_EXIT"] = "1"
        self.launcher.start({"group": GROUP, "env": {}})
        eventually("the failure reported", lambda: self.agent.errors)
        self.assertEqual(self.agent.errors[0]["signal"], "process-exited")
        self.assertEqual(self.agent.errors[0]["exitCode"], 1)
        self.assertFalse(self.launcher.finished.is_set())
        os.environ["FAKE_TORCHRUN_EXIT"] = "0"
        self.launcher.start({"group": GROUP, "env": {}})
        self.assertTrue(self.launcher.finished.wait(5))
        self.assertEqual(len(self.agent.errors), 1)

    def test_a_stop_notice_stops_torchrun_without_a_fault(self) -> None:
        self.launcher.start({"group": GROUP, "env": {}})
        eventually("running", lambda: self.runs())
        pid = self.launcher.launches[0]["pid"]
        self.launcher.handle({"commandId": "stop/fenced/x", "type": "StopRole", "reason": "a newer group"})
        with self.assertRaises(ProcessLookupError):
            os.kill(pid, 0)
        time.sleep(0.2)
        self.assertEqual(self.agent.errors, [])

    def test_waits_for_the_group_while_the_agent_gathers_it(self) -> None:
        self.launcher.launch_poll_s = 0.05
        threading_timer = threading.Timer(0.3, lambda: setattr(self.agent, "launch", {"group": GROUP, "env": {"RANK": "1"}, "restart": None}))
        threading_timer.start()
        started = time.monotonic()
        launch = self.launcher.wait_for_group()
        self.assertGreaterEqual(time.monotonic() - started, 0.25)
        self.assertEqual(launch["group"], GROUP)

    def test_a_rollout_command_is_not_a_trainer_launchers(self) -> None:
        with self.assertRaisesRegex(RuntimeError, "not a trainer launcher"):
            self.launcher.handle({"commandId": "c", "type": "RestartRolloutEngine"})


if __name__ == "__main__":
    unittest.main()
