import re

import pytest
import torch

import torch_xla.debug.metrics as met
from tests.compare import EXACT, assert_same, check_lowered, to_xla, with_grads


def leaf(*shape):
    torch.manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, dtype=torch.float32).requires_grad_()


def L(*values):
    return torch.tensor(values)


# ---- index.Tensor --------------------------------------------------------------------------

@pytest.mark.parametrize("index,shape", [(fn, (3, 4)) for fn in [
    lambda x: x[L(0, 2, -1)],
    lambda x: x[:, L(1, -1)],
    lambda x: x[:, [1, -1]],                        # a Python list becomes a device tensor
    lambda x: x[None, L(0, 1), 1:],
    lambda x: x[L([0], [2]), L(1, 3)],              # index tensors broadcast together
    lambda x: x[L(0, 1), L(2, 0)],
    lambda x: x[..., L(0, 0, 1)],
    lambda x: x[L(1)],                              # 0-d int tensor
    lambda x: x[x > 0],
    lambda x: x[:, x[0] > 0],
]] + [(fn, (3, 4, 2)) for fn in [
    lambda x: x[L(0, 1), :, L(1, 0)],               # separated: broadcast dims go first
    lambda x: x[:, L(0, 3), L(1, 0)],
    lambda x: x[x > 0],
    lambda x: x[x[..., 0] > 0, L(1)],
]], ids=range(14))
def test_index(index, shape):
    check_lowered(index, leaf(*shape), grads=True)


def test_index_with_index_tensor_on_device(dev):
    x = torch.arange(12.).view(3, 4)
    out = x.to(dev)[L(2, 0).to(dev)]
    assert_same(out, x[L(2, 0)], **EXACT)


def test_index_int_dtypes_and_bool_mask_on_cpu():
    check_lowered(lambda x: (x[L(1, 0).int()], x[torch.tensor([True, False, True])]),
                  torch.arange(12).view(3, 4))


def test_bool_mask_index_is_a_dynamic_shape_op():
    met.clear_counters()
    check_lowered(lambda x: x[x > 5], torch.arange(12).view(3, 4))
    assert met.counter_value("DynamicShapeOp") >= 1


# ---- index_put -----------------------------------------------------------------------------

def _put(fn):
    def run(x):
        x = x.clone()
        fn(x)
        return x
    return run


@pytest.mark.parametrize("write", [
    lambda x: x.__setitem__(L(0, 2), 1.5),
    lambda x: x.__setitem__((slice(None), 0), 1),
    lambda x: x.__setitem__(1, torch.arange(4.).to(x.device)),
    lambda x: x.__setitem__(x > 0, 0.0),
    lambda x: x.__setitem__(x > 0, x[x > 0] * 10),   # as many values as True entries
    lambda x: x.__setitem__((slice(None), L(True, False, True, False)),
                            torch.tensor([[1.0, 2.0]]).to(x.device)),
    lambda x: x.__setitem__((L([0], [2]), L(1, 3)), torch.tensor(7.0).to(x.device)),
    lambda x: x.index_put_((L(0, 0, 2),), torch.ones(4).to(x.device), accumulate=True),
    lambda x: x.index_put_((L(1, 1, 1), L(3, 3, 0)), L(1.0, 2.0, 3.0).to(x.device), accumulate=True),
    lambda x: x.index_put_((x > 0,), torch.tensor(2.0).to(x.device), accumulate=True),
], ids=range(10))
def test_index_put(write):
    check_lowered(_put(write), torch.randn(3, 4))


def test_index_put_backward():
    check_lowered(lambda x, v: (x * 1).index_put((L(0, 2, 0),), v, accumulate=True), leaf(3, 4), leaf(3, 4),
                  grads=True)


def test_index_put_casts_values_to_self_dtype():
    check_lowered(_put(lambda x: x.__setitem__(L(1), 2.7)), torch.arange(6).view(2, 3))


# ---- gather / scatter ----------------------------------------------------------------------

IDX = torch.tensor([[0, 2, 1], [2, 2, 0]])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
    check_lowered(lambda x: x.gather(dim, IDX.to(x.device)), leaf(3, 4), grads=True)


def test_gather_0d():
    check_lowered(lambda x: x.gather(0, torch.tensor(0).to(x.device)), torch.tensor(3.5))


@pytest.mark.parametrize("op", [
    lambda x, s: x.scatter(0, IDX.to(x.device), s),
    lambda x, s: x.scatter(1, IDX.to(x.device), 9.0),
    lambda x, s: x.scatter(1, IDX.to(x.device), s, reduce="add"),
    lambda x, s: x.scatter(1, IDX.to(x.device), s, reduce="multiply"),
    lambda x, s: x.scatter(0, IDX.to(x.device), 2.0, reduce="multiply"),
    lambda x, s: x.scatter_add(0, IDX.to(x.device), s),
    lambda x, s: torch.scatter_add(x, -1, IDX.to(x.device), s),
], ids=range(7))
@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter(op):
    check_lowered(op, torch.randn(3, 4), torch.randn(3, 5))


