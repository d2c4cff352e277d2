"""Weight buckets in GPU memory, handed to the robustrl agent as CUDA IPC handles.

The agent moves weights device to device (UCX over cuda_ipc / NVLink / RDMA): a trainer hands it a
version's buckets where they already are, a rollout hands it the buffers to receive versions into, and
no byte goes through host memory. This module turns PyTorch tensors into what the agent takes — one
dict per bucket: ``{"sizeBytes", "handle" (a cudaIpcMemHandle_t, base64), "offset", "device"}`` — and
packs several tensors into one flat bucket and back. The HTTP calls are ``AgentClient``'s
(``robustrl_agent.py``): ``publish_device_weights``, ``register_weight_target``, ``latest_weights``.

Trainer (verl / slime style: after the optimizer step, gather this rank's weights into buckets)::

    import robustrl_weights as rw
    from robustrl_agent import AgentClient

    agent = AgentClient()
    buckets = rw.pack_buckets(model.state_dict().values(), bucket_bytes=512 << 20)  # flat uint8 tensors
    agent.publish_device_weights(version, step, rw.export_buckets(buckets))
    # the agent holds a device copy now: `buckets` may be reused or freed

Rollout (inference engine side: two receive buffers, for double buffering)::

    layout = rw.layout_of(model.state_dict().values(), bucket_bytes=512 << 20)
    slots = {name: rw.empty_buckets(layout, device="cuda") for name in ("a", "b")}
    for name, bufs in slots.items():
        agent.register_weight_target(name, rw.export_buckets(bufs))
    latest = agent.latest_weights()              # {"version": 7, "target": "a", ...}
    if latest and latest.get("target"):
        rw.unpack_buckets(slots[latest["target"]], layout, into=model.state_dict().values())

Rules that matter:

- A trainer's published buckets are copied by the agent (device to device, into its own memory) before
  ``publish_device_weights`` returns: keep them unchanged until then. A rollout's pull targets are
  written in place: keep them alive until ``remove_weight_target``.
- Device numbers are as the *agent* sees them (``CUDA_VISIBLE_DEVICES`` applies to both processes;
  give the agent the same view, or pass ``device=`` explicitly).
- PyTorch's expandable segments (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``) export a
  different kind of handle: allocate the buckets without them (``export_tensor`` says so).

PyTorch is imported only when a function needs it; the module itself has no dependency.
"""

import base64
import math
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["export_tensor", "export_buckets", "layout_of", "pack_buckets", "empty_buckets", "unpack_buckets", "IPC_HANDLE_BYTES"]

# sizeof(cudaIpcMemHandle_t)
IPC_HANDLE_BYTES = 64


# PyTorch's caching allocator (2.x) prefixes the handle with its format's version and the kind of
# allocation: 'c' for a cudaMalloc block (then the 64-byte cudaIpcMemHandle_t), 'e' for an expandable
# segment (a different kind of handle, which cuIpcOpenMemHandle cannot open).
_TORCH_HANDLE_PREFIX = 2
_TORCH_CUDA_MALLOC = ord("c")


def _ipc_handle_of(handle: Any) -> Any:
    """The cudaIpcMemHandle_t in what ``_share_cuda_`` returned: as is (older PyTorch), or without the
    allocator's two-byte prefix for a cudaMalloc block; anything else is returned unchanged (refused)."""
    if isinstance(handle, (bytes, bytearray)) and len(handle) == _TORCH_HANDLE_PREFIX + IPC_HANDLE_BYTES and handle[1] == _TORCH_CUDA_MALLOC:
        return bytes(handle[_TORCH_HANDLE_PREFIX:])
    return handle


