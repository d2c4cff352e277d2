"""Named, sharded weight versions in host memory: how a trainer rank lays its tensors into buckets, and
how an engine reads them back from the region the agent filled.

A version is a set of named tensors. Each publisher (a trainer rank, or the owner of a shard of the
model) lays *its* tensors into buckets of at most ``bucket_bytes``, writes the buckets back to back into
one file under ``/dev/shm`` and hands the agent the file's name, the bucket sizes and the manifest: one
entry per tensor with its ``name``, ``dtype``, ``shape``, the ``bucket`` it lies in and its ``offset``
inside that bucket. Nothing is copied to get there: the agent maps the same memory, and a puller's agent
writes the buckets into a region of its own where the engine reads them as tensors (views over the
mapped file, no copy) — ``read_tensors``.

The layout is a pure function of the tensors' names, shapes and dtypes (``plan``), so every rank can
compute every shard's layout without talking, and an engine can check what it was given. Tensors start
on ``ALIGNMENT``-byte boundaries (as a GPU copy engine and every dtype want) in their bucket and in the
region (bucket sizes are multiples of it), never straddle buckets, and a tensor larger than
``bucket_bytes`` gets a bucket of its own.

PyTorch is needed only by ``write_region`` and ``read_tensors``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from robustrl_agent import TENSOR_DTYPE_BYTES

__all__ = [
    "ALIGNMENT",
    "DTYPE_BYTES",
    "TensorEntry",
    "Layout",
    "plan",
    "shard_assignment",
    "dtype_name",
    "write_region",
    "read_tensors",
    "strip_wrapper_prefixes",
]

ALIGNMENT = 256

# Element sizes of the dtypes a manifest may name (torch's names without the "torch." prefix): one
# table for the package, kept by the agent client, which validates manifests before sending them.
DTYPE_BYTES: Dict[str, int] = TENSOR_DTYPE_BYTES


def _align(value: int) -> int:
    return (value + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


@dataclass(frozen=True)
class TensorEntry:
    """Where one named tensor lies: in bucket ``bucket`` (of its publisher's buckets), ``offset`` bytes in."""

    name: str
    dtype: str
    shape: Tuple[int, ...]
    bucket: int
    offset: int

    @property
    def nbytes(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count * DTYPE_BYTES[self.dtype]

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "bucket": self.bucket, "offset": self.offset}

    @staticmethod
    def from_json(value: Mapping[str, Any]) -> "TensorEntry":
        dtype = str(value["dtype"])
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"tensor {value.get('name')!r}: unknown dtype {dtype!r} (known: {', '.join(sorted(DTYPE_BYTES))})")
        shape = tuple(int(d) for d in value["shape"])
        if any(d < 0 for d in shape):
            raise ValueError(f"tensor {value.get('name')!r}: negative dimension in shape {list(shape)}")
        return TensorEntry(str(value["name"]), dtype, shape, int(value["bucket"]), int(value["offset"]))


@dataclass(frozen=True)
class Layout:
    """One publisher's buckets and the tensors in them."""

    tensors: Tuple[TensorEntry, ...]
    bucket_sizes: Tuple[int, ...]

    @property
    def total_bytes(self) -> int:
        return sum(self.bucket_sizes)

    @property
    def bucket_starts(self) -> List[int]:
        """Where each bucket starts in the region (buckets back to back)."""
        starts, at = [], 0
        for size in self.bucket_sizes:
            starts.append(at)
            at += size
        return starts

    def check(self) -> None:
        """Every tensor inside its bucket, no two overlapping: what a reader verifies before trusting offsets."""
        spans: Dict[int, List[Tuple[int, int, str]]] = {}
        for entry in self.tensors:
            if not 0 <= entry.bucket < len(self.bucket_sizes):
                raise ValueError(f"tensor {entry.name!r}: bucket {entry.bucket} does not exist ({len(self.bucket_sizes)} buckets)")
            if entry.offset < 0 or entry.offset + entry.nbytes > self.bucket_sizes[entry.bucket]:
                raise ValueError(
                    f"tensor {entry.name!r}: bytes {entry.offset}..{entry.offset + entry.nbytes} outside bucket {entry.bucket} "
                    f"of {self.bucket_sizes[entry.bucket]} bytes"
                )
            spans.setdefault(entry.bucket, []).append((entry.offset, entry.offset + entry.nbytes, entry.name))
        for bucket, items in spans.items():
            items.sort()
            for (_, end, name), (start, _, other) in zip(items, items[1:]):
                if start < end:
                    raise ValueError(f"tensors {name!r} and {other!r} overlap in bucket {bucket}")
        names = [e.name for e in self.tensors]
        if len(set(names)) != len(names):
            raise ValueError("a tensor name appears twice in one layout")