@pytest.mark.parametrize("reduce,include_self,dtype", [
    (r, i, torch.float32) for r in ("sum", "prod", "mean", "amax", "amin") for i in (True, False)
] + [("mean", True, torch.int64), ("amin", False, torch.int64)], ids=str)
def test_scatter_reduce(reduce, include_self, dtype):
    x = (torch.arange(12).view(3, 4) % 5 - 2).to(dtype)
    src = (torch.arange(15).view(3, 5) % 7 - 3).to(dtype)
    check_lowered(lambda x, s: x.scatter_reduce(0, IDX.to(x.device), s, reduce,
                                                include_self=include_self), x, src)


def test_scatter_backward():
    check_lowered(lambda x, s: x.scatter(1, IDX.to(x.device), s), leaf(2, 4), leaf(2, 3), grads=True)


# ---- along a dim ---------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    check_lowered(lambda x: x.index_select(dim, L(2, 0, 2).to(x.device)), leaf(3, 4), grads=True)


def test_index_select_0d():
    check_lowered(lambda x: x.index_select(0, L(0).to(x.device)), torch.tensor(2.0))


@pytest.mark.parametrize("op", [
    lambda x, s: x.index_add(0, L(0, 2, 0).to(x.device), s),
    lambda x, s: x.index_add(0, L(0, 2, 0).to(x.device), s, alpha=-2),
    lambda x, s: x.index_copy(0, L(2, 0, 1).to(x.device), s),
    lambda x, s: x.index_fill(1, L(0, 3).to(x.device), -1.0),
    lambda x, s: x.index_fill(0, L(1).to(x.device), torch.tensor(5.0).to(x.device)),
    lambda x, s: x.index_reduce(0, L(0, 2, 0).to(x.device), s, "prod"),
    lambda x, s: x.index_reduce(0, L(0, 2, 0).to(x.device), s, "mean", include_self=False),
    lambda x, s: x.index_reduce(0, L(0, 2, 0).to(x.device), s, "amax"),
], ids=range(8))
@pytest.mark.filterwarnings("ignore:index_reduce")
def test_index_ops(op):
    check_lowered(op, torch.randn(3, 4), torch.randn(3, 4))


def test_index_add_backward():
    check_lowered(lambda x, s: x.index_add(1, L(0, 3, 0).to(x.device), s), leaf(2, 4), leaf(2, 3), grads=True)


# ---- masks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op", [
    lambda x: x.masked_fill(x > 0, 2.5),
    lambda x: x.masked_fill(x[0] > 0, torch.tensor(-1.0).to(x.device)),
    lambda x: x.masked_scatter(x > 0, torch.arange(20.).view(4, 5).to(x.device)),
    lambda x: x.masked_scatter(x[:, :1] > 0, torch.arange(20.).to(x.device)),
    lambda x: x.masked_select(x > 0),
    lambda x: x.masked_select(x[0] > 0),
], ids=range(6))
def test_masks(op):
    check_lowered(op, leaf(3, 4), grads=True)


def test_masked_fill_int_with_float_value_truncates():
    check_lowered(lambda x: x.masked_fill(x > 3, 2.9), torch.arange(6))


@pytest.mark.parametrize("x", [torch.tensor([[0, 1, 0], [2, 0, 3]]), torch.tensor(0.0),
                               torch.tensor(2), torch.zeros(0, 3), torch.tensor([True, False, True])],
                         ids=range(5))
def test_nonzero(x):
    check_lowered(lambda x: (x.nonzero(), torch.argwhere(x), x.nonzero(as_tuple=True)), x)


def test_nonzero_static():
    check_lowered(lambda x: (torch.nonzero_static(x, size=4), torch.nonzero_static(x, size=1, fill_value=-7)),
                  torch.tensor([[0, 1, 0], [2, 0, 3]]))


# ---- flat indexing -------------------------------------------------------------------------

def test_take_and_take_along_dim():
    check_lowered(lambda x: x.take(L([0, -1], [5, 3]).to(x.device)), leaf(3, 4), grads=True)
    check_lowered(lambda x: torch.take_along_dim(x, IDX.to(x.device), dim=1), leaf(2, 4), grads=True)
    check_lowered(lambda x: torch.take_along_dim(x, L(3, 0).to(x.device)), leaf(2, 4), grads=True)
    check_lowered(lambda x: torch.take_along_dim(x, x.argsort(1)[:, :1], 1), leaf(3, 4), grads=True)


@pytest.mark.parametrize("accumulate", [False, True])
def test_put(accumulate):
    check_lowered(lambda x: x.put(L(0, -1, 4, 0).to(x.device), L(1., 2., 3., 4.).to(x.device),
                                  accumulate=accumulate) if accumulate else
                  x.put(L(0, -1, 4).to(x.device), L(1., 2., 3.).to(x.device)), torch.randn(2, 3))


