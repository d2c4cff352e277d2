"""Loads a weight version into a running vLLM engine in place, through the engine's own HTTP routes.

``pause(keep) → collective_rpc(robustrl_load_weights) → update_weight_version → reset_prefix_cache →
resume``: the sequence ``robustrl.vllm_extension`` documents. Standard library only (it runs wherever the agent's
side runs). The engine must run with ``VLLM_SERVER_DEV_MODE=1`` and the robustrl worker extension.

A failed call still resumes the engine (only a failing ``resume`` leaves it paused) and raises
``EngineLoadError`` naming the call and what the engine answered. A load that failed inside the worker
may have left some layers on the new weights: the caller must load a whole version again (or restart
the engine) before trusting the engine's answers, which is why the version is only stamped after the
load succeeded.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional

__all__ = ["EngineWeightLoader", "EngineLoadError"]


class EngineLoadError(RuntimeError):
    def __init__(self, call: str, status: Optional[int], detail: str) -> None:
        super().__init__(f"{call} failed ({'HTTP ' + str(status) if status is not None else 'unreachable'}): {detail}")
        self.call = call
        self.status = status
        self.detail = detail


class EngineWeightLoader:
    def __init__(self, url: str, timeout: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        # No environment proxies: the engine is on this machine or its network.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def load(self, version: int, parts: List[Dict[str, Any]]) -> Dict[str, Any]:
        """Loads the whole version from its parts (``{"path", "tensors", "bucketStarts"}``, one per shard);
        returns what each worker reported and the whole sequence's seconds."""
        started = time.monotonic()
        self._post("/pause?mode=keep", None)
        try:
            answer = self._post(
                "/collective_rpc",
                {
                    "method": "robustrl_load_weights",
                    "kwargs": {"parts": parts, "version": version},
                    "timeout": self.timeout,
                },
            )
            self._post("/update_weight_version", {"new_version": str(version)})
            reset = self._post("/reset_prefix_cache?reset_running_requests=true", None)
            if isinstance(reset, dict) and reset.get("success") is False:
                raise EngineLoadError("/reset_prefix_cache", 200, "the engine kept KV blocks computed by the old weights")
        finally:
            self._post("/resume", None)
        workers = answer.get("results", answer) if isinstance(answer, dict) else answer
        return {"version": version, "workers": workers, "seconds": round(time.monotonic() - started, 4)}

    def weight_version(self) -> Optional[str]:
        answer = self._request("GET", "/weight_info", None)
        return answer.get("weight_version") if isinstance(answer, dict) else None

    def _post(self, path: str, body: Optional[Dict[str, Any]]) -> Any:
        return self._request("POST", path, body)

    def _request(self, method: str, path: str, body: Optional[Dict[str, Any]]) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={"content-type": "application/json"})
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            raise EngineLoadError(path, err.code, err.read().decode("utf-8", "replace")[:2000]) from err
        except (urllib.error.URLError, OSError) as err:
            raise EngineLoadError(path, None, str(getattr(err, "reason", err))) from err
        return json.loads(raw) if raw else None
