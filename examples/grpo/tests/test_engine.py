"""The real vLLM engine loading versions in place through robustrl's worker extension."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Dict, List

import pytest
import torch

from robustrl.named_weights import dtype_name, plan, shard_assignment, write_region
from robustrl.vllm_loader import EngineLoadError, EngineWeightLoader
from robustrl_grpo.engine import MODEL_NAME, EngineSampler
from robustrl_grpo.grpo import token_logprobs
from robustrl_grpo.model import load_model, load_tokenizer

pytestmark = pytest.mark.engine


def _perturbed(model_dir: Path, seed: int) -> torch.nn.Module:
    model = load_model(model_dir)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.05)
    return model


def _parts(model: torch.nn.Module, version: int, directory: Path, shards: int = 2) -> List[Dict]:
    params = dict(model.named_parameters())
    owner = shard_assignment({n: p.numel() * p.element_size() for n, p in params.items()}, shards)
    parts = []
    for shard in range(shards):
        names = [n for n in params if owner[n] == shard]
        layout = plan([(n, dtype_name(params[n]), tuple(params[n].shape)) for n in names], 64 * 1024)
        path = directory / f"v{version}-s{shard}"
        write_region(str(path), layout, params)
        parts.append({"path": str(path), "tensors": [e.to_json() for e in layout.tensors], "bucketStarts": layout.bucket_starts})
    return parts


def _generate(url: str, prompt: List[int]) -> Dict:
    body = {"token_ids": prompt, "sampling_params": {"max_tokens": 4, "temperature": 0, "logprobs": 0}}
    request = urllib.request.Request(url + "/inference/v1/generate", json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["choices"][0]


def _reference_logprobs(model: torch.nn.Module, prompt: List[int], answer: List[int]) -> List[float]:
    ids = torch.tensor([prompt + answer])
    with torch.no_grad():
        lp = token_logprobs(model(input_ids=ids).logits, ids)
    return lp[0, len(prompt) :].tolist()


def test_a_version_in_two_shards_loads_in_place_and_answers_exactly_as_transformers(engine, model_dir: Path, tmp_path: Path) -> None:
    tokenizer = load_tokenizer(model_dir)
    loader = EngineWeightLoader(engine.url)
    prompts = [tokenizer.encode(p, add_special_tokens=False) for p in ("3+4=", "9+9=", "0+7=")]
    for version, seed in ((1, 11), (2, 12)):
        model = _perturbed(model_dir, seed)
        result = loader.load(version, _parts(model, version, tmp_path))
        worker = result["workers"][0]
        assert worker["tensors"] == len(list(model.parameters()))
        assert loader.weight_version() == str(version)
        for prompt in prompts:
            choice = _generate(engine.url, prompt)
            # The engine itself says which version sampled every token.
            assert choice["weight_versions"] == [{"version": str(version), "start": 0, "end": len(choice["token_ids"])}]
            engine_lp = [c["logprob"] for c in choice["logprobs"]["content"]]
            assert engine_lp == pytest.approx(_reference_logprobs(model, prompt, choice["token_ids"]), abs=1e-4)


def test_the_sampler_reads_ids_and_logprobs_from_completions(engine, model_dir: Path) -> None:
    tokenizer = load_tokenizer(model_dir)
    prompt = tokenizer.encode("2+2=", add_special_tokens=False)
    sampler = EngineSampler(engine.url)
    first = sampler.complete(prompt, max_tokens=4, temperature=1.0, seed=5)
    again = sampler.complete(prompt, max_tokens=4, temperature=1.0, seed=5)
    assert first.prompt_ids == prompt and len(first.logprobs) == len(first.token_ids) > 0
    assert (first.token_ids, first.logprobs) == (again.token_ids, again.logprobs)  # seeded: reproducible
    assert MODEL_NAME == "grpo"


def test_a_failed_load_names_the_call_and_leaves_the_engine_serving(engine, model_dir: Path, tmp_path: Path) -> None:
    loader = EngineWeightLoader(engine.url)
    before = loader.weight_version()
    bad = [{"path": str(tmp_path / "missing"), "tensors": [{"name": "model.norm.weight", "dtype": "float32", "shape": [128], "bucket": 0, "offset": 0}], "bucketStarts": [0]}]
    with pytest.raises(EngineLoadError, match="/collective_rpc failed \\(HTTP 500\\)"):
        loader.load(99, bad)
    # Not stamped with the version that failed, and generating again (resumed).
    assert loader.weight_version() == before
    tokenizer = load_tokenizer(model_dir)
    assert _generate(engine.url, tokenizer.encode("1+1=", add_special_tokens=False))["token_ids"]


def test_a_version_missing_a_shard_is_refused_before_the_engine_is_touched(engine, model_dir: Path, tmp_path: Path) -> None:
    loader = EngineWeightLoader(engine.url)
    before = loader.weight_version()
    parts = _parts(_perturbed(model_dir, 13), 98, tmp_path)
    with pytest.raises(EngineLoadError, match="lacks .* tensors .*was a shard left out"):
        loader.load(98, parts[:1])
    assert loader.weight_version() == before
    tokenizer = load_tokenizer(model_dir)
    assert _generate(engine.url, tokenizer.encode("5+5=", add_special_tokens=False))["token_ids"]
