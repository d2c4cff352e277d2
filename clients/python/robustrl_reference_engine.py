"""The reference job's rollout engine (``robustrl_reference engine``): OpenAI-compatible chat completions
answering hash words, from the weight version its agent holds whole."""

import hashlib
import json
import logging
import os
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional

from robustrl_agent import AgentClient
from robustrl_reference_policy import BUCKET_BYTES, BUCKETS, engine_reply, weights_bytes
from robustrl_reference_settings import Settings

logger = logging.getLogger("robustrl_reference")


class ReferenceEngine:
    """An OpenAI-compatible engine (chat completions, non-streaming) serving the weights its agent holds."""

    def __init__(self, settings: Settings, agent: Optional[AgentClient] = None) -> None:
        self.s = settings
        self.agent = agent or AgentClient()
        self.version: Optional[int] = None
        self.stop = threading.Event()
        self.tokens = 0
        self.completed = 0
        self.in_flight = 0
        self._lock = threading.Lock()
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path in ("/health", "/v1/models"):
                    body = {"object": "list", "data": [{"id": "reference", "object": "model"}]} if self.path == "/v1/models" else {"version": engine.version}
                    return self._send(200, body)
                self._send(404, {"error": {"message": "no route " + self.path}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    return self._send(400, {"error": {"message": "the body is not JSON"}})
                if self.path != "/v1/chat/completions" or not isinstance(body.get("messages"), list):
                    return self._send(400, {"error": {"message": "only POST /v1/chat/completions with messages"}})
                if body.get("stream"):
                    return self._send(400, {"error": {"message": "the reference engine does not stream"}})
                version = engine.version
                if version is None:
                    return self._send(503, {"error": {"message": "no weights loaded yet"}})
                with engine._lock:
                    engine.in_flight += 1
                try:
                    time.sleep(engine.s.token_seconds * engine.s.tokens_per_reply)
                    message = engine_reply(body["messages"], version, engine.s.tool_rounds, engine.s.tokens_per_reply)
                finally:
                    with engine._lock:
                        engine.in_flight -= 1
                        engine.tokens += engine.s.tokens_per_reply
                        engine.completed += 1
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                self._send(
                    200,
                    {
                        "id": "chatcmpl-" + hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest()[:12],
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": "reference",
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 0, "completion_tokens": engine.s.tokens_per_reply, "total_tokens": engine.s.tokens_per_reply},
                    },
                    # The version that produced the answer: the router tags the turn with it, even while its view of this engine lags.
                    {"x-robustrl-weight-version": str(version)},
                )

            def _send(self, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        port = settings.port or _port_of(os.environ.get("ROBUSTRL_INFERENCE_URL", ""))
        self.server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return "http://127.0.0.1:{}".format(self.server.server_address[1])

    def load_newest(self) -> None:
        """Load the newest version the agent holds whole, checking its bytes against the policy."""
        latest = self.agent.latest_weights()
        if not latest or (self.version is not None and latest["version"] <= self.version):
            return
        version = int(latest["version"])
        self.agent.phase("weight-update", max(version, 0))
        with open(latest["path"], "rb") as f:
            held = f.read(int(latest.get("totalBytes", BUCKETS * BUCKET_BYTES)))
        if held != weights_bytes(version):
            self.agent.error("step-exception", "weights of version {} at {} do not match the published policy".format(version, latest["path"]))
            return
        self.version = version
        self.agent.phase("rollout", max(version, 0))
        logger.info("engine serves weight version %s", version)

    def report(self, window_s: float) -> None:
        with self._lock:
            tokens, completed, in_flight = self.tokens, self.completed, self.in_flight
            self.tokens, self.completed = 0, 0
        self.agent.throughput(window_seconds=window_s, tokens_per_second=tokens / window_s, completed_requests=completed, in_flight_requests=in_flight, awaiting_tools=0)

    def serve(self, report_every_s: float = 5.0) -> None:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.agent.phase("initializing", 0)
        logger.info("reference engine at %s", self.url)
        last_report = time.monotonic()
        while not self.stop.is_set():
            self.load_newest()
            if time.monotonic() - last_report >= report_every_s:
                self.report(time.monotonic() - last_report)
                last_report = time.monotonic()
            self.stop.wait(0.2)
        self.server.shutdown()


def _port_of(url: str) -> int:
    if not url:
        return 0
    return int(urllib.parse.urlparse(url).port or 80)
