"""torch_xla.core.xla_builder: XLA's Python op builder (`Op`, `Type`, `Shape`, `mkop`), and
calling jax functions from PyTorch/XLA code (`call_jax`).

The op builder's `Op`s wrap jax values (`_op_builder`); `xla_computation_as_func` and
`xla_op_registry` run the computations built with it on XLA tensors through `call_jax`.

`XlaCallable(fn)` calls `fn`, a function of `Op`s over any pytree of arguments, on XLA
tensors: one computation per signature (`FlattenedInputFunc` splits the call into flat
tensors and the rest).

`call_jax(fn, args, kwargs)` records `fn`, a jax function, as one op of the lazy graph:
its XLA tensor arguments (anywhere in the `args`/`kwargs` pytree) become the op's inputs,
its other arguments are static (each value specialises `fn`), and its outputs (any pytree
of arrays) come back as XLA tensors. `fn` is traced into the step's program where the op
stands, with the ops around it: no program of its own, no copy. As in torch_xla, the
specialisation is cached per `id(fn)` (or `override_hash`) and jax's configuration, then
per the arguments' shapes, dtypes, static values and tree structure.
"""
from typing import Any, Optional

import jax
import torch
from torch.utils import _pytree as pytree

from .._lazy.base import jax_compat
from .._lazy.trace import jax_functions
from ._op_builder import (  # noqa: F401  (torch_xla's op builder API)
    Builder, Computation, ModuleComputation, Op, Shape, Type, XLA_PT_TYPE_MAP as _XLA_PT_TYPE_MAP,
    PT_XLA_TYPE_MAP as _PT_XLA_TYPE_MAP, create_builder, create_computation,
    get_computation_hlo, lowering_function, mkleaf, mkop, mkshape, tensor_shape)


class _Specialized:
    """`fn` specialised to one argument signature: its callee and output tree."""
    __slots__ = ("callee", "out_tree")

    def __init__(self, fn, leaves, treedef, tensor_pos):
        def flat(*arrays):
            full = list(leaves)
            for pos, a in zip(tensor_pos, arrays):
                full[pos] = a
            args, kwargs = jax.tree.unflatten(treedef, full)
            out_leaves, self.out_tree = jax.tree.flatten(fn(*args, **kwargs))
            return tuple(out_leaves)
        avals = [(tuple(leaves[p].shape), leaves[p].dtype) for p in tensor_pos]
        self.callee = jax_functions.Callee(flat, avals, name=getattr(fn, "__name__", "jax"))


class JaxCallable:
    """One jax function's specialisations (`_cache`), keyed by the argument signature."""

    def __init__(self, fn, differentiable=False):
        self._fn, self._differentiable = fn, differentiable
        self._cache = {}

    def __call__(self, *args, **kwargs):
        leaves, treedef = jax.tree.flatten((args, kwargs), is_leaf=lambda x: x is None)
        tensor_pos = tuple(i for i, a in enumerate(leaves) if isinstance(a, torch.Tensor))
        static = tuple(None if i in tensor_pos else a for i, a in enumerate(leaves))
        signature = tuple((tuple(leaves[p].shape), leaves[p].dtype) for p in tensor_pos)
        key = (tensor_pos, signature, static, treedef)
        spec = self._cache.get(key)
        if spec is None:
            static_leaves = [jax_functions.to_jax_value(a) for a in leaves]
            spec = self._cache[key] = _Specialized(self._fn, static_leaves, treedef, tensor_pos)
        run = jax_functions.apply if self._differentiable else jax_functions.call
        outs = run(spec.callee, [leaves[p] for p in tensor_pos])
        return jax.tree.unflatten(spec.out_tree, outs)


_JAX_TO_XLA_COMPUTATION_CACHE = jax_functions.SPECIALIZED  # also the gradients' (assume_pure)


def _jax_to_xla_computation_cache_elements() -> int:
    """How many specialisations of jax functions `call_jax` holds."""
    return sum(len(c._cache) for c in _JAX_TO_XLA_COMPUTATION_CACHE.values())


def call_jax(jax_func, args: tuple[Any, ...], kwargs: Optional[dict[str, Any]] = None,
             name=None, override_hash=None):
    """Calls jax function `jax_func` on `args` and `kwargs`, whose XLA tensors it receives
    as jax arrays, inside the lazy graph; returns its outputs as XLA tensors (the same
    pytree). `jax_func` must be traceable by `jax.jit`. Define it once (not anew each
    step), or pass `override_hash`: the cache is keyed by its id."""
    return _callable(jax_func, override_hash, False)(*args, **(kwargs or {}))


def call_jax_with_grad(jax_func, args: tuple[Any, ...], kwargs: Optional[dict[str, Any]] = None,
                       override_hash=None):
    """`call_jax` with autograd (this package's addition): gradients flow to the XLA tensor
    arguments that require them, through jax's vjp of `jax_func` (the backward one more op
    of the graph, reading the residuals the forward saved)."""
    return _callable(jax_func, override_hash, True)(*args, **(kwargs or {}))


