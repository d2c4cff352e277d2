"""Publishing a rank's shard: what the agent is told (its HTTP API, faked here) and what stays in memory."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List

import torch
from robustrl_agent import AgentClient

from robustrl_grpo.publish import AgentPublisher, ShardWriter


class _Agent(BaseHTTPRequestHandler):
    received: List[Dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        _Agent.received.append({"path": self.path, "body": body})
        answer = json.dumps({"eventId": "e1", "totalBytes": sum(body["bucketSizes"]), "checksums": []}).encode()
        self.send_response(202)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


def test_each_rank_publishes_its_shard_with_its_manifest_and_keeps_the_newest_versions(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
        shm = tmp_path / "shm"
        shm.mkdir()
        agent = AgentClient(url=f"http://127.0.0.1:{server.server_port}", raise_on_error=True)
        writers = [ShardWriter(model, rank, 2, 4096, str(tmp_path / "state"), shm_dir=str(shm)) for rank in range(2)]
        for version in (1, 2, 3):
            for writer in writers:
                AgentPublisher(writer, agent, keep=2).publish(version, version)
        bodies = [r["body"] for r in _Agent.received if r["path"] == "/v1/weights/versions"]
        assert [(b["version"], b["shard"]) for b in bodies] == [(v, {"index": r, "count": 2}) for v in (1, 2, 3) for r in (0, 1)]
        # The two shards name every parameter once between them.
        names = [t["name"] for b in bodies[:2] for t in b["tensors"]]
        assert sorted(names) == sorted(n for n, _ in model.named_parameters())
        # Versions 2 and 3 stay in memory (the agent serves them); version 1 is gone.
        assert sorted(p.name.rsplit("-v", 1)[1] for p in shm.iterdir()) == ["2-s0", "2-s1", "3-s0", "3-s1"]
    finally:
        server.shutdown()
