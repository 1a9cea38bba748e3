"""Histograms (histc, histogram, histogramdd): bin counts as a scatter-add into a fixed
number of bins, with PyTorch's CPU kernel's rules.

Samples are rows of an (N, D) matrix; a sample outside [first edge, last edge] in any
dimension (or NaN) is left out; the last bin is closed on the right. With a bin count,
the edges are evenly spaced from the range (the data's minimum and maximum when none is
given) and a sample's bin is found by linear interpolation corrected against the edges
next to it; with edge tensors, by binary search. Where the data decide the range, a range
that is not finite (an inf or NaN in the data) gives no error here, unlike on the CPU.

PyTorch has no meta kernels for `histogram` and `histogramdd`'s parts: their output
shapes come from the stand-ins registered with them (the CPU kernel on empty inputs,
which also raises PyTorch's errors for the dtypes it refuses).
"""
import jax.numpy as jnp
import numpy as np
import torch

from . import aten, lower
from .factories import linspace_values
from .meta_stand_ins import meta_stand_in


def _data_range(x, lo, hi):
    """(lo, hi) per dimension: the given range, else the data's extremes (0, 1 for no data)."""
    if x.shape[0] == 0:
        return jnp.asarray(lo, x.dtype), jnp.asarray(hi, x.dtype)
    return jnp.min(x, 0), jnp.max(x, 0)


def _even_edges(x, bins, range_):
    """histogramdd's edges: evenly spaced over the range (widened by 0.5 each side when
    empty), one array of bins[d] + 1 edges per dimension."""
    d = x.shape[1]
    if range_ is not None:
        lo = jnp.asarray(range_[0::2], np.float64)
        hi = jnp.asarray(range_[1::2], np.float64)
    else:
        lo, hi = _data_range(x, [0.0] * d, [1.0] * d)
        lo, hi = lo.astype(np.float64), hi.astype(np.float64)
    same = lo == hi
    lo, hi = jnp.where(same, lo - 0.5, lo), jnp.where(same, hi + 0.5, hi)
    return [linspace_values(lo[i], hi[i], bins[i] + 1, np.dtype(x.dtype)) for i in range(d)]


def _positions(x, edges, search):
    """Per sample and dimension, its bin (or -1 outside the edges), as the CPU kernel
    finds it: 'linear' (interpolation), 'local' (interpolation, then a search of the
    edges around it) or 'binary'."""
    n_edges = edges.shape[0]
    left, right = edges[0], edges[-1]
    inside = (x >= left) & (x <= right)
    if search == "binary":
        pos = jnp.searchsorted(edges, x, side="right") - 1
    else:
        pos = ((x - left) * jnp.asarray(n_edges - 1, x.dtype) / (right - left))
        pos = jnp.where(inside, pos, 0).astype(np.int64)
        if search == "local":  # upper_bound over edges[max(0, pos - 1) : min(pos + 2, n)]
            low = jnp.maximum(pos - 1, 0)
            count = jnp.zeros_like(pos)
            for offset in range(3):
                at = low + offset
                ok = at < jnp.minimum(pos + 2, n_edges)
                count = count + (ok & (edges[jnp.minimum(at, n_edges - 1)] <= x))
            pos = low + count - 1
    pos = jnp.where(pos == n_edges - 1, pos - 1, pos)
    return jnp.where(inside, pos, -1)


def _counts(x, edges, weight, density, search):
    """The (bins_0, ..., bins_{D-1}) histogram of samples x (N, D)."""
    shape = tuple(e.shape[0] - 1 for e in edges)
    pos = jnp.stack([_positions(x[:, i], e, search) for i, e in enumerate(edges)], -1) \
        if edges else jnp.zeros((x.shape[0], 0), np.int64)
    keep = jnp.all(pos >= 0, -1)
    flat = jnp.zeros((x.shape[0],), np.int64)
    for i, size in enumerate(shape):
        flat = flat * size + jnp.maximum(pos[:, i], 0)
    w = jnp.ones((x.shape[0],), x.dtype) if weight is None else weight.reshape(-1).astype(x.dtype)
    w = jnp.where(keep, w, jnp.zeros((), x.dtype))
    hist = jnp.zeros((int(np.prod(shape)),), x.dtype).at[flat].add(w).reshape(shape)
    if density:
        hist = hist / jnp.sum(hist)
        for i, e in enumerate(edges):
            widths = e[1:] - e[:-1]
            hist = hist / widths.reshape([-1 if j == i else 1 for j in range(len(edges))])
    return hist