def export_tensor(tensor: Any, device: Optional[int] = None) -> Dict[str, Any]:
    """One bucket: a contiguous CUDA tensor as a CUDA IPC handle of the allocation that holds it, and
    where the tensor starts in that allocation (PyTorch's caching allocator packs many tensors into one
    allocation; the handle covers all of it, the agent registers only this tensor's bytes)."""
    if not getattr(tensor, "is_cuda", False):
        raise ValueError("export_tensor: the tensor must be on a CUDA device, got {}".format(getattr(tensor, "device", type(tensor).__name__)))
    if not tensor.is_contiguous():
        raise ValueError("export_tensor: the tensor must be contiguous (a bucket is one range of bytes); call .contiguous() first")
    storage = tensor.untyped_storage()
    shared = storage._share_cuda_()
    storage_device, handle, _storage_bytes, storage_offset_bytes = shared[0], shared[1], shared[2], shared[3]
    handle = _ipc_handle_of(handle)
    if not isinstance(handle, (bytes, bytearray)) or len(handle) != IPC_HANDLE_BYTES:
        raise ValueError(
            "export_tensor: PyTorch exported a {}-byte handle, not a {}-byte cudaIpcMemHandle_t; this happens with "
            "expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): allocate the buckets without "
            "them".format(len(handle) if hasattr(handle, "__len__") else "?", IPC_HANDLE_BYTES)
        )
    element = tensor.element_size()
    return {
        "sizeBytes": tensor.numel() * element,
        "handle": base64.b64encode(bytes(handle)).decode("ascii"),
        "offset": int(storage_offset_bytes) + tensor.storage_offset() * element,
        "device": int(storage_device if device is None else device),
    }


def export_buckets(tensors: Iterable[Any], device: Optional[int] = None) -> List[Dict[str, Any]]:
    """``export_tensor`` of each bucket, in bucket order (the order is the version's layout)."""
    out = [export_tensor(t, device) for t in tensors]
    if not out:
        raise ValueError("export_buckets: no tensors")
    return out


def layout_of(tensors: Iterable[Any], bucket_bytes: int) -> List[List[Tuple[int, int]]]:
    """How tensors are packed into buckets of at most ``bucket_bytes`` (a tensor larger than that gets a
    bucket of its own): per bucket, per tensor, ``(offset, nbytes)``. Trainer and rollout compute the
    same layout from the same model, so a bucket means the same bytes on both sides."""
    if bucket_bytes <= 0:
        raise ValueError("bucket_bytes must be positive")
    layout: List[List[Tuple[int, int]]] = [[]]
    used = 0
    for t in tensors:
        n = t.numel() * t.element_size()
        if used > 0 and used + n > bucket_bytes:
            layout.append([])
            used = 0
        layout[-1].append((used, n))
        used += n
    return [b for b in layout if b]


def _bucket_bytes(bucket: Sequence[Tuple[int, int]]) -> int:
    return max((offset + n for offset, n in bucket), default=0)


def empty_buckets(layout: Sequence[Sequence[Tuple[int, int]]], device: Any = "cuda") -> List[Any]:
    """One flat uint8 CUDA tensor per bucket of ``layout``: receive buffers for a pull target."""
    import torch

    return [torch.empty(_bucket_bytes(b), dtype=torch.uint8, device=device) for b in layout]


def pack_buckets(tensors: Iterable[Any], bucket_bytes: int) -> List[Any]:
    """Copies tensors (on the GPU, device to device) into flat uint8 buckets, in ``layout_of`` order."""
    import torch

    tensors = list(tensors)
    layout = layout_of(tensors, bucket_bytes)
    buckets = []
    i = 0
    for bucket in layout:
        flat = torch.empty(_bucket_bytes(bucket), dtype=torch.uint8, device=tensors[i].device)
        for offset, n in bucket:
            flat[offset : offset + n].copy_(tensors[i].detach().contiguous().reshape(-1).view(torch.uint8))
            i += 1
        buckets.append(flat)
    return buckets


def unpack_buckets(buckets: Sequence[Any], layout: Sequence[Sequence[Tuple[int, int]]], into: Iterable[Any]) -> None:
    """Copies the buckets' bytes back into the model's tensors (device to device), in ``layout_of``
    order: what a rollout does once a version is whole in one of its targets."""
    import torch

    targets = list(into)
    i = 0
    for flat, bucket in zip(buckets, layout):
        for offset, n in bucket:
            t = targets[i]
            if t.numel() * t.element_size() != n:
                raise ValueError("unpack_buckets: tensor {} has {} bytes, the layout says {}".format(i, t.numel() * t.element_size(), n))
            with torch.no_grad():
                t.view(-1).view(torch.uint8).copy_(flat[offset : offset + n])
            i += 1
    if i != len(targets):
        raise ValueError("unpack_buckets: the layout covers {} tensors, {} were given".format(i, len(targets)))
