"""custom_kernel: flash_attention equal to scaled_dot_product_attention (values and
gradients; causal, sm_scale, segment ids, ab), and a user's Pallas kernel on XLA tensors."""
import jax
import pytest
import torch
import torch.nn.functional as F
from jax.experimental import pallas as pl

from tests.compare import check
from torch_xla.experimental.custom_kernel import flash_attention, make_kernel_from_pallas


def _qkv():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 2, 8, 4, generator=g, requires_grad=True) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_matches_sdpa(dev, causal):
    ab = torch.randn(2, 2, 8, 8, requires_grad=True)

    def attend(q, k, v, ab):
        if q.device.type == "xla":
            return flash_attention(q, k, v, causal=causal, sm_scale=0.5, ab=ab)
        mask = torch.ones(8, 8, dtype=torch.bool).tril() if causal else None
        bias = ab if mask is None else ab.masked_fill(~mask, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.5)
    check(attend, *_qkv(), ab, grads=True, rtol=1e-5, atol=1e-5)


def test_flash_attention_segment_ids(dev):
    seg = torch.tensor([[0] * 3 + [1] * 5, [0] * 8])

    def attend(q, k, v, seg):
        if q.device.type == "xla":
            return flash_attention(q, k, v, q_segment_ids=seg, kv_segment_ids=seg)
        mask = seg[:, None, :, None] == seg[:, None, None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
    check(attend, *_qkv(), seg, grads=True, rtol=1e-5, atol=1e-5)


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def _add(x, y):
    return pl.pallas_call(_add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def test_pallas_kernel_on_xla_tensors(dev):
    add = make_kernel_from_pallas(_add, lambda x, y: [(x.shape, x.dtype)])
    check(lambda x, y: add(x, y) if x.device.type == "xla" else x + y,
          torch.randn(8, 128), torch.randn(8, 128))


@pytest.mark.parametrize("length", [5, 20])
def test_repeat_with_fixed_output_size_cuts_or_continues_with_the_last_value(dev, length):
    import torch_xla.debug.metrics as met
    from torch_xla.experimental.custom_kernel import repeat_with_fixed_output_size
    x, repeats = torch.arange(4.0), torch.tensor([0, 3, 1, 4])
    met.clear_all()
    out = repeat_with_fixed_output_size(x.to(dev), repeats.to(dev), length)
    assert out.shape == (length,) and met.metric_data("TransferFromDeviceTime") is None  # no host read
    full = torch.repeat_interleave(x, repeats)
    expected = torch.cat([full, x[-1:].expand(max(0, length - len(full)))])[:length]
    assert torch.equal(out.cpu(), expected)
    assert not [k for k in met.counter_names() if k.startswith("aten::")]
