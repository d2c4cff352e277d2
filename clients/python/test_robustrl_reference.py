"""Tests of the reference job (robustrl_reference) against fake agents, a fake request manager and a fake
router (http.server in threads). Standard library only.

Run: cd clients/python && python3 -m unittest -v
"""

import json
import os
import shutil
import socket
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Tuple
from urllib.parse import unquote

import robustrl_reference as ref
from robustrl_agent import AgentClient
from test_robustrl_agent import FakeAgent


class FakeHttp:
    """A server whose answers come from ``handle(method, path, body) -> (status, body, headers)``."""

    def __init__(self, handle: Callable[[str, str, Any], Tuple[int, Any, Dict[str, str]]]) -> None:
        self.requests: List[Tuple[str, str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._answer(json.loads(self.rfile.read(length) or b"null"))

            def _answer(self, body: Any) -> None:
                fake.requests.append((self.command, self.path, body))
                status, answer, headers = handle(self.command, self.path, body)
                raw = json.dumps(answer).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(raw)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:{}".format(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class RequestManager:
    """Enough of the request manager: batch progress, the completed batch, status changes."""

    def __init__(self) -> None:
        self.completed: Dict[str, List[str]] = {}  # batch -> trajectory ids
        self.http = FakeHttp(self.handle)

    def handle(self, method: str, path: str, body: Any) -> Tuple[int, Any, Dict[str, str]]:
        parts = path.split("?")[0].split("/")
        if method == "GET" and parts[2] == "jobs" and len(parts) == 6:
            return 200, {"completed": len(self.completed.get(parts[5], [])), "in-flight": 0}, {}
        if method == "GET" and parts[-1] == "completed":
            ids = self.completed.get(parts[5], [])
            return 200, {"trajectories": [{"trajectoryId": t, "turns": [{"turnId": t + "#0"}]} for t in ids], "stale": []}, {}
        if method == "POST" and parts[-1] == "status":
            trajectory = unquote(parts[3])
            step = trajectory.split("/")[1].split("-")[0][1:]
            self.completed.setdefault("step-" + step, []).append(trajectory)
            return 200, {"changed": True}, {}
        return 404, {"error": "no route " + path}, {}


class ReferenceTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="robustrl-ref-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.agent = FakeAgent()
        self.addCleanup(self.agent.close)

    def settings(self, **values: Any) -> ref.Settings:
        defaults = dict(state_dir=self.dir, steps=2, batch_size=2, tool_rounds=1, tokens_per_reply=4, token_seconds=0.0, tool_seconds=0.0, train_seconds=0.0)
        defaults.update(values)
        return ref.Settings(**defaults)


class PolicyTest(unittest.TestCase):
    def test_replies_are_deterministic_tool_calls_then_an_answer_tagged_with_the_version(self) -> None:
        prompt = [{"role": "user", "content": "task"}]
        first = ref.engine_reply(prompt, 3, tool_rounds=1, tokens=4)
        self.assertEqual(first, ref.engine_reply(prompt, 3, tool_rounds=1, tokens=4))
        self.assertTrue(first["content"].startswith("v3: "))
        self.assertEqual(len(first["tool_calls"]), 1)
        then = prompt + [first, ref.tool_result(first["tool_calls"][0])]
        final = ref.engine_reply(then, 4, tool_rounds=1, tokens=4)
        self.assertNotIn("tool_calls", final)
        self.assertTrue(final["content"].startswith("v4: "))
        self.assertEqual(ref.tool_result(first["tool_calls"][0])["tool_call_id"], first["tool_calls"][0]["id"])

    def test_weights_differ_per_version_and_have_the_published_size(self) -> None:
        self.assertEqual(len(ref.weights_bytes(1)), ref.BUCKETS * ref.BUCKET_BYTES)
        self.assertNotEqual(ref.weights_bytes(1), ref.weights_bytes(2))

    def test_settings_need_a_state_dir_and_positive_sizes(self) -> None:
        with self.assertRaisesRegex(ValueError, "state directory is required"):
            ref.Settings.from_env({})
        with self.assertRaisesRegex(ValueError, "batch_size must be at least 1"):
            ref.Settings.from_env({"ROBUSTRL_REF_STATE_DIR": "/tmp/x", "ROBUSTRL_REF_BATCH_SIZE": "0"})
        s = ref.Settings.from_env({"ROBUSTRL_REF_STATE_DIR": "/tmp/x", "ROBUSTRL_REF_STEPS": "5"}, {"steps": 7})
        self.assertEqual((s.steps, s.batch_size), (7, 8))

    def test_the_step_count_may_be_raised_while_the_job_runs_never_lowered(self) -> None:
        folder = tempfile.mkdtemp(prefix="robustrl-ref-")
        self.addCleanup(shutil.rmtree, folder, True)
        s = ref.Settings(state_dir=folder, steps=5)
        self.assertEqual(s.target_steps(), 5)
        for written, expected in (("9\n", 9), ("3", 5), ("nine", 5), ("", 5)):
            with open(os.path.join(folder, "steps"), "w") as f:
                f.write(written)
            self.assertEqual(s.target_steps(), expected, written)


class EngineTest(ReferenceTestCase):
    def test_serves_nothing_before_weights_then_the_version_its_agent_holds_and_refuses_a_corrupt_copy(self) -> None:
        engine = ref.ReferenceEngine(self.settings(), AgentClient(self.agent.url))
        threading.Thread(target=engine.server.serve_forever, daemon=True).start()
        self.addCleanup(engine.server.shutdown)
        chat = {"model": "reference", "messages": [{"role": "user", "content": "go"}]}
        self.agent.answers["/v1/weights/latest"] = (404, {"error": "no version held whole yet"}, 0.0)
        engine.load_newest()
        self.assertEqual(ref.http_json("POST", engine.url + "/v1/chat/completions", chat)[0], 503)

        path = os.path.join(self.dir, "v2")
        with open(path, "wb") as f:
            f.write(ref.weights_bytes(2))
        self.agent.answers["/v1/weights/latest"] = (200, {"version": 2, "path": path, "totalBytes": len(ref.weights_bytes(2))}, 0.0)
        engine.load_newest()
        status, answer, _headers = ref.http_json("POST", engine.url + "/v1/chat/completions", chat)
        self.assertEqual(status, 200)
        self.assertTrue(answer["choices"][0]["message"]["content"].startswith("v2: "))
        # It says which version produced the answer: the router tags the turn with it.
        self.assertEqual(_headers["x-robustrl-weight-version"], "2")

        corrupt = os.path.join(self.dir, "v3")
        with open(corrupt, "wb") as f:
            f.write(ref.weights_bytes(2))
        self.agent.answers["/v1/weights/latest"] = (200, {"version": 3, "path": corrupt, "totalBytes": len(ref.weights_bytes(2))}, 0.0)
        engine.load_newest()
        self.assertEqual(engine.version, 2)
        errors = [b for p, b in self.agent.posted() if p == "/v1/errors"]
        self.assertEqual(len(errors), 1)
        self.assertIn("version 3", errors[0]["detail"])
        engine.report(1.0)
        self.assertEqual([b["completedRequests"] for p, b in self.agent.posted() if p == "/v1/throughput"], [1])


class TrainerTest(ReferenceTestCase):
    def test_trains_each_step_on_its_batch_checkpoints_and_publishes_then_resumes_after_its_checkpoint(self) -> None:
        rm = RequestManager()
        self.addCleanup(rm.http.close)
        shm = os.path.join(self.dir, "shm")
        os.makedirs(shm)
        os.environ["ROBUSTRL_WEIGHTS_SHM_DIR"] = shm
        self.addCleanup(os.environ.pop, "ROBUSTRL_WEIGHTS_SHM_DIR")
        for step in (1, 2, 3):
            rm.completed["step-{}".format(step)] = ["job/s{}-p0/0".format(step), "job/s{}-p1/0".format(step)]
        ref.TrainerRank(self.settings(request_manager_url=rm.http.url), AgentClient(self.agent.url), env={}).run()
        ledger = ref.Ledger.read(self.dir)
        self.assertEqual([(r["step"], r["trajectories"]) for r in ledger if r["kind"] == "trained"], [(1, 2), (2, 2)])
        self.assertEqual([r["version"] for r in ledger if r["kind"] == "published"], [0, 1, 2])
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "checkpoints"))), ["step-1", "step-2"])
        with open(os.path.join(shm, "reference-job-v2"), "rb") as f:
            self.assertEqual(f.read(), ref.weights_bytes(2))
        published = [b for p, b in self.agent.posted() if p == "/v1/weights/versions"]
        self.assertEqual([b["version"] for b in published], [0, 1, 2])
        self.assertEqual([p for p, _ in self.agent.posted()].count("/v1/steps/end"), 2)

        # A restarted trainer resumes after its last checkpoint: step 3 only (the job's count raised to 3 in
        # its state folder), after publishing version 2 again.
        with open(os.path.join(self.dir, "steps"), "w") as f:
            f.write("3\n")
        ref.TrainerRank(self.settings(request_manager_url=rm.http.url), AgentClient(self.agent.url), env={"ROBUSTRL_RESTART_COUNT": "1"}).run()
        trained = [(r["step"], r["attempt"]) for r in ref.Ledger.read(self.dir) if r["kind"] == "trained"]
        self.assertEqual(trained, [(1, 0), (2, 0), (3, 1)])

    def test_a_checkpoint_the_ledger_missed_is_written_to_it_before_anything_else(self) -> None:
        # Killed between the checkpoint file (the commit) and its ledger line: the restarted rank 0 writes the line.
        trainer = ref.TrainerRank(self.settings(), AgentClient(self.agent.url), env={})
        with open(os.path.join(self.dir, "checkpoints", "step-4"), "w") as f:
            f.write("{}")
        trainer.reconcile_ledger(trainer.last_checkpoint())
        trainer.reconcile_ledger(trainer.last_checkpoint())
        self.assertEqual([(r["step"], r.get("recovered")) for r in ref.Ledger.read(self.dir) if r["kind"] == "checkpoint"], [(4, True)])

    def test_ranks_meet_before_each_step_and_a_rank_that_left_fails_the_other(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        barriers: Dict[int, ref.StepBarrier] = {}
        joined = [threading.Thread(target=lambda r=r: barriers.__setitem__(r, ref.StepBarrier(r, 2, "127.0.0.1", port, timeout_s=10))) for r in (0, 1)]
        for t in joined:
            t.start()
        for t in joined:
            t.join()
        met = threading.Thread(target=barriers[1].wait, args=(1,))
        met.start()
        barriers[0].wait(1)
        met.join()
        assert barriers[1].conn is not None
        barriers[1].conn.close()
        with self.assertRaisesRegex(ConnectionError, "a rank left the group before step 2"):
            barriers[0].wait(2)
        barriers[0].close()


class AgentLoopsTest(ReferenceTestCase):
    def test_runs_every_prompt_to_its_answer_through_the_router_and_starts_again_when_restarted(self) -> None:
        rm = RequestManager()
        self.addCleanup(rm.http.close)
        restarted = {"s1-p1": 1}  # this trajectory's second request is answered 409 restarted once
        seen: List[Tuple[str, int]] = []

        def router_answer(method: str, path: str, body: Any) -> Tuple[int, Any, Dict[str, str]]:
            if path == "/v1/engines":
                return 200, {"engines": [{"alive": True, "weightVersion": 5}]}, {}
            prompt = body["messages"][1]["content"].split(" ")[1]
            headers = {"x-robustrl-trajectory": "job/{}/0".format(prompt)}
            seen.append((prompt, len(body["messages"])))
            if len(body["messages"]) > 2 and restarted.get(prompt):
                restarted[prompt] -= 1
                return 409, {"error": {"type": "TrajectoryRestartedError"}}, {**headers, "x-robustrl-restarted": "policy-restart"}
            message = ref.engine_reply(body["messages"], 5, tool_rounds=1, tokens=4)
            return 200, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}, headers

        router = FakeHttp(router_answer)
        self.addCleanup(router.close)
        ref.AgentLoops(self.settings(router_url=router.url, request_manager_url=rm.http.url, steps=2, concurrency=2)).run()
        self.assertEqual({k: sorted(v) for k, v in rm.completed.items()}, {"step-1": ["job/s1-p0/0", "job/s1-p1/0"], "step-2": ["job/s2-p0/0", "job/s2-p1/0"]})
        completed = {r["trajectoryId"]: r for r in ref.Ledger.read(self.dir) if r["kind"] == "completed"}
        self.assertEqual(completed["job/s1-p1/0"]["restarts"], 1)
        self.assertEqual(completed["job/s1-p0/0"]["turns"], 2)
        # The restarted trajectory went back to its prompt: a 2-message request after the refused 4-message one.
        self.assertEqual([n for p, n in seen if p == "s1-p1"], [2, 4, 2, 4])

    def test_needs_a_router_and_a_request_manager(self) -> None:
        with self.assertRaisesRegex(ValueError, "router's URL"):
            ref.AgentLoops(self.settings())


if __name__ == "__main__":
    unittest.main()
