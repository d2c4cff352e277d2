"""Tests of robustrl_agent against a fake agent (http.server in a thread). Standard library only.

Run: cd clients/python && python3 -m unittest -v
"""

import json
import logging
import os
import socket
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple
from unittest import mock

import robustrl_agent
from robustrl_agent import AgentClient, AgentError

STATUS = {
    "machineId": "gpu-7",
    "role": "trainer",
    "jobId": "job-1",
    "phase": "training",
    "step": 42,
    "roleProcess": {"pid": 1234, "state": "running"},
    "gpuActivitySource": "dcgm",
}


class FakeAgent:
    """Records every request; answers 202 accepted unless told otherwise for a path."""

    def __init__(self) -> None:
        self.requests: List[Dict[str, Any]] = []
        self.authorizations: List[Optional[str]] = []
        # path -> (status, body bytes or JSON-able value, delay seconds)
        self.answers: Dict[str, Tuple[int, Any, float]] = {}
        self._lock = threading.Lock()
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._handle(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._handle(self.rfile.read(length))

            do_PUT = do_POST

            def do_DELETE(self) -> None:
                self._handle(None)

            def _handle(self, raw: Optional[bytes]) -> None:
                with agent._lock:
                    number = len(agent.requests) + 1
                    agent.requests.append(
                        {
                            "method": self.command,
                            "path": self.path,
                            "contentType": self.headers.get("Content-Type"),
                            "body": None if raw is None else json.loads(raw.decode("utf-8")),
                        }
                    )
                    agent.authorizations.append(self.headers.get("Authorization"))
                default = (200, STATUS, 0.0) if self.path == "/v1/status" else (202, {"accepted": True, "eventId": "evt-{}".format(number)}, 0.0)
                status, body, delay = agent.answers.get(self.path, default)
                if delay:
                    time.sleep(delay)
                data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:{}".format(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def last(self) -> Dict[str, Any]:
        return self.requests[-1]

    def posted(self) -> List[Tuple[str, Any]]:
        return [(r["path"], r["body"]) for r in self.requests]


def free_port_url() -> str:
    """A URL on which nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return "http://127.0.0.1:{}".format(port)


class AgentTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.agent = FakeAgent()
        self.addCleanup(self.agent.close)
        self.client = AgentClient(self.agent.url)


class ReportsTest(AgentTestCase):
    def test_phase(self) -> None:
        answer = self.client.phase("weight-update", 12)
        self.assertEqual(answer, {"accepted": True, "eventId": "evt-1"})
        self.assertEqual(
            self.agent.last(),
            {"method": "POST", "path": "/v1/phase", "contentType": "application/json", "body": {"phase": "weight-update", "step": 12}},
        )

    def test_step_begin_and_end(self) -> None:
        self.client.step_begin(3, "batch-3")
        self.client.step_end(3, "batch-3", 1500)
        self.assertEqual(
            self.agent.posted(),
            [
                ("/v1/steps/begin", {"step": 3, "batchId": "batch-3"}),
                ("/v1/steps/end", {"step": 3, "batchId": "batch-3", "durationMs": 1500}),
            ],
        )

    def test_checkpoint_saved(self) -> None:
        self.client.checkpoint_saved(100, "s3://ckpt/job-1/step-100", 8200)
        self.assertEqual(self.agent.posted(), [("/v1/checkpoints", {"step": 100, "uri": "s3://ckpt/job-1/step-100", "blockingMs": 8200})])

    def test_throughput(self) -> None:
        self.client.throughput(10.0, 1234.5, 17, 64, 5, rollout_id="rollout-2")
        self.client.throughput(window_seconds=5, tokens_per_second=0, completed_requests=0, in_flight_requests=3, awaiting_tools=3)
        self.assertEqual(
            self.agent.posted(),
            [
                (
                    "/v1/throughput",
                    {"windowSeconds": 10.0, "tokensPerSecond": 1234.5, "completedRequests": 17, "inFlightRequests": 64, "awaitingTools": 5, "rolloutId": "rollout-2"},
                ),
                ("/v1/throughput", {"windowSeconds": 5, "tokensPerSecond": 0, "completedRequests": 0, "inFlightRequests": 3, "awaitingTools": 3}),
            ],
        )

    def test_gpu_activity(self) -> None:
        self.client.gpu_activity(0.5)
        self.client.gpu_activity(0.25, interval_seconds=10, per_gpu=(0.0, 0.5))
        self.assertEqual(
            self.agent.posted(),
            [
                ("/v1/gpu-activity", {"tensorActive": 0.5}),
                ("/v1/gpu-activity", {"tensorActive": 0.25, "intervalSeconds": 10, "perGpu": [0.0, 0.5]}),
            ],
        )

    def test_error(self) -> None:
        self.client.error("xid-error", "Xid 79: GPU has fallen off the bus")
        self.assertEqual(self.agent.posted(), [("/v1/errors", {"signal": "xid-error", "detail": "Xid 79: GPU has fallen off the bus"})])

    def test_a_drain_notice_carries_its_time_left(self) -> None:
        self.client.error("node-draining", "preempted", departs_in_s=30)
        self.assertEqual(self.agent.last()["body"], {"signal": "node-draining", "detail": "preempted", "departsInSeconds": 30})

    def test_error_detail_is_truncated_to_what_the_agent_accepts(self) -> None:
        detail = "head " + "x" * 10000 + " tail"
        self.client.error("step-exception", detail)
        sent = self.agent.last()["body"]["detail"]
        self.assertEqual(len(sent), robustrl_agent.MAX_DETAIL_CHARS)
        self.assertTrue(sent.startswith("head "))
        self.assertTrue(sent.endswith(" tail"))
        self.assertIn("[... truncated ...]", sent)

    def test_status(self) -> None:
        self.assertEqual(self.client.status(), STATUS)
        self.assertEqual(self.agent.last(), {"method": "GET", "path": "/v1/status", "contentType": None, "body": None})


class RestartTest(AgentTestCase):
    """A restarted trainer learns its group and fetches its kept batch through the agent."""

    def test_restart_context_and_kept_batch(self) -> None:
        context = {"step": 7, "batchId": "b-7", "group": {"rank": 1, "worldSize": 2, "masterAddr": "10.0.0.7", "masterPort": 29500}}
        self.agent.answers["/v1/restart"] = (200, context, 0.0)
        self.assertEqual(self.client.restart_context(), context)
        path = "/v1/restart/batch?currentWeightVersion=7&maxStaleness=1"
        self.agent.answers[path] = (200, {"batchId": "b-7", "trajectories": [], "stale": []}, 0.0)
        self.assertEqual(self.client.kept_batch(7, 1), {"batchId": "b-7", "trajectories": [], "stale": []})
        self.assertEqual(self.agent.last()["path"], path)

    def test_never_restarted_is_none_even_when_raising(self) -> None:
        self.agent.answers["/v1/restart"] = (404, {"error": "this machine has not been restarted by the controller"}, 0.0)
        self.assertIsNone(AgentClient(self.agent.url, raise_on_error=True).restart_context())

    def test_bad_arguments_send_nothing(self) -> None:
        with self.assertRaises(ValueError):
            self.client.kept_batch(-1, 1)
        self.assertEqual(self.agent.requests, [])


class DeviceWeightsTest(AgentTestCase):
    BUCKETS = [
        {"sizeBytes": 1 << 20, "handle": "A" * 88, "offset": 512, "device": 0},
        {"sizeBytes": 4096, "handle": "B" * 88},
    ]

    def test_publish_device_weights(self) -> None:
        self.client.publish_device_weights(7, 70, self.BUCKETS)
        request = self.agent.last()
        self.assertEqual((request["method"], request["path"]), ("POST", "/v1/weights/versions"))
        self.assertEqual(
            request["body"],
            {
                "version": 7,
                "step": 70,
                "buckets": [
                    {"sizeBytes": 1 << 20, "handle": "A" * 88, "offset": 512, "device": 0},
                    {"sizeBytes": 4096, "handle": "B" * 88, "offset": 0, "device": 0},
                ],
            },
        )

    def test_register_and_remove_a_target(self) -> None:
        self.client.register_weight_target("slot-a", self.BUCKETS)
        self.assertEqual((self.agent.last()["method"], self.agent.last()["path"]), ("PUT", "/v1/weights/targets/slot-a"))
        self.assertEqual(len(self.agent.last()["body"]["buckets"]), 2)
        self.client.remove_weight_target("slot-a")
        self.assertEqual((self.agent.last()["method"], self.agent.last()["path"], self.agent.last()["body"]), ("DELETE", "/v1/weights/targets/slot-a", None))

    def test_bad_buckets_send_nothing(self) -> None:
        for bad in ([], None, [{"sizeBytes": 10}], [{"sizeBytes": -1, "handle": "x"}]):
            with self.assertRaises(ValueError):
                self.client.publish_device_weights(1, 1, bad)  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            self.client.register_weight_target("a/b", self.BUCKETS)
        self.assertEqual(self.agent.requests, [])


class EnginesTest(AgentTestCase):
    def test_the_engines_a_framework_started(self) -> None:
        self.client.set_engines({"tp0": "http://10.0.0.7:8000", "tp1": "http://10.0.0.7:8001"})
        request = self.agent.last()
        self.assertEqual((request["method"], request["path"]), ("PUT", "/v1/engines"))
        self.assertEqual(
            request["body"], {"engines": [{"name": "tp0", "url": "http://10.0.0.7:8000"}, {"name": "tp1", "url": "http://10.0.0.7:8001"}]}
        )

    def test_no_engines_sends_nothing(self) -> None:
        for bad in ({}, None, [("a", "http://x")]):
            with self.assertRaises(ValueError):
                self.client.set_engines(bad)  # type: ignore[arg-type]
        self.assertEqual(self.agent.requests, [])


class NamedWeightsTest(AgentTestCase):
    """A trainer rank's shard of a version, with the named tensors in its buckets (docs/integrators/weights.md)."""

    TENSORS = [
        {"name": "model.embed_tokens.weight", "dtype": "bfloat16", "shape": [128, 64], "bucket": 0, "offset": 0},
        {"name": "lm_head.weight", "dtype": "float32", "shape": [16, 64], "bucket": 1, "offset": 256},
    ]

    def test_publish_weights_without_a_manifest_sends_what_it_always_did(self) -> None:
        self.client.publish_weights(3, 30, "w-v3", [1024, 512])
        self.assertEqual(self.agent.last()["body"], {"version": 3, "step": 30, "shmName": "w-v3", "bucketSizes": [1024, 512]})

    def test_publish_a_shard_with_its_named_tensors(self) -> None:
        class Entry:
            def to_json(self) -> Dict[str, Any]:
                return {"name": "model.norm.weight", "dtype": "float16", "shape": [], "bucket": 1, "offset": 0}

        self.client.publish_weights(3, 30, "w-v3-s1", [16384, 4352], tensors=self.TENSORS + [Entry()], shard=1, shards=2)
        request = self.agent.last()
        self.assertEqual((request["method"], request["path"]), ("POST", "/v1/weights/versions"))
        self.assertEqual(
            request["body"],
            {
                "version": 3,
                "step": 30,
                "shmName": "w-v3-s1",
                "bucketSizes": [16384, 4352],
                "tensors": self.TENSORS + [{"name": "model.norm.weight", "dtype": "float16", "shape": [], "bucket": 1, "offset": 0}],
                "shard": {"index": 1, "count": 2},
            },
        )

    def test_bad_manifests_raise_value_error_and_send_nothing(self) -> None:
        c = self.client
        sizes = [16384, 4352]

        def rejected(pattern: str, **kwargs: Any) -> None:
            with self.assertRaisesRegex(ValueError, pattern):
                c.publish_weights(3, 30, "w", sizes, **kwargs)

        rejected(r"give both shard .* and shards", shard=0)
        rejected(r"give both shard .* and shards", shards=2)
        rejected(r"shard must be an integer in 0\.\.1, got 2", shard=2, shards=2)
        rejected(r"shards must be an integer >= 1, got 0", shard=0, shards=0)
        rejected(r"shard must be an integer in 0\.\.1, got True", shard=True, shards=2)
        rejected(r"tensors must be a list", tensors={"name": "x"})
        rejected(r"tensor 0: expected a dict", tensors=["x"])
        rejected(r"tensor 0: name must be a string of 1 to 500", tensors=[dict(self.TENSORS[0], name="")])
        rejected(r"tensor 0: name must be a string of 1 to 500", tensors=[dict(self.TENSORS[0], name="x" * 501)])
        rejected(r"tensor 'lm_head.weight' appears twice", tensors=[self.TENSORS[1], self.TENSORS[1]])
        rejected(r"unknown dtype 'complex64'", tensors=[dict(self.TENSORS[0], dtype="complex64")])
        rejected(r"shape must be a list of sizes", tensors=[dict(self.TENSORS[0], shape="128")])
        rejected(r"dimension must be an integer >= 0, got -1", tensors=[dict(self.TENSORS[0], shape=[-1])])
        rejected(r"bucket 2 does not exist \(2 buckets\)", tensors=[dict(self.TENSORS[0], bucket=2)])
        rejected(r"offset must be an integer >= 0", tensors=[dict(self.TENSORS[0], offset=-256)])
        rejected(r"bytes 512\.\.4608 lie outside bucket 1 of 4352 bytes", tensors=[dict(self.TENSORS[1], offset=512)])
        self.assertEqual(self.agent.requests, [])

    def test_latest_weights_hands_back_the_parts(self) -> None:
        parts = [{"shard": 0, "path": "/dev/shm/a", "shmName": "a", "target": None, "bucketSizes": [256], "bucketStarts": [0], "tensors": []}]
        self.agent.answers["/v1/weights/latest"] = (200, {"version": 3, "path": None, "shards": 2, "parts": parts}, 0.0)
        self.assertEqual(self.client.latest_weights()["parts"], parts)  # type: ignore[index]
        self.agent.answers["/v1/weights/latest"] = (404, {"error": "no version held whole yet"}, 0.0)
        self.assertIsNone(self.client.latest_weights())


class ConfigurationTest(unittest.TestCase):
    def test_url_from_environment_else_default(self) -> None:
        with mock.patch.dict(os.environ, {"ROBUSTRL_AGENT_URL": "http://10.0.0.5:9999/"}):
            self.assertEqual(AgentClient().url, "http://10.0.0.5:9999")
            self.assertEqual(AgentClient("http://127.0.0.1:1").url, "http://127.0.0.1:1")
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertEqual(AgentClient().url, "http://127.0.0.1:8086")

    def test_environment_proxy_is_not_used_for_the_local_agent(self) -> None:
        agent = FakeAgent()
        self.addCleanup(agent.close)
        with mock.patch.dict(os.environ, {"http_proxy": free_port_url(), "HTTP_PROXY": free_port_url(), "no_proxy": ""}):
            client = AgentClient(agent.url, raise_on_error=True)
            self.assertEqual(client.phase("idle", 0), {"accepted": True, "eventId": "evt-1"})

    def test_bearer_token_from_argument_else_environment(self) -> None:
        agent = FakeAgent()
        self.addCleanup(agent.close)
        with mock.patch.dict(os.environ, {"ROBUSTRL_AGENT_TOKEN": "from-the-environment-0123"}):
            AgentClient(agent.url, raise_on_error=True).phase("idle", 0)
            AgentClient(agent.url, raise_on_error=True, token="given-as-argument-0123").phase("idle", 0)
        with mock.patch.dict(os.environ, {}, clear=True):
            AgentClient(agent.url, raise_on_error=True).phase("idle", 0)
        self.assertEqual(
            agent.authorizations,
            ["Bearer from-the-environment-0123", "Bearer given-as-argument-0123", None],
        )
        with self.assertRaisesRegex(ValueError, "token must be a non-empty string without white space"):
            AgentClient(agent.url, token="two words")

    def test_rejects_bad_settings(self) -> None:
        with self.assertRaisesRegex(ValueError, "must start with http://, https:// or unix:"):
            AgentClient("127.0.0.1:8086")
        with self.assertRaisesRegex(ValueError, "timeout must be a number > 0"):
            AgentClient("http://127.0.0.1:8086", timeout=0)


class ArgumentValidationTest(AgentTestCase):
    def assertRejected(self, pattern: str, call: Any, *args: Any, **kwargs: Any) -> None:
        with self.assertRaisesRegex(ValueError, pattern):
            call(*args, **kwargs)

    def test_invalid_arguments_raise_value_error_and_send_nothing(self) -> None:
        c = self.client
        self.assertRejected(r"unknown phase 'trainig'; expected one of: initializing, training, ", c.phase, "trainig", 1)
        self.assertRejected(r"step must be an integer >= 0, got -1", c.phase, "training", -1)
        self.assertRejected(r"step must be an integer >= 0, got True", c.step_begin, True, "b")
        self.assertRejected(r"step must be an integer >= 0, got 1.5", c.step_begin, 1.5, "b")
        self.assertRejected(r"batch_id must be a non-empty string, got ''", c.step_begin, 1, "")
        self.assertRejected(r"duration_ms must be an integer >= 0, got 12.5", c.step_end, 1, "b", 12.5)
        self.assertRejected(r"uri must be a non-empty string", c.checkpoint_saved, 1, None, 0)
        self.assertRejected(r"blocking_ms must be an integer >= 0, got -5", c.checkpoint_saved, 1, "file:///c", -5)
        self.assertRejected(r"window_seconds must be a number > 0, got 0", c.throughput, 0, 1.0, 0, 0, 0)
        self.assertRejected(r"tokens_per_second must be a number >= 0, got nan", c.throughput, 1, float("nan"), 0, 0, 0)
        self.assertRejected(r"awaiting_tools must be an integer >= 0", c.throughput, 1, 1.0, 0, 0, -1)
        self.assertRejected(r"rollout_id must be a non-empty string", c.throughput, 1, 1.0, 0, 0, 0, rollout_id="")
        self.assertRejected(r"tensor_active must be a number in 0..1, got 1.5", c.gpu_activity, 1.5)
        self.assertRejected(r"interval_seconds must be a number > 0, got -1", c.gpu_activity, 0.5, interval_seconds=-1)
        self.assertRejected(r"per_gpu\[1\] must be a number in 0..1, got 2", c.gpu_activity, 0.5, per_gpu=[0.5, 2])
        self.assertRejected(r"per_gpu must be a sequence of numbers", c.gpu_activity, 0.5, per_gpu="0.5")
        self.assertRejected(r"unknown error signal 'process-exited'; expected one of: step-exception, ecc-error, xid-error", c.error, "process-exited", "x")
        self.assertRejected(r"detail must be a string", c.error, "ecc-error", None)
        self.assertRejected(r"departs_in_s must be a number >= 0, got -1", c.error, "node-draining", "x", -1)
        self.assertEqual(self.agent.requests, [])


class AgentRefusalTest(AgentTestCase):
    def test_400_raises_agent_error_with_the_servers_message_and_issues(self) -> None:
        self.agent.answers["/v1/phase"] = (
            400,
            {"error": "invalid phase report", "issues": [{"path": "step", "message": "Too big: expected number to be <= 9007199254740991"}]},
            0.0,
        )
        client = AgentClient(self.agent.url, raise_on_error=True)
        with self.assertRaises(AgentError) as caught:
            client.phase("training", 2**60)
        err = caught.exception
        self.assertEqual(err.status, 400)
        self.assertEqual(err.message, "invalid phase report")
        self.assertEqual(err.issues, [{"path": "step", "message": "Too big: expected number to be <= 9007199254740991"}])
        self.assertEqual(str(err), "POST /v1/phase: HTTP 400: invalid phase report (step: Too big: expected number to be <= 9007199254740991)")

    def test_409_for_gpu_activity_when_the_agent_has_a_hardware_source(self) -> None:
        self.agent.answers["/v1/gpu-activity"] = (409, {"error": "GPU activity comes from dcgm on this machine; pushes are refused"}, 0.0)
        client = AgentClient(self.agent.url, raise_on_error=True)
        with self.assertRaisesRegex(AgentError, r"^POST /v1/gpu-activity: HTTP 409: GPU activity comes from dcgm") as caught:
            client.gpu_activity(0.5)
        self.assertEqual(caught.exception.status, 409)

    def test_a_non_json_error_body_still_gives_a_message(self) -> None:
        self.agent.answers["/v1/errors"] = (502, b"Bad Gateway", 0.0)
        with self.assertRaisesRegex(AgentError, r"HTTP 502: Bad Gateway"):
            AgentClient(self.agent.url, raise_on_error=True).error("ecc-error", "DBE")

    def test_a_success_without_a_json_object_is_an_error(self) -> None:
        self.agent.answers["/v1/status"] = (200, b"<html>not the agent</html>", 0.0)
        with self.assertRaisesRegex(AgentError, r"not a JSON object"):
            AgentClient(self.agent.url, raise_on_error=True).status()

    def test_by_default_a_refusal_is_logged_and_returns_none(self) -> None:
        self.agent.answers["/v1/phase"] = (400, {"error": "invalid phase report", "issues": [{"path": "phase", "message": "Invalid option"}]}, 0.0)
        with self.assertLogs("robustrl_agent", logging.WARNING) as logs:
            self.assertIsNone(self.client.phase("training", 1))
        self.assertIn("HTTP 400: invalid phase report (phase: Invalid option)", logs.output[0])


class UnixSocketTest(unittest.TestCase):
    """An agent reached over its Unix socket (ROBUSTRL_AGENT_SOCKET): the framework in another container of the node."""

    def setUp(self) -> None:
        import socketserver
        import tempfile

        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "agent.sock")
        seen: List[Tuple[str, str, Any]] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def address_string(self) -> str:
                return "unix"

            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen.append(("PUT", self.path, json.loads(self.rfile.read(length))))
                data = b'{"engines": []}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                seen.append(("GET", self.path, None))
                self.send_response(400 if self.path == "/v1/restart" else 200)
                data = b'{"error": "no restart yet"}' if self.path == "/v1/restart" else b'{"machineId": "m-1"}'
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        self.server = Server(self.path, Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def tearDown(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.dir.cleanup()

    def test_requests_and_refusals_over_the_socket(self) -> None:
        client = AgentClient(url="unix:" + self.path, raise_on_error=True)
        self.assertEqual(client.status(), {"machineId": "m-1"})
        client.set_engines({"tp0": "http://10.0.0.7:8000"})
        with self.assertRaises(AgentError) as refused:
            client._send("GET", "/v1/restart", None)
        self.assertEqual((refused.exception.status, str(refused.exception)), (400, "GET /v1/restart: HTTP 400: no restart yet"))
        self.assertEqual([(m, p) for m, p, _ in self.seen], [("GET", "/v1/status"), ("PUT", "/v1/engines"), ("GET", "/v1/restart")])
        self.assertEqual(self.seen[1][2], {"engines": [{"name": "tp0", "url": "http://10.0.0.7:8000"}]})

    def test_the_environment_names_the_socket(self) -> None:
        with mock.patch.dict(os.environ, {"ROBUSTRL_AGENT_URL": "unix://" + self.path}):
            self.assertEqual(AgentClient(raise_on_error=True).status(), {"machineId": "m-1"})

    def test_a_missing_socket_is_unreachable_and_a_relative_path_refused(self) -> None:
        with self.assertRaises(AgentError) as gone:
            AgentClient(url="unix:" + self.path + ".gone", raise_on_error=True).status()
        self.assertIsNone(gone.exception.status)
        self.assertIn("agent unreachable", str(gone.exception))
        with self.assertRaises(ValueError):
            AgentClient(url="unix:agent.sock")


class UnreachableAgentTest(unittest.TestCase):
    def test_unreachable_agent_does_not_raise_by_default(self) -> None:
        client = AgentClient(free_port_url())
        with self.assertLogs("robustrl_agent", logging.DEBUG) as logs:
            self.assertIsNone(client.phase("training", 1))
            self.assertIsNone(client.step_begin(1, "b"))
            self.assertIsNone(client.status())
        # One warning per outage, the repeats at DEBUG.
        self.assertEqual([r.levelname for r in logs.records], ["WARNING", "DEBUG", "DEBUG"])
        self.assertIn("agent unreachable at http://127.0.0.1:", logs.output[0])

    def test_unreachable_agent_raises_with_raise_on_error(self) -> None:
        url = free_port_url()
        with self.assertRaisesRegex(AgentError, r"^POST /v1/steps/begin: agent unreachable at " + url) as caught:
            AgentClient(url, raise_on_error=True).step_begin(1, "b")
        self.assertIsNone(caught.exception.status)

    def test_slow_agent_times_out_without_raising(self) -> None:
        agent = FakeAgent()
        self.addCleanup(agent.close)
        agent.answers["/v1/phase"] = (202, {"accepted": True, "eventId": "late"}, 1.0)
        client = AgentClient(agent.url, timeout=0.2)
        started = time.monotonic()
        with self.assertLogs("robustrl_agent", logging.WARNING):
            self.assertIsNone(client.phase("training", 1))
        self.assertLess(time.monotonic() - started, 0.9)
        with self.assertRaisesRegex(AgentError, r"no answer from the agent at .* within 0.2 s"):
            AgentClient(agent.url, timeout=0.2, raise_on_error=True).phase("training", 1)

    def test_recovery_is_logged_once_the_agent_answers_again(self) -> None:
        client = AgentClient(free_port_url())
        with self.assertLogs("robustrl_agent", logging.INFO) as logs:
            client.phase("idle", 0)
            agent = FakeAgent()
            self.addCleanup(agent.close)
            client.url = agent.url
            self.assertIsNotNone(client.phase("idle", 0))
        self.assertIn("is reachable again", logs.output[-1])


class TrainingStepTest(AgentTestCase):
    def test_reports_phase_begin_and_end_with_the_measured_duration(self) -> None:
        with self.client.training_step(7, "batch-7"):
            time.sleep(0.05)
        posted = self.agent.posted()
        self.assertEqual(
            posted[:2],
            [("/v1/phase", {"phase": "training", "step": 7}), ("/v1/steps/begin", {"step": 7, "batchId": "batch-7"})],
        )
        self.assertEqual(len(posted), 3)
        path, body = posted[2]
        self.assertEqual(path, "/v1/steps/end")
        self.assertEqual((body["step"], body["batchId"]), (7, "batch-7"))
        self.assertIsInstance(body["durationMs"], int)
        self.assertGreaterEqual(body["durationMs"], 45)
        self.assertLess(body["durationMs"], 5000)

    def test_reports_an_exception_and_reraises_it(self) -> None:
        def forward() -> None:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

        with self.assertRaisesRegex(RuntimeError, "illegal memory access"):
            with self.client.training_step(8, "batch-8"):
                forward()
        paths = [p for p, _ in self.agent.posted()]
        self.assertEqual(paths, ["/v1/phase", "/v1/steps/begin", "/v1/errors"])
        body = self.agent.last()["body"]
        self.assertEqual(body["signal"], "step-exception")
        detail = body["detail"]
        self.assertTrue(detail.startswith("RuntimeError: CUDA error: an illegal memory access was encountered\nstep 8, batch batch-8\n"), detail)
        self.assertIn("test_robustrl_agent.py", detail)
        self.assertIn("in forward", detail)
        self.assertLessEqual(len(detail), robustrl_agent.MAX_DETAIL_CHARS)

    def test_a_failed_report_never_replaces_the_steps_exception(self) -> None:
        self.agent.answers["/v1/errors"] = (500, {"error": "store down"}, 0.0)
        client = AgentClient(self.agent.url, raise_on_error=True)
        with self.assertLogs("robustrl_agent", logging.WARNING) as logs:
            with self.assertRaises(KeyError):
                with client.training_step(9, "batch-9"):
                    raise KeyError("missing")
        self.assertIn("could not report the exception of step 9", logs.output[0])

    def test_the_step_runs_and_raises_normally_while_the_agent_is_unreachable(self) -> None:
        client = AgentClient(free_port_url())
        ran = []
        with self.assertLogs("robustrl_agent", logging.WARNING):
            with client.training_step(1, "b"):
                ran.append(True)
            with self.assertRaisesRegex(ValueError, "bad batch"):
                with client.training_step(2, "b"):
                    raise ValueError("bad batch")
        self.assertEqual(ran, [True])

    def test_interrupts_are_not_reported_as_faults(self) -> None:
        with self.assertRaises(KeyboardInterrupt):
            with self.client.training_step(3, "b"):
                raise KeyboardInterrupt()
        self.assertEqual([p for p, _ in self.agent.posted()], ["/v1/phase", "/v1/steps/begin"])

    def test_invalid_step_is_refused_before_the_body_runs(self) -> None:
        with self.assertRaisesRegex(ValueError, "step must be an integer >= 0"):
            with self.client.training_step(-1, "b"):
                self.fail("the body must not run")
        self.assertEqual(self.agent.requests, [])


if __name__ == "__main__":
    unittest.main()
