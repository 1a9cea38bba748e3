"""Packed sequences on the XLA device: packing, RNN/LSTM/GRU on packed input, unpacking,
forward and backward equal to the CPU; packing on the CPU (functionalized too) untouched."""
import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import (pack_padded_sequence, pack_sequence, pad_packed_sequence,
                                pad_sequence)

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from tests.compare import EXACT, assert_same, fallbacks, to_xla


def _padded(batch_first=False, lengths=(5, 3, 2, 2)):
    torch.manual_seed(0)
    shape = (len(lengths), max(lengths), 4) if batch_first else (max(lengths), len(lengths), 4)
    return torch.randn(*shape, requires_grad=True), torch.tensor(lengths)


@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_and_unpack_match_the_cpu(dev, batch_first):
    x, lengths = _padded(batch_first)
    cpu = pack_padded_sequence(x, lengths, batch_first=batch_first)
    xla = pack_padded_sequence(to_xla(x), lengths, batch_first=batch_first)
    assert xla.batch_sizes.device.type == "cpu" and torch.equal(xla.batch_sizes, cpu.batch_sizes)
    assert xla.data.device.type == "xla"
    assert_same(xla.data, cpu.data)
    out, out_lengths = pad_packed_sequence(xla, batch_first=batch_first, padding_value=-1.0)
    expected, expected_lengths = pad_packed_sequence(cpu, batch_first=batch_first,
                                                     padding_value=-1.0)
    assert_same(out, expected)
    assert torch.equal(out_lengths, expected_lengths)


def test_unsorted_lengths_and_pack_sequence(dev):
    x, _ = _padded()
    lengths = torch.tensor([2, 5, 3, 2])
    cpu = pack_padded_sequence(x, lengths, enforce_sorted=False)
    xla = pack_padded_sequence(to_xla(x), lengths, enforce_sorted=False)
    assert_same(xla.data, cpu.data)
    assert_same(xla.unsorted_indices, cpu.unsorted_indices, **EXACT)
    seqs = [torch.randn(n, 3) for n in (4, 1, 3)]
    cpu = pack_sequence(seqs, enforce_sorted=False)
    xla = pack_sequence(to_xla(seqs), enforce_sorted=False)
    assert_same(xla.data, cpu.data)
    assert_same(pad_sequence(to_xla(seqs), batch_first=True), pad_sequence(seqs, batch_first=True))


@pytest.mark.parametrize("kind", [nn.RNN, nn.LSTM, nn.GRU])
def test_rnns_on_packed_input_forward_and_backward(dev, kind):
    torch.manual_seed(0)
    rnn = kind(4, 6, num_layers=2, bidirectional=True)
    x, lengths = _padded()
    lengths = torch.tensor([3, 5, 2, 2])

    def run(model, inputs):
        packed = pack_padded_sequence(inputs, lengths, enforce_sorted=False)
        out, state = model(packed)
        padded, _ = pad_packed_sequence(out)
        state = state if isinstance(state, tuple) else (state,)
        loss = padded.pow(2).sum() + sum(s.sum() for s in state)
        loss.backward()
        return [padded, *state, inputs.grad] + [p.grad for p in model.parameters()]

    expected = run(copy.deepcopy(rnn), x)
    met.clear_counters()
    actual = run(copy.deepcopy(rnn).to(dev), to_xla(x))
    xm.mark_step()
    assert_same(actual, expected, rtol=1e-4, atol=1e-5)
    assert not fallbacks(), f"ran on the CPU: {sorted(fallbacks())}"


def test_the_cpus_errors(dev):
    x, _ = _padded()
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        pack_padded_sequence(x.detach().to(dev), torch.tensor([2, 5, 3, 2]))
    with pytest.raises(RuntimeError, match="Expected `len\\(lengths\\)` to be equal to batch_size"):
        pack_padded_sequence(x.detach().to(dev), torch.tensor([5, 3]))
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        pack_padded_sequence(x.detach().to(dev), torch.tensor([5, 3, 2, 0]))
    with pytest.raises(RuntimeError, match="Cannot pack empty tensors"):
        pack_padded_sequence(torch.zeros(5, 4, 0, device=dev), torch.tensor([5, 3, 2, 2]))


def test_cpu_packing_and_its_functionalization_are_pytorchs():
    x, lengths = _padded()

    def pack(t):
        return tuple(torch.ops.aten._pack_padded_sequence(t, lengths, False))
    data, sizes = torch.func.functionalize(pack)(x.detach())
    expected_data, expected_sizes = pack(x.detach())
    assert sizes.device.type == "cpu" and torch.equal(sizes, expected_sizes)
    assert torch.equal(data, expected_data)
    packed = pack_padded_sequence(x, lengths)
    assert packed.data.grad_fn.name() == "PackPaddedSequenceBackward0"
