"""torch_xla.experimental.gru: `GRU`, `torch.nn.GRU` run as one XLA loop per layer.

Same constructor, parameters and results as `torch.nn.GRU` (unidirectional, without
projections); each layer's recurrence over the sequence is one `scan`
(`experimental.scan`), so the program holds one step of it whatever the sequence's length.
As in torch_xla, importing torch_xla makes `torch.nn.GRU` this class (the original stays
`torch.nn.GRU._orig`); unlike torch_xla's, it runs PyTorch's own GRU on tensors that are
not on an XLA device, so CPU code is unchanged. `bidirectional=True` gives PyTorch's GRU.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import PackedSequence

_TorchGRU = nn.GRU


class GRU(_TorchGRU):
    """`torch.nn.GRU` whose recurrence is one XLA loop per layer (see the module)."""

    def __new__(cls, *args, **kwargs):
        if kwargs.get("bidirectional", False) or (len(args) > 6 and args[6]):
            return _TorchGRU(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, *args, **kwargs):
        assert kwargs.get("proj_size", 0) == 0, "GRU only supports no projection."
        super().__init__(*args, **kwargs)

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence) or input.device.type != "xla":
            return super().forward(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(f"GRU: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
            if hx is not None:
                if hx.dim() != 2:
                    raise RuntimeError("For unbatched 2-D input, hx should also be 2-D but "
                                       f"got {hx.dim()}-D tensor")
                hx = hx.unsqueeze(1)
        elif hx is not None and hx.dim() != 3:
            raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                               f"{hx.dim()}-D tensor")
        batch = input.size(0) if self.batch_first else input.size(1)
        if hx is None:
            hx = input.new_zeros(self.num_layers, batch, self.hidden_size)
        self.check_forward_args(input, hx, None)
        output = input.transpose(0, 1) if self.batch_first else input
        hidden = []
        from .scan import scan  # (functorch's compile stack, loaded when first used)
        for layer in range(self.num_layers):
            init = {"h": hx[layer], "w_ih": getattr(self, f"weight_ih_l{layer}"),
                    "w_hh": getattr(self, f"weight_hh_l{layer}")}
            if self.bias:
                init["b_ih"] = getattr(self, f"bias_ih_l{layer}")
                init["b_hh"] = getattr(self, f"bias_hh_l{layer}")
            carry, output = scan(_step, init, output, is_fn_pure=True)
            hidden.append(carry["h"])
            if layer < self.num_layers - 1 and self.dropout > 0:
                output = F.dropout(output, p=self.dropout, training=self.training)
        hidden = torch.stack(hidden, dim=0)
        if not batched:
            output, hidden = output.squeeze(1), hidden.squeeze(1)
        if self.batch_first:
            output = output.transpose(0, 1)
        return output, hidden


def _step(carry, x):
    """One GRU step: the gates of PyTorch's GRU (r, z, n), the weights in the carry."""
    h = carry["h"]
    x_r, x_z, x_n = F.linear(x, carry["w_ih"], carry.get("b_ih")).chunk(3, dim=1)
    h_r, h_z, h_n = F.linear(h, carry["w_hh"], carry.get("b_hh")).chunk(3, dim=1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    h = (1 - z) * n + z * h
    return {**carry, "h": h}, h


def patch_torch_gru() -> None:
    """Makes `torch.nn.GRU` this GRU, keeping PyTorch's as `torch.nn.GRU._orig`."""
    if nn.GRU is not GRU:
        GRU._orig = _TorchGRU
        nn.GRU = GRU
