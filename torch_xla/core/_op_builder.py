"""XLA's Python op builder (`xla_builder.Op`) on jax values.

torch_xla wraps XlaBuilder calls; here an `Op` wraps the jax value its XLA operation makes
while the computation is traced (a tuple `Op` wraps a Python tuple of them), and each
XLA operation (`mkop(name, ...)`, named as XlaBuilder names it) is the jax `lax` primitive
of the same semantics. A computation (`create_computation`) is a Python function traced
by jax where it is used: in a `Conditional`, `While`, `Reduce`, `Call`, `Sort`, `Map`, or
as the body of an op registered with `xla_op_registry`.
"""
import hashlib

import jax
import torch

from .._lazy.inspect import hlo_proto
from .._lazy.runtime import pjrt, runner

from ._xla_operations import OPS, Type, XLA_PT_TYPE_MAP, PT_XLA_TYPE_MAP, jax_type, xla_type


def _py_shape(value):
    """XLA's shape of a value as torch_xla's Python form: a dict, or a tuple of them."""
    if isinstance(value, tuple):
        return tuple(_py_shape(v) for v in value)
    return {'type': xla_type(value.dtype), 'sizes': tuple(value.shape)}


def _struct(py_shape):
    """A jax argument description from a Python shape (a tuple shape: a tuple of them)."""
    if isinstance(py_shape, (tuple, list)):
        return tuple(_struct(s) for s in py_shape)
    return jax.ShapeDtypeStruct(tuple(py_shape['sizes']), jax_type(py_shape['type']))


class Shape:
    """An XLA shape: `{'type': 'f32', 'sizes': (2, 3)}`, or a tuple of shapes."""

    def __init__(self, shape):
        self._shape = shape

    @classmethod
    def create(cls, dtype, sizes, dynamic_dimensions=None):
        shape = {'type': str(dtype), 'sizes': tuple(sizes)}
        if dynamic_dimensions is not None:
            shape['dynamic_dimensions'] = tuple(dynamic_dimensions)
        return Shape(shape)

    @property
    def shape(self):
        return self._shape

    def is_tuple(self):
        return isinstance(self._shape, (list, tuple))

    def tuple_size(self):
        assert self.is_tuple()
        return len(self._shape)

    def tuple_shape(self, index):
        assert self.is_tuple()
        return self._shape[index]

    def is_dynamic(self):
        assert not self.is_tuple()
        return 'dynamic_dimensions' in self._shape

    def as_scalar(self):
        return Shape.create(self.dtype, ())

    @property
    def rank(self):
        return len(self.sizes)

    @property
    def sizes(self):
        assert not self.is_tuple()
        return self._shape['sizes']

    @property
    def dynamic_dimensions(self):
        assert not self.is_tuple()
        return self._shape.get('dynamic_dimensions', None)

    @property
    def dtype(self):
        assert not self.is_tuple()
        return self._shape['type']


