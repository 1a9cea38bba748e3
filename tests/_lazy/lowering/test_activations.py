"""Activations and their backward ops against PyTorch's CPU kernels: values at the points
where they switch branches, NaN, int inputs, in-place forms and gradients."""
import math

import pytest
import torch
import torch.nn.functional as F

from tests._lazy.lowering._helpers import rand, rint
from tests.conftest import check_lowered

aten = torch.ops.aten
nan = math.nan

# The points where activations switch branches, and NaN. Inputs put them first in 64
# elements: PyTorch's CPU kernels treat NaN differently in their vectorized loop (which the
# device follows) and in the scalar loop over the last few elements.
EDGES = torch.tensor([-4.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 25.0, nan])


def edges(seed=0):
    return torch.cat([EDGES, rand(54, seed=seed)])


ACTIVATIONS = {
    "relu": F.relu, "relu6": F.relu6, "threshold": lambda x: F.threshold(x, 0.5, -2.0),
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "elu": F.elu, "elu_alpha": lambda x: F.elu(x, alpha=0.3),
    "leaky_relu": F.leaky_relu, "leaky_relu_slope": lambda x: F.leaky_relu(x, 0.2),
    "hardtanh": F.hardtanh, "hardtanh_bounds": lambda x: F.hardtanh(x, -0.5, 2.0),
    "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2, threshold=3), "mish": F.mish,
    "logsigmoid": F.logsigmoid, "glu": F.glu, "glu_dim0": lambda x: F.glu(x, dim=0),
    "celu": lambda x: F.celu(x, alpha=0.5), "selu": F.selu, "softsign": F.softsign,
    "hardshrink": F.hardshrink, "softshrink": lambda x: F.softshrink(x, 0.7),
    "logit": lambda x: torch.logit(torch.sigmoid(x), eps=1e-3),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_forward_and_grad(name):
    check_lowered(ACTIVATIONS[name], edges().reshape(8, 8).requires_grad_(), grads=True)


@pytest.mark.parametrize("name", ["relu", "hardtanh", "threshold", "relu6"])
def test_int_activation_forward(name):
    check_lowered(ACTIVATIONS[name], rint(3, 4))


def test_prelu_forward_and_grads():
    for w in (torch.tensor([0.25]), torch.tensor([0.1, -0.2, 0.3])):
        x = edges()[:48].reshape(4, 3, 4).requires_grad_()
        check_lowered(F.prelu, x, w.requires_grad_(), grads=True)


def test_backward_ops_called_directly():
    """Ops autograd emits outside grad mode (silu/mish) or in-place forms (is_result)."""
    x, g = edges(), rand(64, seed=7)
    out = torch.nn.functional.elu(x)
    check_lowered(lambda g, x, out: (aten.silu_backward(g, x), aten.mish_backward(g, x),
                                     aten.sigmoid_backward(g, out.sigmoid()), aten.tanh_backward(g, out.tanh()),
                                     aten.elu_backward(g, 1.0, 1.0, 1.0, True, out),
                                     aten.elu_backward(g, 0.5, 2.0, 1.5, False, x),
                                     aten.gelu_backward(g, x), aten.gelu_backward(g, x, approximate="tanh"),
                                     aten.hardtanh_backward(g, x, -1.0, 1.0), aten.hardsigmoid_backward(g, x),
                                     aten.hardswish_backward(g, x), aten.softplus_backward(g, x, 1.0, 20.0),
                                     aten.leaky_relu_backward(g, x, 0.1, False), aten.threshold_backward(g, x, 0.5),
                                     aten.softshrink_backward(g, x, 0.5), aten.hardshrink_backward(g, x, 0.5),
                                     aten.glu_backward(g[:32].reshape(4, 8), x.reshape(4, 16), 1)), g, x, out)


def test_log_sigmoid_forward_buffer():
    check_lowered(lambda x: aten.log_sigmoid_forward(x), edges())


def test_inplace_activations():
    """In-place forms reach the engine functionalized (and elu_ marks its output as the
    saved tensor: elu_backward with is_result=True)."""
    def run(x):
        y = x * 1.0
        F.elu_(y)
        z = y * 2
        F.leaky_relu_(z, 0.1)
        return z
    check_lowered(run, edges().requires_grad_(), grads=True)
