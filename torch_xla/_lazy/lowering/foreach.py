"""`_foreach_*` ops (what optimizers with foreach=True call): the per-tensor op's lowering
mapped over the lists.

Functionalization hands us the functional overloads (`_foreach_add.List`, ...). Each
argument that is a list (tensors or scalars) is taken element by element; any other
argument (a scalar, a 0-d tensor, alpha) is shared by every element.
"""
import jax.numpy as jnp
import torch

from . import REGISTRY, aten, lower, overloads
from ._types import cast


def _norm(x, ord=2, dtype=None):
    return REGISTRY[aten.linalg_vector_norm.default].fn(x, ord, None, False, dtype)


def _powsum(x, ord=2, dtype=None):
    """sum(|x| ** ord), the norm before its root."""
    n = _norm(x, ord, dtype)
    return n if ord in (0, float("inf"), -float("inf")) else n ** ord


def _copy(x, src, non_blocking=False):
    return jnp.broadcast_to(cast(src, x.dtype), x.shape)


_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
          "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal",
          "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
          "zero", "max")

# foreach name -> the per-tensor op whose lowering serves every overload (its lowering takes
# a weakly typed scalar where the op's tensor would be), or a function of one element.
_PER_TENSOR = {
    **{name: getattr(aten, name).default for name in _UNARY},
    "add": aten.add.Tensor, "sub": aten.sub.Tensor, "mul": aten.mul.Tensor, "div": aten.div.Tensor,
    "maximum": aten.maximum.default, "minimum": aten.minimum.default,
    "clamp_min": aten.clamp_min.Tensor, "clamp_max": aten.clamp_max.Tensor,
    "pow": aten.pow.Tensor_Tensor, "addcmul": aten.addcmul.default, "addcdiv": aten.addcdiv.default,
    "lerp": aten.lerp.Tensor, "mm": aten.mm.default,
    "clone": lambda x: x, "copy": _copy, "norm": _norm, "powsum": _powsum,
}
_STATIC = ("norm", "powsum")  # ord is a static argument of the vector norm


def _host_scalars(schema):
    """addcmul/addcdiv.Tensor: PyTorch wants their `scalars` tensor on the CPU and reads it
    there; they are left to PyTorch's decomposition."""
    return any(a.name == "scalars" and not isinstance(a.type, torch.ListType) for a in schema.arguments)


def _per_element(schema):
    """Names of the arguments taken element by element."""
    return frozenset(a.name for a in schema.arguments if isinstance(a.type, torch.ListType))


def _mapped(name, schema):
    per_tensor = _PER_TENSOR[name]
    names = [a.name for a in schema.arguments]
    listed = _per_element(schema)

    def lowering(*args, **kwargs):
        fn = REGISTRY[per_tensor].fn if isinstance(per_tensor, torch._ops.OpOverload) else per_tensor
        n = len(next(a for a, nm in zip(args, names) if nm in listed))
        pick = [nm in listed for nm in names[:len(args)]]
        return tuple(
            fn(*(a[i] if p else a for a, p in zip(args, pick)),
               **{k: v[i] if k in listed else v for k, v in kwargs.items()})
            for i in range(n))
    return lowering


def _register():
    for name, per_tensor in _PER_TENSOR.items():
        if isinstance(per_tensor, torch._ops.OpOverload) and per_tensor not in REGISTRY:
            continue  # no lowering for the per-tensor op: PyTorch's decomposition serves
        packet = getattr(aten, f"_foreach_{name}", None)
        if packet is None:
            continue
        for op in overloads(packet):
            if not _host_scalars(op._schema):
                lower(op, static_scalars=name in _STATIC)(_mapped(name, op._schema))


_register()
