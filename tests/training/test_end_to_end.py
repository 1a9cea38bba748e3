"""End to end: tiny models trained from the same weights on the device and on the CPU.

Each model trains for 20 steps with SGD+momentum and with AdamW: the losses agree within
1e-4 relative under SGD and 1e-3 under AdamW, and after the first steps (the first program, then the one with optimizer
state) nothing compiles any more.
"""
import copy

import pytest
import torch

from tests.conftest import assert_same
from tests.training._models import (CNN, LSTMLM, MLP, TransformerLM, classification_batches,
                                    lm_batches, train)

STEPS, WARMUP = 20, 3

MODELS = {  # name: (model, batches, SGD learning rate)
    "mlp": (MLP, lambda: classification_batches((8, 16)), 0.05),
    "cnn": (CNN, lambda: classification_batches((4, 3, 8, 8)), 0.05),
    "lstm_lm": (LSTMLM, lm_batches, 0.5),
    "transformer_lm": (TransformerLM, lm_batches, 0.05),
}


def sgd_momentum(sgd_lr):
    return lambda params: torch.optim.SGD(params, lr=sgd_lr, momentum=0.9)


def adamw(sgd_lr):
    return lambda params: torch.optim.AdamW(params, lr=0.01)


LOSS_RTOL = {sgd_momentum: 1e-4, adamw: 1e-3}


@pytest.mark.parametrize("optimizer", [sgd_momentum, adamw])
@pytest.mark.parametrize("model_name", MODELS)
def test_trains_like_the_cpu_without_recompiling(dev, model_name, optimizer):
    make_model, make_batches, sgd_lr = MODELS[model_name]
    torch.manual_seed(0)
    model, batches = make_model(), make_batches()
    cpu_losses, _, cpu_model = train(copy.deepcopy(model), "cpu", optimizer(sgd_lr), batches, STEPS)
    xla_losses, counts, xla_model = train(copy.deepcopy(model), dev, optimizer(sgd_lr), batches, STEPS)

    assert_same(torch.tensor(xla_losses), torch.tensor(cpu_losses), rtol=LOSS_RTOL[optimizer], atol=0, device="cpu")
    assert cpu_losses[-1] < 0.8 * cpu_losses[0], cpu_losses  # the comparison is of real training
    assert counts[WARMUP - 1] == counts[-1], f"recompiled after warm-up: {counts}"
    if optimizer is adamw:
        # Adam normalises gradients, and some are rounding noise (a convolution's bias before
        # batch norm, attention's key bias): those weights drift apart, the losses do not.
        return
    assert_same(xla_model.state_dict(), cpu_model.state_dict(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("model_name", ["cnn", "transformer_lm"])
def test_trains_with_dropout(dev, model_name):
    """Dropout draws different masks on the device: the loss falls, without recompiling."""
    make_model, make_batches, _ = MODELS[model_name]
    torch.manual_seed(0)
    model = make_model(dropout=0.3)
    losses, counts, _ = train(model, dev, adamw(None), make_batches(), STEPS)
    assert sum(losses[-4:]) < 0.8 * sum(losses[:4]), losses
    assert counts[WARMUP - 1] == counts[-1], f"recompiled after warm-up: {counts}"
