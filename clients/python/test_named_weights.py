"""Tests of robustrl.named_weights: the layout is pure (runs anywhere); the region round trip needs
PyTorch and is skipped without it, unless ROBUSTRL_REQUIRE_TORCH=1 (the integration tier sets it and
runs this file in the engine's environment), where a missing torch fails instead."""

import os
import tempfile
import unittest

from robustrl.named_weights import ALIGNMENT, Layout, TensorEntry, plan, read_tensors, shard_assignment, strip_wrapper_prefixes

try:
    import torch
except ImportError:  # pragma: no cover - depends on the interpreter
    torch = None
    if os.environ.get("ROBUSTRL_REQUIRE_TORCH") == "1":
        raise

needs_torch = unittest.skipIf(torch is None, "PyTorch is not installed in this interpreter")


class PlanTest(unittest.TestCase):
    def test_tensors_start_aligned_and_never_straddle_a_bucket(self) -> None:
        layout = plan([("a", "float32", (3,)), ("b", "bfloat16", (5, 7)), ("c", "int64", (100,)), ("d", "float32", (10,))], 1024)
        layout.check()
        for entry in layout.tensors:
            self.assertEqual(entry.offset % ALIGNMENT, 0, entry)
            self.assertLessEqual(entry.offset + entry.nbytes, layout.bucket_sizes[entry.bucket])
            self.assertLessEqual(layout.bucket_sizes[entry.bucket], 1024)
        # c (800 bytes) does not fit after b (bytes 256..326) below 1024; d does not fit after c.
        self.assertEqual([e.bucket for e in layout.tensors], [0, 0, 1, 2])
        self.assertEqual(layout.bucket_starts, [0, 512, 1536])
        self.assertTrue(all(size % ALIGNMENT == 0 for size in layout.bucket_sizes))

    def test_a_tensor_larger_than_a_bucket_gets_a_bucket_of_its_own(self) -> None:
        layout = plan([("small", "float32", (4,)), ("big", "float32", (1000,)), ("after", "float32", (4,))], 1024)
        self.assertEqual([e.bucket for e in layout.tensors], [0, 1, 2])
        self.assertEqual(layout.bucket_sizes[1], 4096)

    def test_the_layout_is_a_pure_function_of_names_shapes_and_dtypes(self) -> None:
        spec = [(f"w{i}", "float32", (i + 1, 3)) for i in range(20)]
        self.assertEqual(plan(spec, 512), plan(list(spec), 512))

    def test_unknown_dtypes_and_tiny_buckets_are_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "unsupported dtype 'complex64'"):
            plan([("x", "complex64", (2,))], 1024)
        with self.assertRaisesRegex(ValueError, "bucket_bytes must be at least"):
            plan([("x", "float32", (2,))], 16)

    def test_check_finds_overlaps_and_tensors_outside_their_bucket(self) -> None:
        overlapping = Layout((TensorEntry("a", "float32", (8,), 0, 0), TensorEntry("b", "float32", (8,), 0, 16)), (64,))
        with self.assertRaisesRegex(ValueError, "overlap"):
            overlapping.check()
        outside = Layout((TensorEntry("a", "float32", (8,), 0, 48),), (64,))
        with self.assertRaisesRegex(ValueError, "outside bucket 0"):
            outside.check()
        missing = Layout((TensorEntry("a", "float32", (8,), 3, 0),), (64,))
        with self.assertRaisesRegex(ValueError, "bucket 3 does not exist"):
            missing.check()

    def test_manifest_entries_round_trip_and_bad_ones_name_the_tensor(self) -> None:
        entry = TensorEntry("model.norm.weight", "bfloat16", (128,), 2, 512)
        self.assertEqual(TensorEntry.from_json(entry.to_json()), entry)
        with self.assertRaisesRegex(ValueError, "'x': unknown dtype 'float128'"):
            TensorEntry.from_json({"name": "x", "dtype": "float128", "shape": [1], "bucket": 0, "offset": 0})
        with self.assertRaisesRegex(ValueError, "'x': negative dimension"):
            TensorEntry.from_json({"name": "x", "dtype": "float32", "shape": [-1], "bucket": 0, "offset": 0})