class Builder:
    """The computation an `Op` belongs to (XlaBuilder's role: its name)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Builder({self.name!r})"


class Computation:
    """A computation built from `fn` over parameters of `shapes` (`create_computation`),
    traced by jax each time an operation applies it."""

    def __init__(self, name, fn, shapes, kwargs):
        self.name, self._fn, self._kwargs = name, fn, kwargs
        self.shapes = tuple(s.shape if isinstance(s, Shape) else s for s in shapes)
        # computations of one function, parameter shapes and keywords trace alike
        self.key = ("xla_computation", id(fn), repr(self.shapes), repr(sorted(kwargs.items())))

    def __call__(self, *values):
        builder = Builder(self.name)
        root = self._fn(*(Op(v, builder) for v in values), **self._kwargs)
        return root.op

    def hlo_text(self):
        def computation(*values):
            return self(*values)
        computation.__name__ = self.name
        return runner.lower(computation, _struct(self.shapes)).as_text(dialect="hlo")



class ModuleComputation:
    """A computation made from a serialized `HloModuleProto` (`computation_from_module_proto`):
    where an operation applies it, its entry computation is inlined into the program (the
    module converted to StableHLO and called through jax.export)."""

    def __init__(self, name, serialized):
        self.name, self._serialized = name, bytes(serialized)
        self._exported = hlo_proto.exported(self._serialized, pjrt.jax_device(0).platform)
        self.shapes = tuple(_py_shape(a) for a in self._exported.in_avals)
        self.key = ("xla_module", hashlib.sha256(self._serialized).hexdigest())

    def __call__(self, *values):
        outs = self._exported.call(*values)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def hlo_text(self):
        return hlo_proto.serialized_text(self._serialized)


def mkop(name, ops, **kwargs):
    """XLA operation `name` (XlaBuilder's name) on the values `ops`, as an `Op`."""
    builder = kwargs.pop('builder', None)
    if name not in OPS:
        raise NotImplementedError(f"xla_builder op {name!r}: no such XLA operation here")
    return Op(OPS[name](tuple(ops), **kwargs), builder)


def mkleaf(name, builder, **kwargs):
    return Op(OPS[name]((), **kwargs), builder)


def _make_computation(name, computation, args_or_shapes, **kwargs):
    if isinstance(computation, Computation) or not callable(computation):
        return computation
    shapes = [a if isinstance(a, Shape) else a.shape() for a in args_or_shapes]
    return create_computation(name, _unpacking(computation), shapes, **kwargs)


def _unpacking(fn):
    """`fn` as a computation: a single tuple parameter spread into its arguments, a list
    or tuple result made an XLA tuple (torch_xla's `Op.wrap_function`)."""
    def wrapper(*args, **kwargs):
        if len(args) == 1 and args[0].shape().is_tuple():
            args = [args[0].get_tuple_element(i) for i in range(args[0].shape().tuple_size())]
        result = fn(*args, **kwargs)
        return Op.tuple(result) if isinstance(result, (tuple, list)) else result
    return wrapper


def create_computation(name, fn, shapes, **kwargs):
    return Computation(name, fn, shapes, kwargs)


class Op:
    """An XLA operation's value while its computation is traced (`op`: a jax value, or a
    tuple of them for an XLA tuple), with XlaBuilder's methods."""

    def __init__(self, op, builder=None):
        self.op = op
        self._builder = builder

    def shape(self):
        return Shape(_py_shape(self.op))

    def builder(self):
        return self._builder

    def _mk(self, name, *others, **kwargs):
        return mkop(name, (self.op,) + tuple(o.op for o in others),
                    builder=self._builder, **kwargs)

    def __add__(self, rhs): return self._mk('Add', rhs)
    def __sub__(self, rhs): return self._mk('Sub', rhs)
    def __mul__(self, rhs): return self._mk('Mul', rhs)
    def __matmul__(self, rhs): return self._mk('Dot', rhs)
    def __truediv__(self, rhs): return self._mk('Div', rhs)
    def __pow__(self, rhs): return self._mk('Pow', rhs)
    def __mod__(self, rhs): return self._mk('Rem', rhs)
    def __neg__(self): return self._mk('Neg')
    def __not__(self): return self._mk('Not')
    def __and__(self, rhs): return self._mk('And', rhs)
    def __or__(self, rhs): return self._mk('Or', rhs)
    def __xor__(self, rhs): return self._mk('Xor', rhs)
    def __eq__(self, rhs): return self._mk('Eq', rhs)
    def __ne__(self, rhs): return self._mk('Ne', rhs)
    def __le__(self, rhs): return self._mk('Le', rhs)
    def __lt__(self, rhs): return self._mk('Lt', rhs)
    def __ge__(self, rhs): return self._mk('Ge', rhs)
    def __gt__(self, rhs): return self._mk('Gt', rhs)
    def __lshift__(self, rhs): return self._mk('ShiftLeft', rhs)
    def __rshift__(self, rhs): return self._mk('ShiftRight', rhs)
    __hash__ = object.__hash__

    def reshape(self, sizes, dimensions=None, inferred_dimension=None):
        return self._mk('Reshape', sizes=sizes, dimensions=dimensions,
                        inferred_dimension=inferred_dimension)

    def dynamic_reshape(self, sizes): return self._mk('DynamicReshape', sizes=sizes)
    def broadcast(self, sizes): return self._mk('Broadcast', sizes=sizes)

    def broadcast_in_dim(self, sizes, dimensions):
        return self._mk('BroadcastInDim', sizes=sizes, dimensions=dimensions)

    def slice(self, start_indices, limit_indices, strides=None):
        return self._mk('Slice', start_indices=start_indices, limit_indices=limit_indices,
                        strides=strides)

    def slice_in_dim(self, start_index, limit_index, dimno, stride=1):
        return self._mk('SliceInDim', start_index=start_index, limit_index=limit_index,
                        dimno=dimno, stride=stride)

    def dynamic_slice(self, start_indices, slice_sizes):
        return self._mk('DynamicSlice', start_indices=start_indices, slice_sizes=slice_sizes)

    def dynamic_update_slice(self, update, start_indices):
        return self._mk('DynamicUpdateSlice', update, start_indices=start_indices)

    def gather(self, start_indices, offset_dims, collapsed_slice_dims, start_index_map,
               index_vector_dim, indices_are_sorted=None, slice_sizes=None):
        return self._mk('Gather', start_indices, offset_dims=offset_dims,
                        collapsed_slice_dims=collapsed_slice_dims,
                        start_index_map=start_index_map, index_vector_dim=index_vector_dim,
                        slice_sizes=slice_sizes, indices_are_sorted=indices_are_sorted)

    def scatter(self, scatter_indices, updates, computation, *args, **kwargs):
        return self._mk('Scatter', scatter_indices, updates, computation=computation)

    def conv(self, kernel, window_strides, feature_group_count=1, batch_group_count=1,
             padding='valid', precision_config=None):
        return self._mk('Conv', kernel, window_strides=window_strides, padding=padding,
                        feature_group_count=feature_group_count,
                        batch_group_count=batch_group_count,
                        precision_config=precision_config)

    def conv_with_general_padding(self, kernel, window_strides, padding,
                                  feature_group_count=1, batch_group_count=1,
                                  precision_config=None):
        return self.conv(kernel, window_strides, feature_group_count, batch_group_count,
                         padding, precision_config)

    def conv_with_general_dimensions(self, kernel, window_strides, *dims, padding='valid',
                                     **kwargs):
        return self._conv_general(kernel, window_strides, padding, None, None, dims, kwargs)

    def conv_general(self, kernel, window_strides, padding, *dims, **kwargs):
        return self._conv_general(kernel, window_strides, padding, None, None, dims, kwargs)

    def conv_general_dilated(self, kernel, window_strides, padding, lhs_dilation,
                             rhs_dilation, *dims, **kwargs):
        return self._conv_general(kernel, window_strides, padding, lhs_dilation,
                                  rhs_dilation, dims, kwargs)

    _CONV_DIMS = ('input_batch_dimension', 'input_feature_dimension',
                  'kernel_input_feature_dimension', 'kernel_output_feature_dimension',
                  'output_batch_dimension', 'output_feature_dimension',
                  'input_spatial_dimensions', 'kernel_spatial_dimensions',
                  'output_spatial_dimensions', 'feature_group_count', 'batch_group_count',
                  'precision_config')

    def _conv_general(self, kernel, window_strides, padding, lhs_dilation, rhs_dilation,
                      dims, kwargs):
        kwargs.update(zip(self._CONV_DIMS, dims))
        return self._mk('ConvGeneralDilated', kernel, window_strides=window_strides,
                        padding=padding, lhs_dilation=lhs_dilation,
                        rhs_dilation=rhs_dilation, **kwargs)

    def cast(self, to_type): return self._mk('Convert', to_type=to_type)
    def bitcast(self, to_type): return self._mk('BitcastConvert', to_type=to_type)
    def pad(self, value, config): return self._mk('Pad', value, config=config)

    def select_and_scatter(self, source, init_value, *args, **kwargs):
        return self._mk('SelectAndScatter', source, init_value)

    def select_and_scatter_with_general_padding(self, source, init_value, *args, **kwargs):
        return self._mk('SelectAndScatterWithGeneralPadding', source, init_value)

    def max_pool(self, kernel_size, stride, batch_dimension, feature_dimension,
                 spatial_dimensions, padding='valid'):
        return self._mk('MaxPool', kernel_size=kernel_size, stride=stride, padding=padding)

    def _scalar_computation(self, name, computation):
        scalar = self.shape().as_scalar()
        return _make_computation(name, computation, (scalar, scalar))

    def reduce(self, init_value, computation, dimensions):
        return self._mk('Reduce', init_value, dimensions=dimensions,
                        computation=self._scalar_computation('Reduce', computation))

    def reduce_all(self, init_value, computation):
        return self._mk('ReduceAll', init_value,
                        computation=self._scalar_computation('ReduceAll', computation))

    def reduce_window(self, init_value, computation, window_dimensions, window_strides,
                      padding='valid'):
        return self._mk('ReduceWindow', init_value,
                        computation=self._scalar_computation('ReduceWindow', computation),
                        window_dimensions=window_dimensions, window_strides=window_strides,
                        padding=padding)

    def select(self, true_value, false_value):
        return self._mk('Select', true_value, false_value)

    def transpose(self, permutation): return self._mk('Transpose', permutation=permutation)

    def triangualr_solve(self, b, left_side=None, lower=None, unit_diagonal=None,
                         transpose_a=None):
        """XLA's TriangularSolve of `self` (the matrix a) and `b` (the name's spelling is
        torch_xla's)."""
        return self._mk('TriangularSolve', b, left_side=left_side, lower=lower,
                        unit_diagonal=unit_diagonal, transpose_a=transpose_a)

    def clamp(self, min_value, max_value):
        return self._mk('Clamp', min_value, max_value)

    def get_tuple_element(self, index):
        return self._mk('GetTupleElement', index=index)

    def conditional(self, true_operand, false_operand, true_computation, false_computation):
        return self._mk(
            'Conditional', true_operand, false_operand,
            true_computation=_make_computation('CondTrue', true_computation, (true_operand,)),
            false_computation=_make_computation('CondFalse', false_computation,
                                                (false_operand,)))

    @classmethod
    def wrap_function(cls, fn):
        return _unpacking(fn)

    @classmethod
    def make_computation(cls, name, computation, args_or_shapes, **kwargs):
        return _make_computation(name, computation, args_or_shapes, **kwargs)

    def mkconditional(self, ops, true_fn, false_fn, **kwargs):
        operands = Op.tuple(ops, builder=self._builder)
        return self.conditional(operands, operands, true_fn, false_fn)

    def while_loop(self, condition_computation, body_computation):
        return self._mk(
            'While',
            condition_computation=_make_computation('Condition', condition_computation,
                                                    (self,)),
            body_computation=_make_computation('Body', body_computation, (self,)))

    @classmethod
    def mkwhile(cls, ops, condition_fn, body_fn, **kwargs):
        return Op.tuple(ops).while_loop(condition_fn, body_fn)

    def get_dimension_size(self, dimension):
        return self._mk('GetDimensionSize', dimension=dimension)

    def set_dimension_size(self, size, dimension):
        return self._mk('SetDimensionSize', size, dimension=dimension)

    def rev(self, dimensions): return self._mk('Rev', dimensions=dimensions)
    def acos(self): return self._mk('Acos')
    def asin(self): return self._mk('Asin')
    def atan(self): return self._mk('Atan')
    def ceil(self): return self._mk('Ceil')
    def cos(self): return self._mk('Cos')
    def cosh(self): return self._mk('Cosh')
    def erf(self): return self._mk('Erf')
    def erfc(self): return self._mk('Erfc')
    def erfinf(self): return self._mk('ErfInv')
    def exp(self): return self._mk('Exp')
    def expm1(self): return self._mk('Expm1')
    def floor(self): return self._mk('Floor')
    def log(self): return self._mk('Log')
    def log1p(self): return self._mk('Log1p')
    def sqrt(self): return self._mk('Sqrt')
    def real(self): return self._mk('Real')
    def imag(self): return self._mk('Imag')
    def clz(self): return self._mk('Clz')
    def conj(self): return self._mk('Conj')
    def rsqrt(self): return self._mk('Rsqrt')
    def sin(self): return self._mk('Sin')
    def sinh(self): return self._mk('Sinh')
    def tan(self): return self._mk('Tan')
    def tanh(self): return self._mk('Tanh')
    def atan2(self, other): return self._mk('Atan2', other)
    def max(self, other): return self._mk('Max', other)
    def min(self, other): return self._mk('Min', other)

    def scalar_like(self, value):
        shape = self.shape()
        return Op.scalar(self._builder, value, dtype=shape.dtype).broadcast(shape.sizes)

    def zeros_like(self): return self.scalar_like(0)
    def ones_like(self): return self.scalar_like(1)

    @classmethod
    def tuple(cls, ops, builder=None):
        return mkop('Tuple', [o.op for o in ops], builder=builder or _first_builder(ops))

    @classmethod
    def concat_in_dim(cls, ops, dimension, builder=None):
        return mkop('ConcatInDim', [o.op for o in ops], dimension=dimension,
                    builder=builder or _first_builder(ops))

    @classmethod
    def call(cls, computation, ops, builder=None):
        return mkop('Call', [o.op for o in ops], builder=builder or _first_builder(ops),
                    computation=_make_computation('Call', computation, ops))

    @classmethod
    def constant(cls, builder, value):
        return mkleaf('Constant', builder, value=value)

    @classmethod
    def scalar(cls, builder, value, dtype=None):
        return mkleaf('Constant', builder, value=torch.tensor(value,
                                                              dtype=cls.to_torch_type(dtype)))

    @classmethod
    def zero(cls, builder, dtype=None): return cls.scalar(builder, 0, dtype=dtype)

    @classmethod
    def one(cls, builder, dtype=None): return cls.scalar(builder, 1, dtype=dtype)

    @classmethod
    def iota(cls, builder, shape, iota_dimension):
        return mkleaf('Iota', builder, shape=shape.shape, iota_dimension=iota_dimension)

    @classmethod
    def sort(cls, ops, comparator, dimension=None, is_stable=None):
        return mkop('Sort', [o.op for o in ops], builder=_first_builder(ops),
                    comparator=comparator, dimension=dimension, is_stable=is_stable)

    @classmethod
    def map(cls, ops, computation, dimensions, static_operands=(), builder=None):
        return mkop('Map', [o.op for o in ops], builder=builder or _first_builder(ops),
                    computation=_make_computation('Map', computation, [
                        Shape(o.shape().as_scalar().shape) for o in ops]),
                    dimensions=dimensions,
                    static_operands=[o.op for o in static_operands])

    @classmethod
    def to_torch_type(cls, dtype):
        return XLA_PT_TYPE_MAP[dtype] if dtype else torch.float32

    @classmethod
    def from_torch_type(cls, dtype):
        return PT_XLA_TYPE_MAP[dtype]


def _first_builder(ops):
    return ops[0].builder() if ops else None


def create_builder(name):
    return Builder(name)


def mkshape(dtype, sizes, dynamic_dimensions=None):
    return Shape.create(dtype, sizes, dynamic_dimensions=dynamic_dimensions)


def tensor_shape(tensor, device=''):
    """The XLA shape of a tensor (or of each of a list of them)."""
    if isinstance(tensor, (list, tuple)):
        return [tensor_shape(t) for t in tensor]
    return Shape.create(PT_XLA_TYPE_MAP[tensor.dtype], tensor.shape)


def get_computation_hlo(computation):
    """The HLO text of `computation` (jax's lowering of it)."""
    return computation.hlo_text()


def lowering_function(name, opfn):
    """`opfn`, a function of `Op`s, as a jax function of the values they wrap."""
    def lowered(*values, **kwargs):
        builder = Builder(name)
        return opfn(*(Op(v, builder) for v in values), **kwargs).op
    lowered.__name__ = name
    return lowered
