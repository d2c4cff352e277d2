"""verl's weight update through robustrl, as verl's checkpoint-engine manager drives it (examples/verl/README.md).

Two actor ranks and one rollout, each with its machine's robustrl agent (their URLs given). For each
version ``global_steps``:

1. the actor's weights change (a stand-in for verl's training step: the GRPO example's model, perturbed
   with a seed of the version);
2. each actor rank's ``RobustrlCheckpointEngine`` (made by verl's own ``CheckpointEngineRegistry`` from
   ``custom_backend_module: robustrl.verl``) walks verl's per-tensor generator in ``send_weights``: it
   publishes its share to its agent as one shard of the version;
3. the rollout's ``receive_weights`` yields every tensor by name once its agent pulled the version whole
   (over UCX, scheduled by robustrl's weight registry): checked bit for bit against what was sent;
4. the rollout's agent loads the same version into the vLLM engine in place
   (``ROBUSTRL_ENGINE_WEIGHTS=vllm``); the engine says it serves it and answers greedily exactly as
   transformers does on the actor's weights.

Prints one JSON line per version and exits 0 when every check held.
"""

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from typing import Dict, List, Optional

import torch
from verl.checkpoint_engine import CheckpointEngineRegistry

import robustrl.verl  # noqa: F401 - what verl does with custom_backend_module: the import registers the backend
from robustrl_grpo.model import load_model, load_tokenizer

PROMPT = "6+7="
NEW_TOKENS = 3


def _json(url: str, body: Optional[dict] = None, timeout: float = 30.0) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"}, method="GET" if body is None else "POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=timeout) as response:
        return json.loads(response.read())


def _greedy(model: torch.nn.Module, prompt: List[int]) -> List[int]:
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt) :]


def _wait_for_version(engine_url: str, version: int, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if _json(engine_url + "/weight_info").get("weight_version") == str(version):
            return time.monotonic() - started
        time.sleep(0.2)
    raise TimeoutError(f"the engine did not serve version {version} within {timeout:.0f} s")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actor-agents", required=True, help="the actor ranks' agents, comma-separated (one rank each)")
    parser.add_argument("--rollout-agent", required=True)
    parser.add_argument("--engine-url", required=True, help="the rollout's vLLM engine (its agent loads versions into it)")
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--shm-dir", default="/dev/shm", help="where the actors' agents serve regions from")
    parser.add_argument("--versions", type=int, default=3)
    parser.add_argument("--first-version", type=int, default=1)
    args = parser.parse_args(argv)

    model = load_model(args.model_dir)
    prompt = load_tokenizer(args.model_dir).encode(PROMPT, add_special_tokens=False)
    make = lambda url: CheckpointEngineRegistry.new("robustrl", bucket_size=64 * 1024, agent_url=url, shm_dir=args.shm_dir, receive_timeout_s=300)  # noqa: E731
    actors = [make(url) for url in args.actor_agents.split(",")]
    reader = make(args.rollout_agent)
    # verl's manager: every engine's prepare(), the topology from them, each sender's process group.
    kwargs, _ = type(reader).build_topology(len(actors), 1, [e.prepare() for e in actors + [reader]])
    for i, actor in enumerate(actors):
        actor.init_process_group(**{k: v[i] for k, v in kwargs.items()})

    ok = True
    for version in range(args.first_version, args.first_version + args.versions):
        generator = torch.Generator().manual_seed(version)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=generator) * 0.05)
        weights = [(n, p.detach().clone()) for n, p in model.named_parameters()]

        async def round_trip() -> Dict[str, torch.Tensor]:
            for actor in actors:
                await actor.send_weights(iter(weights), global_steps=version)
            got: Dict[str, torch.Tensor] = {}
            async for name, tensor in reader.receive_weights(global_steps=version):
                got[name] = tensor.clone()
            return got

        started = time.monotonic()
        got = asyncio.run(round_trip())
        moved_s = time.monotonic() - started
        sent = dict(weights)
        equal = sorted(got) == sorted(sent) and all(torch.equal(got[n], sent[n]) for n in sent)
        loaded_s = _wait_for_version(args.engine_url, version, 120)
        answer = _json(
            args.engine_url + "/inference/v1/generate",
            {"token_ids": prompt, "sampling_params": {"max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}},
        )["choices"][0]
        same = answer["token_ids"] == _greedy(model, prompt)
        ok = ok and equal and same
        line = {"version": version, "tensors": len(sent), "receivedBitForBit": equal, "engineAnswersAsTransformers": same}
        print(json.dumps({**line, "moveSeconds": round(moved_s, 2), "engineLoadSeconds": round(loaded_s, 2)}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
