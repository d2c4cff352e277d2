"""robustrl_weights without a GPU: the export contract checked against stand-ins with PyTorch's API
(what ``_share_cuda_`` returns, offsets of tensors inside a shared allocation), and the bucket layout.
The real thing — torch tensors exported, pulled device to device by two agents, compared byte for
byte — runs on a GPU machine in native/ucx/gpu/check.sh."""

import base64
import unittest

import robustrl_weights as rw

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


class FakeStorage:
    def __init__(self, handle: bytes, storage_offset_bytes: int, device: int = 0) -> None:
        self.handle = handle
        self.storage_offset_bytes = storage_offset_bytes
        self.device = device

    def _share_cuda_(self):  # PyTorch's tuple: device, handle, size, offset, refcounter handle/offset, event handle, sync
        return (self.device, self.handle, 1 << 30, self.storage_offset_bytes, b"ref", 0, b"event", False)


class FakeTensor:
    def __init__(self, numel: int, element_size: int, storage: FakeStorage, storage_offset: int = 0, is_cuda: bool = True, contiguous: bool = True) -> None:
        self._numel = numel
        self._element = element_size
        self._storage = storage
        self._offset = storage_offset
        self.is_cuda = is_cuda
        self._contiguous = contiguous
        self.device = "cuda:0" if is_cuda else "cpu"

    def numel(self) -> int:
        return self._numel

    def element_size(self) -> int:
        return self._element

    def storage_offset(self) -> int:
        return self._offset

    def is_contiguous(self) -> bool:
        return self._contiguous

    def untyped_storage(self) -> FakeStorage:
        return self._storage


class ExportTest(unittest.TestCase):
    def test_a_tensor_is_its_allocation_handle_and_where_it_starts_in_it(self) -> None:
        handle = bytes(range(64))
        # A bf16 tensor 100 elements into a storage that starts 4096 bytes into its allocation.
        t = FakeTensor(numel=1000, element_size=2, storage=FakeStorage(handle, 4096, device=3), storage_offset=100)
        self.assertEqual(rw.export_tensor(t), {"sizeBytes": 2000, "handle": base64.b64encode(handle).decode(), "offset": 4096 + 200, "device": 3})
        self.assertEqual(rw.export_tensor(t, device=0)["device"], 0)

    def test_pytorch_2_handles_lose_the_allocators_prefix(self) -> None:
        # PyTorch 2.x (measured with 2.11 on an H200): version byte 2, 'c' for a cudaMalloc block, then
        # the 64-byte cudaIpcMemHandle_t.
        handle = bytes(range(100, 164))
        t = FakeTensor(numel=8, element_size=4, storage=FakeStorage(bytes([2, ord("c")]) + handle, 0))
        self.assertEqual(rw.export_tensor(t)["handle"], base64.b64encode(handle).decode())
        with self.assertRaisesRegex(ValueError, "66-byte handle.*expandable segments"):
            rw.export_tensor(FakeTensor(8, 4, FakeStorage(bytes([2, ord("e")]) + handle, 0)))

    def test_refuses_what_the_agent_could_not_use(self) -> None:
        storage = FakeStorage(bytes(64), 0)
        with self.assertRaisesRegex(ValueError, "CUDA device"):
            rw.export_tensor(FakeTensor(10, 4, storage, is_cuda=False))
        with self.assertRaisesRegex(ValueError, "contiguous"):
            rw.export_tensor(FakeTensor(10, 4, storage, contiguous=False))
        with self.assertRaisesRegex(ValueError, "expandable segments"):
            rw.export_tensor(FakeTensor(10, 4, FakeStorage(bytes(72), 0)))
        with self.assertRaises(ValueError):
            rw.export_buckets([])


class LayoutTest(unittest.TestCase):
    def test_tensors_fill_buckets_in_order_and_a_large_one_gets_its_own(self) -> None:
        storage = FakeStorage(bytes(64), 0)
        sizes = [100, 200, 50, 1000, 10]
        tensors = [FakeTensor(n, 1, storage) for n in sizes]
        self.assertEqual(rw.layout_of(tensors, bucket_bytes=300), [[(0, 100), (100, 200)], [(0, 50)], [(0, 1000)], [(0, 10)]])
        with self.assertRaises(ValueError):
            rw.layout_of(tensors, bucket_bytes=0)


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed (native/ucx/gpu/check.sh runs this part on a GPU machine)")
class PackTest(unittest.TestCase):
    def test_pack_and_unpack_round_trip(self) -> None:
        import torch

        tensors = [torch.arange(n, dtype=torch.float32) for n in (3, 70, 5)]
        layout = rw.layout_of(tensors, bucket_bytes=64)
        # pack_buckets allocates on the tensors' device: CPU here, which is enough for the byte layout.
        buckets = rw.pack_buckets(tensors, bucket_bytes=64)
        out = [torch.zeros_like(t) for t in tensors]
        rw.unpack_buckets(buckets, layout, into=out)
        for a, b in zip(tensors, out):
            self.assertTrue(torch.equal(a, b))


if __name__ == "__main__":
    unittest.main()
