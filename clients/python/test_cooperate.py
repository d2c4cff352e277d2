"""Tests of robustrl.cooperate and the client's command routes against a fake agent that keeps commands
as the real one does (offered until acknowledged, one outcome each). Standard library only.

Run: cd clients/python && python3 -m unittest -v test_cooperate
"""

import threading
import time
import unittest
import urllib.parse
from typing import Any, Dict, List, Optional

from fake_http import FakeServer, JsonHandler
from robustrl import AgentClient
from robustrl.cooperate import CommandFollower


class CommandAgent:
    """A fake agent in cooperate mode: GET /v1/commands (long poll), POST …/ack, POST …/outcome, /v1/errors."""

    def __init__(self) -> None:
        self.open: Dict[str, Dict[str, Any]] = {}
        self.acknowledged: List[str] = []
        self.outcomes: Dict[str, Dict[str, Any]] = {}
        self.errors: List[Dict[str, Any]] = []
        self.polls = 0
        self.down = False
        # GET /v1/launch: 503 while None (the group gathers).
        self.launch: Optional[Dict[str, Any]] = None
        self.lock = threading.Condition()
        agent = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if agent.down:
                    return self.answer(503, {"error": "restarting"})
                if self.path == "/v1/launch":
                    return self.answer(200, agent.launch) if agent.launch else self.answer(503, {"error": "the trainer group is not formed yet"})
                url = urllib.parse.urlparse(self.path)
                wait = int(urllib.parse.parse_qs(url.query).get("waitMs", ["0"])[0]) / 1000
                with agent.lock:
                    agent.polls += 1
                    agent.lock.wait_for(lambda: agent._pending(), timeout=wait)
                    self.answer(200, {"commands": agent._pending()})

            def do_POST(self) -> None:
                if agent.down:
                    return self.answer(503, {"error": "restarting"})
                body = self.read_json()
                parts = self.path.split("/")
                if self.path == "/v1/errors":
                    agent.errors.append(body)
                    return self.answer(202, {"accepted": True, "eventId": "e"})
                command_id, action = urllib.parse.unquote(parts[3]), parts[4]
                with agent.lock:
                    if command_id not in agent.open and command_id not in agent.outcomes:
                        return self.answer(404, {"error": "no command {}".format(command_id)})
                    if action == "ack":
                        agent.acknowledged.append(command_id)
                        agent.open.get(command_id, {})["acknowledged"] = True
                        return self.answer(200, {"commandId": command_id, "result": "acknowledged"})
                    agent.outcomes[command_id] = body
                    agent.open.pop(command_id, None)
                    agent.lock.notify_all()
                    return self.answer(200, {"commandId": command_id, "result": "settled"})

        self.http = FakeServer(Handler)
        self.url = self.http.url

    def offer(self, command: Dict[str, Any]) -> None:
        with self.lock:
            self.open[command["commandId"]] = dict(command, acknowledged=False)
            self.lock.notify_all()

    def _pending(self) -> List[Dict[str, Any]]:
        return [{k: v for k, v in c.items() if k != "acknowledged"} for c in self.open.values() if not c["acknowledged"]]

    def close(self) -> None:
        self.http.close()