def plan(tensors: Iterable[Tuple[str, str, Sequence[int]]], bucket_bytes: int) -> Layout:
    """Lays tensors (name, dtype, shape), in the order given, into buckets of at most ``bucket_bytes``."""
    if bucket_bytes < ALIGNMENT:
        raise ValueError(f"bucket_bytes must be at least {ALIGNMENT}, got {bucket_bytes}")
    entries: List[TensorEntry] = []
    sizes: List[int] = []
    used = 0
    for name, dtype, shape in tensors:
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"tensor {name!r}: unsupported dtype {dtype!r}")
        entry = TensorEntry(name, dtype, tuple(int(d) for d in shape), 0, 0)
        start = _align(used)
        if not sizes or (start + entry.nbytes > bucket_bytes and used > 0):
            sizes.append(0)
            start = 0
        entry = TensorEntry(name, dtype, entry.shape, len(sizes) - 1, start)
        entries.append(entry)
        used = start + entry.nbytes
        # Sizes are whole multiples of ALIGNMENT, so buckets laid back to back keep every tensor aligned
        # in the region too.
        sizes[-1] = _align(used)
    return Layout(tuple(entries), tuple(sizes))


def shard_assignment(sizes: Mapping[str, int], shards: int) -> Dict[str, int]:
    """Which shard publishes each tensor: biggest first to the lightest shard (ties: lowest shard, then
    name order), so shards carry about equal bytes and every rank computes the same answer."""
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    load = [0] * shards
    owner: Dict[str, int] = {}
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        shard = min(range(shards), key=lambda s: (load[s], s))
        owner[name] = shard
        load[shard] += sizes[name]
    return owner


def _torch_dtype(torch: Any, name: str) -> Any:
    dtype = getattr(torch, name, None)
    if dtype is None:
        raise ValueError(f"this PyTorch has no dtype {name!r}")
    return dtype


def dtype_name(tensor: Any) -> str:
    return str(tensor.dtype).replace("torch.", "")


def write_region(path: str, layout: Layout, tensors: Mapping[str, Any]) -> None:
    """Writes the tensors into ``path`` (buckets back to back), creating or resizing the file."""
    import torch

    layout.check()
    starts = layout.bucket_starts
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.ftruncate(fd, layout.total_bytes)
    finally:
        os.close(fd)
    if layout.total_bytes == 0:
        return
    # A shared mapping of the file: the copies below land in the region itself (no staging buffer).
    region = torch.from_file(path, shared=True, size=layout.total_bytes, dtype=torch.uint8)
    for entry in layout.tensors:
        tensor = tensors[entry.name]
        if dtype_name(tensor) != entry.dtype or tuple(tensor.shape) != entry.shape:
            raise ValueError(f"tensor {entry.name!r} is {dtype_name(tensor)}{list(tensor.shape)}, the layout says {entry.dtype}{list(entry.shape)}")
        at = starts[entry.bucket] + entry.offset
        flat = tensor.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
        region[at : at + entry.nbytes].copy_(flat)


def read_tensors(
    path: str,
    tensors: Sequence[TensorEntry],
    bucket_starts: Sequence[int],
    rename: Optional[Callable[[str], Optional[str]]] = None,
) -> Iterator[Tuple[str, Any]]:
    """Named tensors read from a region: views over the mapped file (no copy), valid while iterating.

    ``bucket_starts[i]`` is where bucket ``i`` (of the version's buckets as the region holds them) begins.
    ``rename`` maps a trainer's tensor name to the engine's (None: the engine does not take it)."""
    import torch

    size = os.path.getsize(path)
    # A private mapping owned by the tensor's storage: no copy is made unless someone writes to it, and
    # the mapping lives exactly as long as the last view an engine still holds.
    region = torch.from_file(path, shared=False, size=size, dtype=torch.uint8) if size else torch.empty(0, dtype=torch.uint8)
    for entry in tensors:
        if not 0 <= entry.bucket < len(bucket_starts):
            raise ValueError(f"tensor {entry.name!r}: bucket {entry.bucket} is not in the region ({len(bucket_starts)} buckets)")
        at = bucket_starts[entry.bucket] + entry.offset
        if at + entry.nbytes > size:
            raise ValueError(f"tensor {entry.name!r}: bytes {at}..{at + entry.nbytes} lie beyond the region's {size}")
        name = rename(entry.name) if rename else entry.name
        if name is None:
            continue
        yield name, region[at : at + entry.nbytes].view(_torch_dtype(torch, entry.dtype)).view(entry.shape)


_WRAPPER_PREFIXES = ("module.", "_orig_mod.", "_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")


def strip_wrapper_prefixes(name: str) -> Optional[str]:
    """The default name map: a trainer's wrappers (DDP's ``module.``, torch.compile's ``_orig_mod.``,
    FSDP's and activation checkpointing's) removed, so names are the model's own, as its checkpoint has them."""
    changed = True
    while changed:
        changed = False
        for prefix in _WRAPPER_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                changed = True
        name = name.replace("._fsdp_wrapped_module.", ".").replace("._checkpoint_wrapped_module.", ".")
    return name
