"""The reference job's agent loops (``robustrl_reference agent-loops``): every step's prompts as multi-turn,
tool-calling trajectories through the router, each marked completed in the request manager."""

import json
import logging
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional

from robustrl_reference_http import http_json, retrying
from robustrl_reference_ledger import Ledger
from robustrl_reference_policy import tool_result
from robustrl_reference_settings import Settings

logger = logging.getLogger("robustrl_reference")


class AgentLoops:
    """The agent workers: run every step's prompts as multi-turn tool-calling trajectories through the
    router, and mark each completed in the request manager. Batch ``s`` starts once an engine serves
    version ``s-2`` or newer (one batch ahead of the trainer, no more)."""

    def __init__(self, settings: Settings) -> None:
        if not settings.router_url:
            raise ValueError("the agent loops need the router's URL (ROBUSTRL_REF_ROUTER_URL or --router-url)")
        if not settings.request_manager_url:
            raise ValueError("the agent loops need the request manager's URL (ROBUSTRL_REQUEST_MANAGER_URL or --request-manager-url)")
        self.s = settings
        self.ledger = Ledger(settings.state_dir)
        self.stop = threading.Event()

    def served_version(self) -> Optional[int]:
        status, listed, _ = http_json("GET", self.s.router_url + "/v1/engines", timeout=5)
        versions = [e.get("weightVersion", 0) for e in (listed or {}).get("engines", []) if e.get("alive")]
        return max(versions) if versions else None

    def run(self) -> None:
        step = 0
        while step < self.s.target_steps():
            step += 1
            retrying("an engine serving version {}".format(step - 2), lambda: True if (self.served_version() or 0) >= step - 2 else None, 24 * 3600, self.stop)
            prompts = list(range(self.s.batch_size))
            threads = [threading.Thread(target=self._worker, args=(step, prompts)) for _ in range(self.s.concurrency)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            logger.info("batch step-%s generated", step)

    def _worker(self, step: int, prompts: List[int]) -> None:
        while not self.stop.is_set():
            try:
                k = prompts.pop(0)
            except IndexError:
                return
            self.trajectory(step, k)

    def trajectory(self, step: int, k: int) -> None:
        prompt_id = "s{}-p{}".format(step, k)
        headers = {"x-robustrl-job": self.s.job_id, "x-robustrl-prompt": prompt_id, "x-robustrl-sample": "0", "x-robustrl-step": str(step), "x-robustrl-batch": "step-{}".format(step)}
        initial = [{"role": "system", "content": "reference job"}, {"role": "user", "content": "task {}".format(prompt_id)}]
        messages, restarts, turns, trajectory_id = list(initial), 0, 0, None
        while not self.stop.is_set():
            answer = self._chat(messages, headers)
            trajectory_id = answer.get("trajectoryId") or trajectory_id
            if answer.get("restarted"):
                restarts += 1
                messages = list(initial)
                continue
            message = answer["message"]
            messages.append(message)
            turns += 1
            calls = message.get("tool_calls") or []
            if not calls:
                break
            time.sleep(self.s.tool_seconds)
            messages.extend(tool_result(c) for c in calls)
        if trajectory_id is None:
            return  # stopped before the router answered once
        url = "{}/v1/trajectories/{}/status".format(self.s.request_manager_url, urllib.parse.quote(trajectory_id, safe=""))

        def complete() -> Optional[bool]:
            status, body, _ = http_json("POST", url, {"status": "completed"}, timeout=10)
            if status in (200, 409):
                return True
            raise OSError("request manager answered {}: {}".format(status, body))

        retrying("complete " + trajectory_id, complete, stop=self.stop)
        self.ledger.append("completed", step=step, trajectoryId=trajectory_id, turns=turns, restarts=restarts)

    def _chat(self, messages: List[Dict[str, Any]], headers: Dict[str, str]) -> Dict[str, Any]:
        """One request through the router, retried while the router or every engine is away; a 409
        (TrajectoryRestartedError, or a conflict with the stored history) means start again from the prompt."""

        def once() -> Optional[Dict[str, Any]]:
            status, body, got = http_json("POST", self.s.router_url + "/v1/chat/completions", {"model": "reference", "messages": messages}, headers, timeout=120)
            trajectory_id = got.get("x-robustrl-trajectory")
            if status == 200:
                return {"message": body["choices"][0]["message"], "trajectoryId": trajectory_id}
            if status == 409:
                # Restarted from the prompt by the continuation policy (x-robustrl-restarted says why), or our history no
                # longer matches the stored one (a request still on a dropped attempt): either way, start again from the prompt.
                return {"restarted": got.get("x-robustrl-restarted", "conflict"), "trajectoryId": trajectory_id}
            raise OSError("router answered {}: {}".format(status, json.dumps(body)[:300]))

        return retrying("chat for {}".format(headers["x-robustrl-prompt"]), once, stop=self.stop)