def eventually(what: str, probe: Any, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


class CommandRoutesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.agent = CommandAgent()
        self.client = AgentClient(url=self.agent.url, raise_on_error=True)

    def tearDown(self) -> None:
        self.agent.close()

    def test_ids_with_slashes_are_one_path_segment_and_outcomes_carry_the_error(self) -> None:
        self.agent.offer({"commandId": "trainer-0/v400/recovery/1", "type": "RestartTrainerGroup"})
        self.assertEqual([c["commandId"] for c in self.client.commands(wait_s=0) or []], ["trainer-0/v400/recovery/1"])
        self.client.acknowledge("trainer-0/v400/recovery/1")
        self.assertEqual(self.client.commands(wait_s=0), [])
        self.client.report_outcome("trainer-0/v400/recovery/1", error="rank 1 would not start")
        self.assertEqual(self.agent.outcomes["trainer-0/v400/recovery/1"], {"outcome": "failed", "error": "rank 1 would not start"})

    def test_bad_arguments_are_value_errors(self) -> None:
        with self.assertRaises(ValueError):
            self.client.commands(wait_s=31)
        with self.assertRaises(ValueError):
            self.client.acknowledge("")
        with self.assertRaises(ValueError):
            self.client.report_outcome("c", error="  ")
        with self.assertRaises(ValueError):
            self.client.process_exited("x", exit_code=1.5)  # type: ignore[arg-type]

    def test_a_process_exit_is_reported_with_its_code(self) -> None:
        self.client.process_exited("worker 3 died", exit_code=137)
        self.assertEqual(self.agent.errors, [{"signal": "process-exited", "detail": "worker 3 died", "exitCode": 137}])

    def test_the_long_poll_gets_a_longer_timeout_than_a_report(self) -> None:
        client = AgentClient(url=self.agent.url, timeout=0.2, raise_on_error=True)
        started = time.monotonic()
        self.assertEqual(client.commands(wait_s=0.5), [])
        self.assertGreaterEqual(time.monotonic() - started, 0.45)


class CommandFollowerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.agent = CommandAgent()
        self.handled: List[str] = []
        self.follower: Optional[CommandFollower] = None

    def tearDown(self) -> None:
        if self.follower is not None:
            self.follower.stop(timeout=5)
        self.agent.close()

    def follow(self, handle: Any) -> CommandFollower:
        self.follower = CommandFollower(AgentClient(url=self.agent.url), handle, wait_s=0.2, retry_s=0.05).start()
        return self.follower

    def test_carries_out_in_order_and_answers_success_or_the_exception(self) -> None:
        def handle(command: Dict[str, Any]) -> None:
            self.handled.append(command["commandId"])
            if command["commandId"] == "c-2":
                raise RuntimeError("the engine would not load its model")

        self.follow(handle)
        self.agent.offer({"commandId": "c-1", "type": "RestartRolloutEngine"})
        self.agent.offer({"commandId": "c-2", "type": "RestartRolloutEngine"})
        eventually("both answered", lambda: len(self.agent.outcomes) == 2)
        self.assertEqual(self.handled, ["c-1", "c-2"])
        self.assertEqual(self.agent.outcomes["c-1"], {"outcome": "succeeded"})
        self.assertEqual(self.agent.outcomes["c-2"], {"outcome": "failed", "error": "RuntimeError: the engine would not load its model"})
        self.assertEqual(self.agent.acknowledged, ["c-1", "c-2"])

    def test_keeps_polling_while_a_long_command_runs(self) -> None:
        release = threading.Event()
        self.follow(lambda command: release.wait(5))
        self.agent.offer({"commandId": "slow", "type": "RestartTrainerGroup"})
        eventually("acknowledged", lambda: self.agent.acknowledged == ["slow"])
        polls = self.agent.polls
        eventually("more polls while it runs", lambda: self.agent.polls >= polls + 3)
        self.assertNotIn("slow", self.agent.outcomes)
        release.set()
        eventually("answered", lambda: "slow" in self.agent.outcomes)

    def test_a_stop_notice_is_handled_and_not_answered(self) -> None:
        self.follow(lambda command: self.handled.append(command["type"]))
        self.agent.offer({"commandId": "stop/fenced/x", "type": "StopRole", "reason": "a newer group"})
        eventually("handled", lambda: self.handled == ["StopRole"])
        time.sleep(0.2)
        self.assertEqual(self.agent.outcomes, {})

    def test_rides_out_an_agent_restart(self) -> None:
        self.agent.down = True
        follower = self.follow(lambda command: self.handled.append(command["commandId"]))
        time.sleep(0.3)
        self.agent.down = False
        self.agent.offer({"commandId": "c-1", "type": "RestartRolloutEngine"})
        eventually("answered after the agent came back", lambda: "c-1" in self.agent.outcomes)
        self.assertEqual(follower.answered, [("c-1", None)])

    def test_a_command_offered_again_before_its_acknowledgement_landed_runs_once(self) -> None:
        follower = CommandFollower(AgentClient(url=self.agent.url), lambda command: self.handled.append(command["commandId"]), wait_s=0)
        self.agent.offer({"commandId": "c-1", "type": "RestartRolloutEngine"})
        self.assertEqual(follower.poll_once(), 1)
        self.agent.open["c-1"]["acknowledged"] = False  # as if the acknowledgement was lost
        self.assertEqual(follower.poll_once(), 0)


if __name__ == "__main__":
    unittest.main()