def _samples(x):
    """histogramdd's input (..., D) as rows of samples (N, D)."""
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


@lower(aten.histc.default, static_scalars=True)
def histc(x, bins=100, min=0, max=0):
    """Edges over [min, max] (the data's extremes when they are equal, then widened by 1
    each side if still equal); bins by interpolation alone."""
    x = x.reshape(-1, 1)
    if min == max and x.shape[0] > 0:
        lo, hi = jnp.min(x).astype(np.float64), jnp.max(x).astype(np.float64)
    else:
        lo, hi = jnp.asarray(min, np.float64), jnp.asarray(max, np.float64)
    same = lo == hi
    lo, hi = jnp.where(same, lo - 1, lo), jnp.where(same, hi + 1, hi)
    edges = linspace_values(lo, hi, bins + 1, np.dtype(x.dtype))
    return _counts(x, [edges], None, False, "linear")


@lower(aten.histogram.bin_ct)
def histogram_bin_ct(x, bins=100, range=None, weight=None, density=False):
    x = x.reshape(-1, 1)
    edges = _even_edges(x, [bins], range)
    return _counts(x, edges, weight, density, "local"), edges[0]


@lower(aten.histogram.bins_tensor)
def histogram_bins_tensor(x, bins, weight=None, density=False):
    return _counts(x.reshape(-1, 1), [bins], weight, density, "binary"), bins


@lower(aten._histogramdd_bin_edges.default)
def histogramdd_bin_edges(x, bins, range=None, weight=None, density=False):
    return tuple(_even_edges(_samples(x), bins, range))


@lower(aten._histogramdd_from_bin_cts.default)
def histogramdd_from_bin_cts(x, bins, range=None, weight=None, density=False):
    x = _samples(x)
    return _counts(x, _even_edges(x, bins, range), weight, density, "local")


@lower(aten._histogramdd_from_bin_tensors.default)
def histogramdd_from_bin_tensors(x, bins, weight=None, density=False):
    return _counts(_samples(x), list(bins), weight, density, "binary")


# ---- output shapes (PyTorch has no meta kernels for these) ----------------------------------

def _cpu_probe(func, rows_of):
    """A stand-in for `func`'s meta kernel: the CPU kernel on no samples (input (0,) or
    (0, D), weight (0,), edge tensors 0, 1, ...): the outputs' shapes do not depend on
    the samples, and PyTorch's dtype and argument errors are raised as on the CPU."""
    def stand_in(x, *args, **kwargs):
        def edges(t):
            return torch.arange(t.numel(), dtype=t.dtype).reshape(t.shape) if isinstance(t, torch.Tensor) else t
        args = [[edges(b) for b in a] if isinstance(a, (list, tuple)) else edges(a) for a in args]
        weight = kwargs.get("weight")
        if weight is not None:
            kwargs = {**kwargs, "weight": torch.empty((0,), dtype=weight.dtype)}
        rows = torch.empty(rows_of(x), dtype=x.dtype)
        out = func(rows, *args, **kwargs)
        return tuple([torch.empty_like(o, device="meta") for o in item] if isinstance(item, (list, tuple))
                     else torch.empty_like(item, device="meta") for item in out) \
            if isinstance(out, (tuple, list)) else torch.empty_like(out, device="meta")
    return stand_in


def _flat(x):
    return (0,)


def _dd(x):
    return (0, x.shape[-1]) if x.ndim else (0,)


for _op, _rows in ((aten.histogram.bin_ct, _flat), (aten.histogram.bins_tensor, _flat),
                   (aten._histogramdd_bin_edges.default, _dd),
                   (aten._histogramdd_from_bin_cts.default, _dd),
                   (aten._histogramdd_from_bin_tensors.default, _dd)):
    meta_stand_in(_op)(_cpu_probe(_op, _rows))
