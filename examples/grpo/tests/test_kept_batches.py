"""The trainer's batches from the request manager: what is within the bound is trained, the rest named."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator

import pytest

from robustrl_grpo.config import JobConfig
from robustrl_grpo.kept_batches import KeptBatches


def _sample(tid: str) -> Dict[str, Any]:
    return {
        "trajectoryId": tid,
        "sample": {
            "promptTokenIds": [1, 2],
            "responseTokenIds": [3],
            "logprobs": [-0.1],
            "lossMask": [1],
            "versions": [4],
            "reward": 1.0,
            "metadata": {"group": "g"},
            "exact": True,
        },
        "reason": None,
    }


@pytest.fixture
def store() -> Iterator[Dict[str, Any]]:
    state: Dict[str, Any] = {"within": ["t-1", "t-2", "t-3"], "stale": ["t-4"], "unusable": []}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.endswith("/batches/step-5"):
                body: Any = {"total": 4, "completed": 4}
            else:
                samples = [_sample(t) for t in state["within"]]
                samples += [{"trajectoryId": t, "sample": None, "reason": "turn 1 has no token ids (recorded as text only)"} for t in state["unusable"]]
                body = {"trajectories": [], "samples": samples, "stale": [{"trajectoryId": t, "staleness": 2} for t in state["stale"]]}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()


def _batches(url: str) -> KeptBatches:
    return KeptBatches(JobConfig(prompts_per_step=2, group_size=2), "job-1", url)


def test_trains_what_is_within_the_bound_and_names_what_was_left_out(store: Dict[str, Any]) -> None:
    batches = _batches(store["url"])
    samples = batches.batch(5)
    assert sorted(s.id for s in samples) == ["t-1", "t-2", "t-3"]
    assert batches.excluded(5) == ["t-4"]
    assert batches.excluded(6) == []


def test_a_batch_with_nothing_within_the_bound_is_an_error(store: Dict[str, Any]) -> None:
    store["within"], store["stale"] = [], ["t-1", "t-2", "t-3", "t-4"]
    with pytest.raises(RuntimeError, match="none of its 4 samples is within the staleness bound"):
        _batches(store["url"]).batch(5)


def test_a_trajectory_without_a_training_sample_is_left_out_and_named(store: Dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    store["within"], store["unusable"] = ["t-1", "t-2"], ["t-3"]
    batches = _batches(store["url"])
    with caplog.at_level("WARNING", logger="robustrl_grpo.kept_batches"):
        samples = batches.batch(5)
    assert sorted(s.id for s in samples) == ["t-1", "t-2"]
    assert batches.unusable(5) == ["t-3"]
    assert batches.excluded(5) == ["t-4"]
    assert "trajectory t-3 left out, it has no training sample: turn 1 has no token ids" in caplog.text


def test_a_batch_short_of_samples_even_counting_those_left_out_is_an_error(store: Dict[str, Any]) -> None:
    store["within"], store["stale"], store["unusable"] = ["t-1"], [], ["t-3"]
    with pytest.raises(RuntimeError, match="1 samples, 0 stale ones and 1 without a training sample of 4"):
        _batches(store["url"]).batch(5)

