"""Random ops' programs: jax's threefry hash unrolled on the CPU, integers from one hash, and
the CPU's bounds for random_ in every dtype."""
import jax
import numpy as np
import pytest
import torch

import torch_xla
import torch_xla.debug.metrics as met
from tests.compare import assert_lowered


def _program_text(tensor) -> str:
    return torch_xla._XLAC._get_xla_tensors_hlo([tensor])


def test_threefry_keeps_its_known_answers_unrolled_on_the_cpu():
    """Random123's known answers for threefry2x32 (20 rounds), from a compiled program on the
    CPU; its optimized HLO has no while loop (jax's own CPU lowering is a loop of 5 steps)."""
    from jax.extend.random import threefry_2x32
    from torch_xla._lazy.lowering import random
    assert random.THREEFRY_UNROLLED
    u32 = lambda *v: np.array(v, np.uint32)
    hash_ = jax.jit(threefry_2x32, device=jax.devices("cpu")[0])
    for key, count, expected in [
            (u32(0, 0), u32(0, 0), u32(0x6B200159, 0x99BA4EFE)),
            (u32(0xFFFFFFFF, 0xFFFFFFFF), u32(0xFFFFFFFF, 0xFFFFFFFF), u32(0x1CB996FC, 0xBB002BE7)),
            (u32(0x13198A2E, 0x03707344), u32(0x243F6A88, 0x85A308D3), u32(0xC4923A9C, 0x483DF7A0))]:
        np.testing.assert_array_equal(np.asarray(hash_(key, count)), expected)
    assert " while(" not in hash_.lower(u32(0, 0), u32(0, 0)).compile().as_text()


def test_integers_are_drawn_from_one_hash(dev):
    """randint's program hashes its key once (jax.random.randint splits it and draws twice)."""
    draws = torch.randint(3, 9, (1000,), device=dev)
    hlo = _program_text(draws)
    assert hlo.count(" shift-right-logical(") <= 20 * 2, "more than one threefry hash"
    values = draws.cpu()
    assert values.unique().tolist() == [3, 4, 5, 6, 7, 8]


def test_randperm_is_a_permutation_from_one_hash(dev):
    perm = torch.randperm(50, device=dev)
    assert _program_text(perm).count(" shift-right-logical(") <= 20 * 2, "more than one hash"
    for n, dtype in [(0, torch.int64), (1, torch.int64), (50, torch.int32), (3000, torch.float32)]:
        drawn = torch.randperm(n, device=dev, dtype=dtype)
        assert drawn.dtype == dtype and sorted(drawn.cpu().tolist()) == list(range(n))
    assert not torch.equal(torch.randperm(50, device=dev).cpu(), perm.cpu())


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
                                   torch.int64, torch.float16, torch.bfloat16, torch.float32,
                                   torch.float64])
def test_random_draws_within_the_cpus_bounds(dev, dtype):
    """random_() and random_(from, None) draw in [from, the dtype's top] as on the CPU (the
    top: an integer dtype's maximum, a float dtype's 2**digits); random_(from, to) in
    [from, to)."""
    met.clear_counters()
    top = {torch.bool: 1, torch.float16: 2 ** 11, torch.bfloat16: 2 ** 8, torch.float32: 2 ** 24,
           torch.float64: 2 ** 53}.get(dtype) or torch.iinfo(dtype).max
    for low, draws in [(0, torch.empty(20000, dtype=dtype, device=dev).random_()),
                       (1, torch.empty(20000, dtype=dtype, device=dev).random_(1, None))]:
        values = draws.cpu().double()
        assert draws.dtype == dtype and values.min() >= low and values.max() <= top
        assert values.max() > top * 0.9  # the whole range is reached, no wrap-around
    bounded = torch.empty(2000, dtype=dtype, device=dev).random_(0, 2).cpu()
    assert sorted(bounded.unique().tolist()) == [0, 1]
    assert_lowered()


def test_random_spans_int64s_whole_range(dev):
    draws = torch.empty(4000, dtype=torch.int64, device=dev).random_(-2 ** 63, None).cpu()
    assert 0.4 < (draws < 0).double().mean() < 0.6
    assert draws.min() < -2 ** 62 and draws.max() > 2 ** 62


def test_native_dropout_trains_when_train_is_none(dev):
    """native_dropout's `train` None trains (PyTorch's kernels read it so): p=1 drops all;
    the output is `x * mask * scale`, as theirs."""
    x = torch.tensor([[1.5, -2.0], [0.25, 3.0]])
    for train in (None, True):
        out, mask = torch.ops.aten.native_dropout(x.to(dev), 1.0, train)
        expected_out, expected_mask = torch.ops.aten.native_dropout(x, 1.0, train)
        torch.testing.assert_close(out.cpu(), expected_out)
        assert torch.equal(mask.cpu(), expected_mask)
    out, mask = torch.ops.aten.native_dropout(x.to(dev), 1.0, False)
    assert torch.equal(out.cpu(), x) and bool(mask.cpu().all())
    half = torch.randn(200, 50)
    out, mask = torch.ops.aten.native_dropout(half.to(dev), 0.5, None)
    out, mask = out.cpu(), mask.cpu()
    assert 0.4 < mask.float().mean() < 0.6
    torch.testing.assert_close(out, half * mask * 2.0)
