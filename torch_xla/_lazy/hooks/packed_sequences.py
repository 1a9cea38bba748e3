"""Packed sequences (`nn.utils.rnn.pack_padded_sequence`) of XLA tensors.

`aten::_pack_padded_sequence` returns the packed data and the batch sizes, which must be a
CPU tensor with data (RNNs read them on the host to unroll their loop). Below autograd,
every output of an op on an XLA tensor is an XLA tensor, so the op gets a kernel on the
AutogradXLA key, above functionalization, that only XLA tensors reach (CPU tensors, and
`torch.func.functionalize` on the CPU, keep PyTorch's own kernel): PyTorch's CPU kernel
computes the batch sizes, with its checks and messages, from a stand-in of the input's
leading dimensions and the lengths (which PyTorch keeps on the CPU); the data are slices of
the input, one per run of equal batch sizes, concatenated as the CPU kernel does. They are
differentiable ops, so autograd gives the backward.
"""
import torch

from .kernel_libraries import installs_kernels


def _stand_in(x):
    """A CPU tensor with x's two leading dimensions and its emptiness, holding no data."""
    shape = tuple(x.shape[:2]) + tuple(min(s, 1) for s in x.shape[2:])
    return torch.zeros((), dtype=torch.uint8).expand(shape)


def _pack_padded_sequence(input, lengths, batch_first):
    _, batch_sizes = torch.ops.aten._pack_padded_sequence.default(
        _stand_in(input), lengths, batch_first)
    steps = input.transpose(0, 1) if batch_first else input
    sizes = batch_sizes.tolist()
    pieces, start = [], 0
    while start < len(sizes):
        end = start
        while end < len(sizes) and sizes[end] == sizes[start]:
            end += 1
        pieces.append(steps[start:end, :sizes[start]].flatten(0, 1))
        start = end
    return torch.cat(pieces), batch_sizes


@installs_kernels("aten")
def install(lib) -> None:
    lib.impl("_pack_padded_sequence", _pack_padded_sequence, "AutogradXLA")
