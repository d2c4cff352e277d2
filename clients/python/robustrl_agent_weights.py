"""The agent client's weight calls (``robustrl_agent``, paper §5.2.1): a trainer publishes versions, a
rollout registers where they land and reads the newest one whole. The manifest's named tensors are
checked here, against the buckets they lie in.
"""

from typing import Any, Dict, List, Optional, Sequence

from robustrl_agent_checks import _count, _is_integer, _step
from robustrl_agent_transport import AgentTransport

# Element sizes of the dtypes a manifest may name (as robustrl.named_weights and the agent know them).
TENSOR_DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}

# The agent refuses longer tensor names (its event schema caps them).
MAX_TENSOR_NAME_CHARS = 500


class WeightCalls(AgentTransport):
    """``AgentClient``'s calls about weight versions (docs/integrators/integrate-your-job.md)."""

    def publish_weights(
        self,
        version: int,
        step: int,
        shm_name: str,
        bucket_sizes: List[int],
        tensors: Optional[Sequence[Any]] = None,
        shard: Optional[int] = None,
        shards: Optional[int] = None,
    ) -> Optional[Dict[str, Any]]:
        """Trainer: version ``version`` (this rank's shard of it, with ``shard``/``shards``) lies in
        ``/dev/shm/<shm_name>``, buckets (layer groups) back to back with these sizes. The agent maps
        it, checksums each bucket and publishes the manifest. Returns ``{eventId, totalBytes, checksums}``.
        Keep the file until the version is retired.

        ``tensors``: the named tensors in those buckets — dicts ``{name, dtype, shape, bucket, offset}``
        (``bucket`` counts in ``bucket_sizes``, ``offset`` in bytes into it) or entries with ``to_json()``
        (``robustrl.named_weights.plan(...).tensors``); a rollout's engine reads them by name from the
        parts of ``latest_weights()``. ``shard``/``shards``: which of the version's publishers this is
        (one per trainer rank; the version is whole once every shard is); give both or neither."""
        if not isinstance(shm_name, str) or not shm_name or "/" in shm_name:
            raise ValueError("shm_name must be a file name in /dev/shm, got {!r}".format(shm_name))
        if not isinstance(bucket_sizes, (list, tuple)) or not bucket_sizes:
            raise ValueError("bucket_sizes must be a non-empty list of byte counts")
        sizes = [_count("bucket size", size) for size in bucket_sizes]
        body: Dict[str, Any] = {"version": _count("version", version), "step": _step(step), "shmName": shm_name, "bucketSizes": sizes}
        if tensors is not None:
            body["tensors"] = _tensors(tensors, sizes)
        if shard is not None or shards is not None:
            body["shard"] = _shard(shard, shards)
        return self._post("/v1/weights/versions", body)

    def publish_device_weights(self, version: int, step: int, buckets: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
        """Trainer: version ``version`` lies in GPU memory, one CUDA IPC handle per bucket — the dicts
        ``robustrl_weights.export_buckets`` makes (``sizeBytes``, ``handle``, ``offset``, ``device``).
        The agent copies them device to device into its own memory (pullers GET that copy over
        cuda_ipc / RDMA; UCX cannot serve memory the agent imported), serves the copy and publishes the
        manifest with sampled checksums. Keep the tensors unchanged until this returns; after that they
        are yours again. Returns ``{eventId, totalBytes, checksums}``."""
        return self._post("/v1/weights/versions", {"version": _count("version", version), "step": _step(step), "buckets": _ipc_buckets(buckets)})

    def register_weight_target(self, name: str, buckets: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
        """Rollout: GPU buffers (one per bucket, ``robustrl_weights.export_buckets``) the agent pulls
        versions into, device to device. Register two for double buffering; a version lands in a free
        one whose bucket sizes match (``latest_weights()['target']`` names it), else in /dev/shm as
        before. Registering a name again replaces it."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError("name must be a plain name, got {!r}".format(name))
        return self._request("PUT", "/v1/weights/targets/" + name, {"buckets": _ipc_buckets(buckets)})

    def set_engines(self, engines: Dict[str, str]) -> Optional[Dict[str, Any]]:
        """Rollout: the inference engines the framework started on this machine, ``{name: base_url}``
        (several TP=1 or TP=4 engines on one node). The machine registers again with them: the router
        routes to each as ``<machine>/<name>``, and an agent that loads versions loads each. Calling
        again replaces the list. Returns ``{engines: [{engineId, url}]}``."""
        if not isinstance(engines, dict) or not engines:
            raise ValueError("engines must be a non-empty {{name: url}} dict, got {!r}".format(engines))
        return self._request("PUT", "/v1/engines", {"engines": [{"name": str(n), "url": str(u)} for n, u in engines.items()]})

    def remove_weight_target(self, name: str) -> Optional[Dict[str, Any]]:
        """Rollout: take a target's buffers back (a version held there is no longer served)."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError("name must be a plain name, got {!r}".format(name))
        return self._request("DELETE", "/v1/weights/targets/" + name, None)

    def latest_weights(self) -> Optional[Dict[str, Any]]:
        """Rollout: the newest version this machine holds whole, every shard — ``{version, step, path,
        target, memoryType, totalBytes, buckets, shards, parts}``. ``parts``, one per shard in shard
        order, is what an engine loads named tensors from: ``{shard, path, shmName, target, bucketSizes,
        bucketStarts, tensors}`` (``tensors`` None for opaque bytes). A version of one shard also has
        its ``path`` (/dev/shm) or pull ``target`` at the top. None while no version is whole (HTTP 404)."""
        return self._get_or_none("/v1/weights/latest")

    def weight_version(self, version: int) -> Optional[Dict[str, Any]]:
        """Either role: this machine's view of one version — held buckets and, for the trainer,
        ``trainerReleased`` (async mode: resume training once the first relay holds it)."""
        return self._request("GET", "/v1/weights/versions/{}".format(_count("version", version)), None)


def _ipc_buckets(buckets: Any) -> List[Dict[str, Any]]:
    """The buckets as the agent takes them, checked here so a mistake is a ValueError on the first call."""
    if not isinstance(buckets, (list, tuple)) or not buckets:
        raise ValueError("buckets must be a non-empty list (robustrl_weights.export_buckets)")
    out = []
    for i, b in enumerate(buckets):
        if not isinstance(b, dict) or not isinstance(b.get("handle"), str):
            raise ValueError("bucket {}: expected a dict with a base64 'handle' (robustrl_weights.export_buckets)".format(i))
        out.append({
            "sizeBytes": _count("bucket {} sizeBytes".format(i), b.get("sizeBytes")),
            "handle": b["handle"],
            "offset": _count("bucket {} offset".format(i), b.get("offset", 0)),
            "device": _count("bucket {} device".format(i), b.get("device", 0)),
        })
    return out


def _tensors(tensors: Any, bucket_sizes: List[int]) -> List[Dict[str, Any]]:
    """The manifest's tensors as the agent takes them: each inside a bucket that exists, names unique."""
    if isinstance(tensors, (str, bytes, dict)) or not isinstance(tensors, (list, tuple)):
        raise ValueError("tensors must be a list of {{name, dtype, shape, bucket, offset}} entries, got {!r}".format(type(tensors).__name__))
    out: List[Dict[str, Any]] = []
    names = set()
    for i, entry in enumerate(tensors):
        t = entry.to_json() if hasattr(entry, "to_json") else entry
        if not isinstance(t, dict):
            raise ValueError("tensor {}: expected a dict with name, dtype, shape, bucket and offset".format(i))
        name = t.get("name")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_TENSOR_NAME_CHARS:
            raise ValueError("tensor {}: name must be a string of 1 to {} characters, got {!r}".format(i, MAX_TENSOR_NAME_CHARS, name))
        if name in names:
            raise ValueError("tensor {!r} appears twice".format(name))
        names.add(name)
        dtype = t.get("dtype")
        if dtype not in TENSOR_DTYPE_BYTES:
            raise ValueError("tensor {!r}: unknown dtype {!r} (known: {})".format(name, dtype, ", ".join(sorted(TENSOR_DTYPE_BYTES))))
        shape = t.get("shape")
        if isinstance(shape, (str, bytes)) or not isinstance(shape, (list, tuple)):
            raise ValueError("tensor {!r}: shape must be a list of sizes, got {!r}".format(name, shape))
        dims = [_count("tensor {!r} dimension".format(name), d) for d in shape]
        bucket = _count("tensor {!r} bucket".format(name), t.get("bucket"))
        offset = _count("tensor {!r} offset".format(name), t.get("offset"))
        if bucket >= len(bucket_sizes):
            raise ValueError("tensor {!r}: bucket {} does not exist ({} buckets)".format(name, bucket, len(bucket_sizes)))
        nbytes = TENSOR_DTYPE_BYTES[dtype]
        for d in dims:
            nbytes *= d
        if offset + nbytes > bucket_sizes[bucket]:
            raise ValueError("tensor {!r}: bytes {}..{} lie outside bucket {} of {} bytes".format(name, offset, offset + nbytes, bucket, bucket_sizes[bucket]))
        out.append({"name": name, "dtype": dtype, "shape": dims, "bucket": bucket, "offset": offset})
    return out


def _shard(shard: Any, shards: Any) -> Dict[str, int]:
    if shard is None or shards is None:
        raise ValueError("give both shard (this publisher's index) and shards (how many), got shard={!r}, shards={!r}".format(shard, shards))
    if not _is_integer(shards) or shards < 1:
        raise ValueError("shards must be an integer >= 1, got {!r}".format(shards))
    if not _is_integer(shard) or not 0 <= shard < shards:
        raise ValueError("shard must be an integer in 0..{}, got {!r}".format(shards - 1, shard))
    return {"index": shard, "count": shards}
