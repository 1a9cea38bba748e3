"""Discrete Fourier transforms: the three ops every `torch.fft.*` function (and stft,
istft) reduces to, `_fft_c2c`, `_fft_r2c` and `_fft_c2r`; their backward passes are made
of the same ops.

PyTorch passes the transformed dims already wrapped and the scaling as an int:
0 none, 1 by 1/sqrt(n), 2 by 1/n, n being the product of the signal sizes (the input's
for c2c and r2c, the output's for c2r), whatever the direction. The transforms here are
unnormalized and scaled afterwards.
"""
import math

import jax.numpy as jnp
import numpy as np

from . import aten, lower

_BY_ROOT_N, _BY_N = 1, 2


def _scale(y, sizes, normalization):
    n = math.prod(sizes)
    if normalization == _BY_ROOT_N:
        return y * np.asarray(1 / math.sqrt(n), y.real.dtype)
    if normalization == _BY_N:
        return y * np.asarray(1 / n, y.real.dtype)
    return y


def _wrap(dim, ndim):
    return tuple(d % ndim for d in dim)


def _complex_of(dtype):
    return np.dtype(jnp.result_type(dtype, np.complex64))


@lower(aten._fft_c2c.default)
def fft_c2c(x, dim, normalization, forward):
    dim = _wrap(dim, x.ndim)
    if not dim:
        return x
    y = jnp.fft.fftn(x, axes=dim) if forward else jnp.fft.ifftn(x, axes=dim, norm="forward")
    return _scale(y, [x.shape[d] for d in dim], normalization)


@lower(aten._fft_r2c.default)
def fft_r2c(x, dim, normalization, onesided):
    """Real to complex; `onesided` keeps only the first n // 2 + 1 bins of the last dim
    (the others are their conjugates)."""
    dim = _wrap(dim, x.ndim)
    if onesided:
        y = jnp.fft.rfftn(x, axes=dim)
    else:
        y = jnp.fft.fftn(x.astype(_complex_of(x.dtype)), axes=dim)
    return _scale(y, [x.shape[d] for d in dim], normalization)


@lower(aten._fft_c2r.default)
def fft_c2r(x, dim, normalization, last_dim_size):
    """Complex (one half of a Hermitian signal along dim[-1]) to real, of size
    `last_dim_size` along dim[-1]. As PyTorch's CPU kernels (pocketfft, MKL): the inverse
    c2c transform of the other dims first, then a 1-d c2r that reads only the real part of
    the zero bin (and of the Nyquist bin for even sizes) — made explicit here, since other
    FFT libraries (cuFFT) leave non-Hermitian input undefined."""
    dim = _wrap(dim, x.ndim)
    last = dim[-1]
    half = last_dim_size // 2 + 1
    if x.shape[last] > half:
        x = jnp.take(x, jnp.arange(half), axis=last)
    elif x.shape[last] < half:
        pad = [(0, 0)] * x.ndim
        pad[last] = (0, half - x.shape[last])
        x = jnp.pad(x, pad)
    if len(dim) > 1:
        x = jnp.fft.ifftn(x, axes=dim[:-1], norm="forward")
    k = np.arange(half)
    real_only = (k == 0) | ((k == last_dim_size // 2) & (last_dim_size % 2 == 0))
    real_only = real_only.reshape([half if d == last else 1 for d in range(x.ndim)])
    x = jnp.where(real_only, x.real.astype(x.dtype), x)
    y = jnp.fft.irfft(x, n=last_dim_size, axis=last, norm="forward")
    sizes = [last_dim_size if d == last else x.shape[d] for d in dim]
    return _scale(y, sizes, normalization)
