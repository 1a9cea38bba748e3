"""Autocast for XLA devices: kernels on PyTorch's AutocastXLA dispatch key.

PyTorch routes every op on an XLA tensor through the AutocastXLA key while
`torch.autocast('xla')` is active, but registers no kernels there. These are ours, with
the casting policy of PyTorch's CUDA autocast (aten/src/ATen/autocast_mode.cpp):

- lower precision: matrix products and convolutions run in the autocast dtype;
- float32: ops that lose too much in 16 bits (exp, log, pow, norms, losses...) run in
  float32;
- float32 by `dtype=`: reductions and softmax with a `dtype` argument get float32 unless
  the caller gave one;
- promote: ops mixing inputs run in the widest floating type among them.

Only floating tensors on XLA devices other than float64 are cast (PyTorch's
eligibility rule); every other op falls through to the layers below.
"""
import torch

from torch_xla._lazy.lowering import overloads
from torch_xla._lazy.base import frames as _frames
from torch_xla._lazy.hooks import kernel_libraries as _kernel_libraries

aten = torch.ops.aten
# Not a member of the Python enum (it has no name there), but parseable.
_KEYS = torch._C.DispatchKeySet(torch._C._parse_dispatch_key("AutocastXLA"))

LOWER_PRECISION = (
    "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr",
    "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm",
    "chain_matmul", "linalg_multi_dot", "lstm_cell", "gru_cell", "rnn_tanh_cell",
    "rnn_relu_cell", "scaled_dot_product_attention",
)
FLOAT32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm",
    "group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d",
    "_upsample_nearest_exact2d", "upsample_nearest3d", "_upsample_nearest_exact3d",
    "upsample_linear1d", "upsample_bilinear2d", "_upsample_bilinear2d_aa", "upsample_trilinear3d",
    "upsample_bicubic2d", "_upsample_bicubic2d_aa",
)
FLOAT32_DTYPE_ARG = (
    "prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm",
    "linalg_matrix_norm", "sum",
)
PROMOTE = (
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler",
    "index_put", "tensordot", "scatter_add",
)


def _eligible(t) -> bool:
    return (isinstance(t, torch.Tensor) and t.device.type == "xla" and t.is_floating_point()
            and t.dtype != torch.float64)


def _cast(obj, dtype):
    if _eligible(obj):
        return obj if obj.dtype == dtype else obj.to(dtype)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast(o, dtype) for o in obj)
    return obj


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)


def _below(op, args, kwargs):
    with torch._C._ExcludeDispatchKeyGuard(_KEYS):
        return op(*args, **kwargs)


def _lower_precision(op):
    def kernel(*args, **kwargs):
        dtype = torch.get_autocast_dtype("xla")
        return _below(op, _cast(args, dtype), _cast(kwargs, dtype))
    return kernel


def _float32(op):
    def kernel(*args, **kwargs):
        return _below(op, _cast(args, torch.float32), _cast(kwargs, torch.float32))
    return kernel


def _float32_dtype_arg(op):
    position = [a.name for a in op._schema.arguments].index("dtype")

    def kernel(*args, **kwargs):
        given = args[position] if len(args) > position else kwargs.get("dtype")
        if given is None and args and _eligible(args[0]):
            args, kwargs = args[:position], dict(kwargs, dtype=torch.float32)
        return _below(op, args, kwargs)
    return kernel


def _promote(op):
    def kernel(*args, **kwargs):
        dtype = torch.get_autocast_dtype("xla")
        for t in _tensors((args, list(kwargs.values()))):
            if _eligible(t):
                dtype = torch.promote_types(dtype, t.dtype)
        return _below(op, _cast(args, dtype), _cast(kwargs, dtype))
    return kernel


def _overloads(name):
    """The functional overloads of aten::name (in-place and out= forms are not cast)."""
    packet = getattr(aten, name, None)
    return [] if packet is None else overloads(packet)



@_kernel_libraries.installs_kernels("_", "aten")
def install(fallback, lib) -> None:
    """Registers the kernels (once): at `import torch_xla`, so `torch.autocast('xla')` works."""
    fallback.fallback(torch.library.fallthrough_kernel, "AutocastXLA")
    kernels = []
    for names, policy in ((LOWER_PRECISION, _lower_precision), (FLOAT32, _float32),
                          (PROMOTE, _promote)):
        for name in names:
            for op in _overloads(name):
                kernels.append(policy(op))
                lib.impl(op, kernels[-1], "AutocastXLA")
    for name in FLOAT32_DTYPE_ARG:
        for op in _overloads(name):
            if any(a.name == "dtype" for a in op._schema.arguments):
                kernels.append(_float32_dtype_arg(op))
                lib.impl(op, kernels[-1], "AutocastXLA")
    _frames.run_without_dynamo(*kernels)
