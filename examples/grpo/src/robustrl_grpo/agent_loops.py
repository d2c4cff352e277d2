"""The job's environment under robustrl: every step's prompts through robustrl's router, scored.

Each sample is a trajectory of its own (prompt id ``s<step>-p<k>``, sample index ``g``, batch
``step-<step>``): a completions request with the prompt's token ids goes to the router (tokens in),
which picks an engine, records the turn with its ids, log-probs and the version the engine says
sampled them (tokens out), and survives an engine dying mid-request. The answer is scored and the
trajectory completed in the request manager with its reward, so the trainer gets back exactly what
it needs (``kept_batches.py``). Batch ``s`` starts once an engine serves version ``s-1-max_staleness``
or newer: the loops run ahead of the trainer by the staleness bound, no further.
"""

from __future__ import annotations

import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional

from .config import JobConfig
from .engine import MODEL_NAME
from .http_json import HttpError, request_json, retrying
from .ledger import Ledger
from .rollouts import sample_seed
from .task import Problem, problems_for_step, reward

__all__ = ["AgentLoops", "identity_headers"]


def identity_headers(job_id: str, step: int, prompt: int, sample: int) -> Dict[str, str]:
    return {
        "x-robustrl-job": job_id,
        "x-robustrl-prompt": f"s{step}-p{prompt}",
        "x-robustrl-sample": str(sample),
        "x-robustrl-batch": f"step-{step}",
        "x-robustrl-step": str(step),
    }


class AgentLoops:
    def __init__(self, cfg: JobConfig, job_id: str, router_url: str, request_manager_url: str, tokenizer, token: Optional[str] = None) -> None:
        if not router_url or not request_manager_url:
            raise ValueError("the agent loops need the router's and the request manager's URLs")
        self.cfg, self.job_id, self.tokenizer = cfg, job_id, tokenizer
        self.router = router_url.rstrip("/")
        self.store = request_manager_url.rstrip("/")
        self.auth = {"authorization": f"Bearer {token}"} if token else {}
        self.ledger = Ledger(cfg.state_dir)
        self.stopped = threading.Event()

    def served_version(self) -> Optional[int]:
        # The engine list is the job's (addresses, machines): behind the token, not on the open probe.
        status, listed, _ = request_json("GET", self.router + "/v1/engines", headers=self.auth, timeout=5)
        if status >= 400:
            raise HttpError(status, f"router /v1/engines answered {status}")
        versions = [e.get("weightVersion", 0) for e in (listed or {}).get("engines", []) if e.get("alive")]
        return max(versions) if versions else None

    def run(self, first_step: int = 1) -> None:
        for step in range(first_step, self.cfg.steps + 1):
            floor = step - 1 - self.cfg.max_staleness
            retrying(f"an engine serving version {floor}", lambda: True if (self.served_version() or 0) >= floor else None, 24 * 3600, self.stopped.is_set)
            self.run_step(step)

    def run_step(self, step: int) -> List[Dict[str, Any]]:
        problems = problems_for_step(self.cfg.seed, step, self.cfg.prompts_per_step, self.cfg.max_operand)
        work = [(p, g, problem) for p, problem in enumerate(problems) for g in range(self.cfg.group_size)]
        with ThreadPoolExecutor(max_workers=min(32, len(work))) as pool:
            return list(pool.map(lambda w: self.sample(step, *w), work))

    def sample(self, step: int, p: int, g: int, problem: Problem) -> Dict[str, Any]:
        prompt = self.tokenizer.encode(problem.prompt, add_special_tokens=False)
        body = {
            "model": MODEL_NAME,
            "prompt": prompt,
            "max_tokens": self.cfg.max_new_tokens,
            "temperature": self.cfg.temperature,
            "top_p": 1.0,
            "seed": sample_seed(self.cfg.seed, step, p, g),
            "logprobs": 0,
            "return_token_ids": True,
        }
        headers = {**identity_headers(self.job_id, step, p, g), **self.auth}

        def once() -> Optional[Dict[str, Any]]:
            status, answer, got = request_json("POST", self.router + "/v1/completions", body, headers, timeout=120)
            if status == 200:
                return {"answer": answer, "trajectoryId": got.get("x-robustrl-trajectory")}
            if status == 409:
                # Restarted from its prompt by the continuation policy: the same request starts it again.
                return None
            if status >= 500:
                raise HttpError(status, f"router answered {status}: {answer}")
            raise HttpError(status, f"router refused sample s{step}-p{p}-g{g}: {status} {answer}")

        got = retrying(f"sample s{step}-p{p}-g{g}", once, 24 * 3600, self.stopped.is_set)
        choice = got["answer"]["choices"][0]
        ids = choice.get("token_ids") or []
        finished = choice.get("finish_reason") == "stop" and bool(ids) and ids[-1] == self.tokenizer.eos_token_id
        score = reward(problem, choice.get("text") or "", finished)
        trajectory_id = got["trajectoryId"]
        outcome = {"reward": score, "metadata": {"group": problem.key, "step": step, "prompt": p, "sample": g}}
        url = f"{self.store}/v1/trajectories/{urllib.parse.quote(trajectory_id, safe='')}/status"

        def complete() -> Optional[bool]:
            status, answer, _ = request_json("POST", url, {"status": "completed", "outcome": outcome}, self.auth, timeout=30)
            if status in (200, 409):
                return True
            if status >= 500:
                raise HttpError(status, f"request manager answered {status}")
            raise HttpError(status, f"request manager refused completing {trajectory_id}: {status} {answer}")

        retrying(f"complete {trajectory_id}", complete, 24 * 3600, self.stopped.is_set)
        versions = sorted({int(v["version"]) for v in (choice.get("weight_versions") or []) if str(v.get("version", "")).isdigit()})
        record = {"step": step, "trajectoryId": trajectory_id, "reward": score, "tokens": len(ids), "versions": versions}
        self.ledger.append("completed", **record)
        return record