def _callable(jax_func, override_hash, differentiable):
    key = (override_hash or id(jax_func), jax_compat.trace_context(), differentiable)
    callable_ = _JAX_TO_XLA_COMPUTATION_CACHE.get(key)
    if callable_ is None:
        callable_ = _JAX_TO_XLA_COMPUTATION_CACHE[key] = JaxCallable(jax_func, differentiable)
    return callable_


def create_placeholder_tensor(shape, dtype) -> torch.Tensor:
    """A tensor of `shape` and `dtype` on the XLA device that has no value (no buffer): it
    can be traced into graphs, to look at their program, but not read (RuntimeError)."""
    from .._lazy.hooks import device
    return device.placeholder(shape, dtype, "xla:0")


def computation_from_module_proto(name, proto):
    """A computation of a serialized `HloModuleProto` (e.g. `LoweringContext.hlo()`, or a
    jax function's `compiler_ir('hlo').as_serialized_hlo_module_proto()`), to apply to XLA
    tensors with `xla_computation_as_func` or `_XLAC._xla_user_computation`."""
    return ModuleComputation(name, proto)


def xla_computation_as_func(computation, name=None):
    """A computation built with `Op` objects as a function of a list of XLA tensors (its
    parameters, in order) returning the list of its results."""
    def fn(input_tensors):
        out = call_jax(computation, tuple(input_tensors), override_hash=computation.key)
        return list(out) if isinstance(out, tuple) else [out]
    return fn


class FlattenedInputFunc:
    """`orig_func` called with flat tensors: `preprocess(args, kwargs)` flattens the call's
    arguments (PyTorch's pytree) and returns their tensors, keeping the other leaves;
    `flat_call(tensors)` puts new values in the tensors' places, calls `orig_func` and
    returns its flattened outputs; `postprocess(flat)` rebuilds the outputs' structure. So
    `postprocess(flat_call(preprocess(args, kwargs))) == orig_func(*args, **kwargs)`."""

    def __init__(self, orig_func):
        self.orig_func = orig_func
        self.non_tensors = self.in_spec = self.out_spec = None
        self._sentinel = object()  # a tensor's place among the leaves

    def preprocess(self, args, kwargs=None):
        leaves, self.in_spec = self.flatten((args, kwargs or {}))
        self.non_tensors = tuple(self._sentinel if isinstance(a, torch.Tensor) else a
                                 for a in leaves)
        return tuple(a for a in leaves if isinstance(a, torch.Tensor))

    def flat_call(self, flat_input):
        if self.in_spec is None:
            raise RuntimeError("FlattenedInputFunc.flat_call before preprocess")
        values = iter(flat_input)
        leaves = [next(values) if a is self._sentinel else a for a in self.non_tensors]
        args, kwargs = self.unflatten(leaves, self.in_spec)
        flat, self.out_spec = self.flatten(self.orig_func(*args, **kwargs))
        return flat

    def postprocess(self, res_flattened):
        if self.out_spec is None:
            raise RuntimeError("FlattenedInputFunc.postprocess before flat_call")
        return self.unflatten(res_flattened, self.out_spec)

    def flatten(self, inputs):
        return pytree.tree_flatten(inputs)

    def unflatten(self, flattened, spec):
        return pytree.tree_unflatten(flattened, spec)


class XlaCallable:
    """`xla_func`, a function of `Op` objects (the XLA builder's API), called on XLA tensors: each
    signature (tensor shapes and dtypes, the other arguments, the structure) is built once
    into a computation, which runs as one op of the lazy graph."""

    def __init__(self, xla_func):
        self._flat = FlattenedInputFunc(xla_func)
        self._cache = {}  # signature -> (the computation as a function, its outputs' spec)

    def __call__(self, *args, **kwargs):
        tensors = self._flat.preprocess(args, kwargs)
        key = (tuple((tuple(t.shape), t.dtype) for t in tensors), self._flat.non_tensors,
               self._flat.in_spec)
        entry = self._cache.get(key)
        if entry is None:
            func = self._specialize(tensors)
            outputs = func(tensors)  # traced here: flat_call has seen the outputs' structure
            self._cache[key] = (func, self._flat.out_spec)
        else:
            func, self._flat.out_spec = entry
            outputs = func(tensors)
        return self._flat.postprocess(outputs)

    def _specialize(self, tensors):
        shapes = [Shape.create(Op.from_torch_type(t.dtype), t.shape) for t in tensors]
        computation = create_computation(
            "xla::computation", lambda *params: Op.tuple(self._flat.flat_call(params)), shapes)
        return xla_computation_as_func(computation, "xla::computation")
