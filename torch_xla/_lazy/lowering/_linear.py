"""The backward of a linear lowering (average pooling, upsampling, padding): the transpose
of its forward function, which XLA computes without the forward's intermediates."""
import jax


def linear_backward(fn, shape, dtype):
    """The backward of `fn`, linear in its one input of `shape` and `dtype`: a function from
    the output's gradient (cast to `dtype`) to the input's."""
    transposed = jax.linear_transpose(fn, jax.ShapeDtypeStruct(tuple(shape), dtype))
    return lambda grad: transposed(grad.astype(dtype))[0]