class ShardTest(unittest.TestCase):
    def test_every_tensor_has_one_owner_and_shards_carry_about_equal_bytes(self) -> None:
        sizes = {f"layer{i}.weight": (i % 7 + 1) * 1000 for i in range(40)}
        owner = shard_assignment(sizes, 3)
        self.assertEqual(set(owner), set(sizes))
        loads = [sum(s for n, s in sizes.items() if owner[n] == shard) for shard in range(3)]
        self.assertLessEqual(max(loads) - min(loads), max(sizes.values()))

    def test_every_rank_computes_the_same_assignment_whatever_the_order(self) -> None:
        sizes = {f"t{i}": 100 * (i % 5) for i in range(30)}
        reordered = dict(reversed(list(sizes.items())))
        self.assertEqual(shard_assignment(sizes, 4), shard_assignment(reordered, 4))

    def test_one_shard_owns_everything(self) -> None:
        self.assertEqual(set(shard_assignment({"a": 1, "b": 2}, 1).values()), {0})
        with self.assertRaisesRegex(ValueError, "shards must be >= 1"):
            shard_assignment({"a": 1}, 0)


class NameMapTest(unittest.TestCase):
    def test_training_wrappers_are_stripped(self) -> None:
        self.assertEqual(strip_wrapper_prefixes("module.model.layers.0.mlp.up_proj.weight"), "model.layers.0.mlp.up_proj.weight")
        self.assertEqual(strip_wrapper_prefixes("_orig_mod.module.lm_head.weight"), "lm_head.weight")
        self.assertEqual(
            strip_wrapper_prefixes("_fsdp_wrapped_module.model.layers.0._fsdp_wrapped_module.self_attn.q_proj.weight"),
            "model.layers.0.self_attn.q_proj.weight",
        )
        self.assertEqual(strip_wrapper_prefixes("model.embed_tokens.weight"), "model.embed_tokens.weight")


@needs_torch
class RegionTest(unittest.TestCase):
    def setUp(self) -> None:
        from robustrl.named_weights import write_region  # noqa: F401  (imports torch lazily)

        handle, self.path = tempfile.mkstemp(prefix="robustrl-named-weights-")
        os.close(handle)

    def tearDown(self) -> None:
        os.unlink(self.path)

    def test_tensors_written_are_read_back_bit_for_bit(self) -> None:
        from robustrl.named_weights import dtype_name, write_region

        generator = torch.Generator().manual_seed(7)
        tensors = {
            "embed": torch.randn(11, 13, generator=generator),
            "half": torch.randn(5, 3, generator=generator).to(torch.bfloat16),
            "ids": torch.arange(17, dtype=torch.int64),
            "flag": torch.tensor([True, False, True]),
        }
        layout = plan([(n, dtype_name(t), tuple(t.shape)) for n, t in tensors.items()], 512)
        write_region(self.path, layout, tensors)
        self.assertEqual(os.path.getsize(self.path), layout.total_bytes)
        read = dict(read_tensors(self.path, list(layout.tensors), layout.bucket_starts))
        self.assertEqual(set(read), set(tensors))
        for name, tensor in tensors.items():
            self.assertEqual(read[name].dtype, tensor.dtype, name)
            self.assertTrue(torch.equal(read[name], tensor), name)

    def test_rename_maps_and_skips_names(self) -> None:
        from robustrl.named_weights import write_region

        tensors = {"module.a": torch.ones(4), "module.skip": torch.zeros(2)}
        layout = plan([(n, "float32", tuple(t.shape)) for n, t in tensors.items()], 1024)
        write_region(self.path, layout, tensors)
        read = dict(read_tensors(self.path, list(layout.tensors), layout.bucket_starts, lambda n: None if n.endswith("skip") else n[len("module.") :]))
        self.assertEqual(list(read), ["a"])

    def test_a_manifest_that_points_beyond_the_region_is_refused(self) -> None:
        from robustrl.named_weights import write_region

        layout = plan([("a", "float32", (4,))], 1024)
        write_region(self.path, layout, {"a": torch.ones(4)})
        beyond = [TensorEntry("a", "float32", (400,), 0, 0)]
        with self.assertRaisesRegex(ValueError, "lie beyond the region"):
            list(read_tensors(self.path, beyond, [0]))
        with self.assertRaisesRegex(ValueError, "bucket 1 is not in the region"):
            list(read_tensors(self.path, [TensorEntry("a", "float32", (1,), 1, 0)], [0]))

    def test_a_tensor_that_does_not_match_its_layout_is_refused(self) -> None:
        from robustrl.named_weights import write_region

        layout = plan([("a", "float32", (4,))], 1024)
        with self.assertRaisesRegex(ValueError, "'a' is float64\\[4\\], the layout says float32\\[4\\]"):
            write_region(self.path, layout, {"a": torch.ones(4, dtype=torch.float64)})


if __name__ == "__main__":
    unittest.main()
