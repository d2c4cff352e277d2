"""A vLLM worker extension that loads a weight version from where the robustrl agent put it.

Deploy it with the engine: ``--worker-extension-cls robustrl.vllm_extension.WorkerExtension`` (the
``robustrl`` package importable in the engine's environment) and ``VLLM_SERVER_DEV_MODE=1`` for the
routes below. A load is then, over the engine's own HTTP API (``EngineWeightLoader`` in
``robustrl.vllm_loader`` makes these calls):

1. ``POST /pause?mode=keep`` — requests stay queued, nothing is generated while weights change;
2. ``POST /collective_rpc`` ``{"method": "robustrl_load_weights", "kwargs": {"parts": [...]}}`` — every
   worker reads the named tensors straight from the host-memory regions (a ``/dev/shm`` file the agent filled;
   views over the mapped file, no copy through HTTP) and hands them to ``reload_weights``, vLLM's
   in-place reload, which takes checkpoint names and does the engine's own re-packing (fused QKV, gate/up);
3. ``POST /update_weight_version`` ``{"new_version": "<v>"}`` — the engine itself now stamps every token
   it generates with ``v`` (vLLM reports those spans as ``weight_versions``), which is what the router
   tags each turn with;
4. ``POST /reset_prefix_cache?reset_running_requests=true`` — cached KV blocks were computed by the old
   weights: the cache is dropped and the paused requests are preempted, so when they resume their
   prompt and the tokens they had are prefilled again under the new version and every token sampled from
   here on is the new version's alone;
5. ``POST /resume``.

On a GPU the same extension reads the version from device buffers instead of a file: the rollout
registers receive buffers with its agent (``robustrl_weights.export_buckets`` → CUDA IPC handles), the
agent pulls into them device to device, and each part names the target instead of a ``path``; the tensors
are views of those buffers. Only the source of the views changes; the manifest, the name map and the
reload are the same.

The name map is a hook: ``ROBUSTRL_WEIGHT_NAME_MAP=package.module:function`` in the engine's
environment names a function from a trainer's tensor name to the engine's (None: skip the tensor); the
default strips training wrappers' prefixes (``robustrl.named_weights.strip_wrapper_prefixes``).
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .named_weights import TensorEntry, read_tensors, strip_wrapper_prefixes

__all__ = ["WorkerExtension", "name_map_from_env"]

logger = logging.getLogger("robustrl.vllm_extension")


def name_map_from_env(env: Optional[Dict[str, str]] = None) -> Callable[[str], Optional[str]]:
    spec = (env if env is not None else os.environ).get("ROBUSTRL_WEIGHT_NAME_MAP", "").strip()
    if not spec:
        return strip_wrapper_prefixes
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"ROBUSTRL_WEIGHT_NAME_MAP must be 'package.module:function', got {spec!r}")
    function = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(function):
        raise ValueError(f"ROBUSTRL_WEIGHT_NAME_MAP: {spec!r} is not a function")
    return function


def _repack_cpu_gemms(model: Any) -> List[str]:
    """On vLLM's CPU platform a layer that keeps its weight (the embedding, and a tied ``lm_head`` that
    shares it) also keeps a prepacked copy for its GEMM (``cpu_linear``). The in-place reload re-packs a
    layer only when it loaded that layer's tensors, so a tied ``lm_head`` — which the checkpoint does not
    name — kept computing logits with the old weights (measured: outputs matched neither version). Every
    such layer is packed again from the weight it now holds. GPUs have no ``cpu_linear``: nothing to do."""
    modules = [(name, m) for name, m in model.named_modules() if hasattr(m, "cpu_linear")]
    kept = [(name, m) for name, m in modules if getattr(getattr(m, "weight", None), "numel", lambda: 0)() > 0]
    if not kept:
        return []
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    for _, module in kept:
        dispatch_cpu_unquantized_gemm(module, remove_weight=False)
    return [name for name, _ in kept]


def _checkpoint_tensors(model_path: str) -> Optional[Dict[str, Tuple[int, ...]]]:
    """Names and shapes of the tensors in the checkpoint the engine started from (safetensors headers
    only; nothing is read). None where the model is not a local folder of safetensors files."""
    import glob

    files = sorted(glob.glob(os.path.join(model_path, "*.safetensors")))
    if not files:
        return None
    from safetensors import safe_open

    shapes: Dict[str, Tuple[int, ...]] = {}
    for file in files:
        with safe_open(file, framework="pt") as handle:
            for key in handle.keys():
                shapes[key] = tuple(handle.get_slice(key).get_shape())
    return shapes


def _check_whole(given: Dict[str, Tuple[int, ...]], expected: Optional[Dict[str, Tuple[int, ...]]]) -> None:
    """A version must hold every tensor of the engine's checkpoint, each with its shape. vLLM's reload
    puts a layer it received nothing for back on its old weights, and processes a layer it received a
    part of as if the rest were there: a version missing a shard would be served as a silent mix."""
    if expected is None:
        return
    missing = sorted(set(expected) - set(given))
    if missing:
        raise ValueError(f"the version lacks {len(missing)} of the checkpoint's {len(expected)} tensors (e.g. {missing[:3]}); was a shard left out?")
    wrong = sorted(n for n in expected if tuple(given[n]) != tuple(expected[n]))
    if wrong:
        n = wrong[0]
        raise ValueError(f"{len(wrong)} tensors have another shape than the checkpoint's, e.g. {n!r}: {list(given[n])} vs {list(expected[n])}")


class WorkerExtension:
    """Methods vLLM mixes into each of its workers (``--worker-extension-cls``); called through ``/collective_rpc``."""

    def robustrl_load_weights(self, parts: List[Dict[str, Any]], version: Optional[int] = None) -> Dict[str, Any]:
        """Loads a whole version in one reload: ``parts`` are its regions, one per publisher's shard as the
        agent holds them (``{"path", "tensors": manifest entries, "bucketStarts"}``).

        One reload for the whole version matters: vLLM reloads layer by layer and finishes a layer when
        all of its checkpoint tensors arrived, so a layer whose tensors come in two calls is left
        half-processed."""
        started = time.monotonic()
        rename = name_map_from_env()
        # Every region opened and every tensor checked (bounds, dtype, shape) before the model is touched:
        # vLLM's reload first moves each layer's parameters aside, so a failure inside it leaves layers
        # without weights. What can be refused is refused here, with the engine still serving.
        tensors: List[Tuple[str, Any]] = []
        for part in parts:
            entries = [TensorEntry.from_json(t) for t in part["tensors"]]
            tensors.extend(read_tensors(str(part["path"]), entries, [int(b) for b in part["bucketStarts"]], rename))
        if not hasattr(self, "_robustrl_checkpoint"):
            self._robustrl_checkpoint = _checkpoint_tensors(self.model_config.model)  # type: ignore[attr-defined]
        _check_whole({name: tuple(view.shape) for name, view in tensors}, self._robustrl_checkpoint)
        try:
            # vLLM's in-place reload (a worker method): it copies into the existing parameters, so the
            # engine keeps serving from the same memory.
            self.reload_weights(weights_iterator=iter(tensors))  # type: ignore[attr-defined]
            model = self.model_runner.model  # type: ignore[attr-defined]
            repacked = _repack_cpu_gemms(model)
        except BaseException:
            # Half-reloaded layers cannot serve: the worker ends, the engine with it, and whoever
            # supervises it (the robustrl agent) restarts it from a whole version.
            logger.exception("robustrl: the weight reload failed inside vLLM; ending this worker so the engine is restarted")
            os._exit(70)
        total = sum(view.numel() * view.element_size() for _, view in tensors)
        return {"version": version, "repacked": repacked, "tensors": len(tensors), "bytes": total, "seconds": round(time.monotonic() - started, 4)}
