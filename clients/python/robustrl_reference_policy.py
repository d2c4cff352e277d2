"""The reference job's policy (``robustrl_reference``), deterministic stand-ins: the weights of each
version, what an engine holding a version answers, and what a tool call returns."""

import hashlib
import json
from typing import Any, Dict, List

BUCKETS = 2
BUCKET_BYTES = 64 * 1024


def weights_bytes(version: int) -> bytes:
    """The policy's weights at ``version``: deterministic, so any copy can be checked against it."""
    seed = hashlib.sha256("robustrl-reference-weights-{}".format(version).encode()).digest()
    block = seed * (BUCKET_BYTES // len(seed))
    return block * BUCKETS


def engine_reply(messages: List[Dict[str, Any]], version: int, tool_rounds: int, tokens: int) -> Dict[str, Any]:
    """The assistant message an engine holding ``version`` answers: a tool call for each of the first
    ``tool_rounds`` assistant turns, then a final answer. The content starts with ``v<version>:``."""
    done = sum(1 for m in messages if m.get("role") == "assistant")
    seed = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    words = " ".join("t{}".format(seed[(2 * i) % 60 : (2 * i) % 60 + 2]) for i in range(max(0, tokens - 1)))
    content = "v{}: {}".format(version, words).strip()
    if done < tool_rounds:
        call = {"id": "call-{}-{}".format(done, seed[:8]), "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"q": seed[:6]})}}
        return {"role": "assistant", "content": content, "tool_calls": [call]}
    return {"role": "assistant", "content": content}


def tool_result(call: Dict[str, Any]) -> Dict[str, Any]:
    """The environment's answer to a tool call (deterministic)."""
    args = call.get("function", {}).get("arguments", "")
    return {"role": "tool", "tool_call_id": call.get("id", ""), "content": "result of " + hashlib.sha256(args.encode()).hexdigest()[:12]}