# ---- view write-backs, diagonals, triangles ------------------------------------------------

@pytest.mark.parametrize("op", [
    lambda x, s: torch.select_scatter(x, s[0], 0, -1),
    lambda x, s: torch.select_scatter(x, s[:, 0], 1, 2),
    lambda x, s: torch.slice_scatter(x, s[:, :2], 1, 1, 100, 2),
    lambda x, s: torch.slice_scatter(x, s[1:], 0, -2),
    lambda x, s: torch.slice_scatter(x, s[:, :0], 1, 5, 9),
    lambda x, s: torch.diagonal_scatter(x, s[0, :3], 1),
    lambda x, s: torch.diagonal_scatter(x, s[0, :3], -1, 1, 0),
    lambda x, s: torch.as_strided_scatter(x, s[:2, :2], (2, 2), (1, 4), 1),
    lambda x, s: torch.as_strided_copy(x, (2, 3), (1, 2), 3),
], ids=range(9))
def test_scatter_views(op):
    check_lowered(op, torch.randn(3, 4), torch.randn(3, 4))


@pytest.mark.parametrize("args", [(0, 0, 1), (1, 0, 1), (-2, 0, 1), (5, 0, 1), (0, 2, 0), (1, -1, 0)],
                         ids=str)
def test_diagonal(args):
    check_lowered(lambda x: torch.diagonal_copy(x, *args), leaf(3, 4, 2), grads=True)
    check_lowered(lambda x: x.diagonal(*args) * 1, leaf(3, 4, 2), grads=True)


@pytest.mark.parametrize("args", [(0, -2, -1), (1, 0, 2), (-1, 2, 0)], ids=str)
def test_diag_embed(args):
    check_lowered(lambda x: torch.diag_embed(x, *args), leaf(2, 3), grads=True)


@pytest.mark.parametrize("k", [0, 1, -2])
def test_diag_tril_triu(k):
    check_lowered(lambda x: torch.diag(x[0], k) + 1, leaf(3, 4), grads=True)
    check_lowered(lambda x: torch.diag(x, k) * 1, leaf(3, 4), grads=True)
    check_lowered(lambda x: x.tril(k) + x.triu(k), leaf(2, 3, 4), grads=True)


def _cpu_error(fn, *args):
    try:
        fn(*args)
    except RuntimeError as e:
        return str(e)
    return None


def test_narrow_and_unfold():
    def narrow_copy(x):
        return torch.narrow_copy(x, 1, -3, 2)
    missing = _cpu_error(with_grads(narrow_copy), leaf(3, 4))
    if missing is None:
        check_lowered(narrow_copy, leaf(3, 4), grads=True)
    else:  # torch releases before 2.13 have no derivative for narrow_copy: the same error
        with pytest.raises(RuntimeError, match=re.escape(missing)):
            with_grads(narrow_copy)(to_xla(leaf(3, 4)))
    check_lowered(lambda x: x.narrow(0, 1, 2) * 1, leaf(3, 4), grads=True)
    check_lowered(lambda x: x.unfold(1, 2, 1) * 1, leaf(3, 5), grads=True)
    check_lowered(lambda x: torch.ops.aten.unfold_copy(x, 0, 2, 2), leaf(5, 2), grads=True)
    check_lowered(lambda x: x.unfold(0, 1, 1) * 1, torch.tensor(3.0))


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_bool_accumulation_is_or():
    idx = L(0, 2, 0)
    check_lowered(lambda x, s: (x.index_add(0, idx.to(x.device), s), x.scatter_add(0, IDX[:1].to(x.device), s),
                                x.index_put((idx.to(x.device),), s, accumulate=True),
                                x.put(L(1, 1).to(x.device), s[0, :2], accumulate=True),
                                x.scatter(1, IDX.to(x.device), s, reduce="multiply")),
                  torch.tensor([[True, False, False], [False, False, True], [False, True, False]]),
                  torch.tensor([[True, False, True], [False, False, True], [True, True, False]]))


def test_masked_scatter_source_gradient():
    check_lowered(lambda x, source: x.masked_scatter(x > 0, source), torch.randn(3, 4), leaf(4, 5), grads=True)


@pytest.mark.parametrize("fn", [
    lambda x: x[torch.tensor([True, False])],
    lambda x: x[:, torch.tensor([True, False, True])],
    lambda x: x.index_put_((torch.tensor([True, False]),), torch.tensor(1.0)),
    lambda x: x.index_put_((torch.tensor([True, False]), torch.tensor([0])), torch.tensor(1.0)),
], ids=range(4))
def test_a_mask_of_the_wrong_shape_raises_at_the_op(fn):
    x = torch.ones(3, 2)
    with pytest.raises(IndexError) as cpu:
        fn(x)
    with pytest.raises(IndexError, match=f"^{re.escape(str(cpu.value))}$"):
        fn(to_xla(x))
