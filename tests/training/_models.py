"""Tiny models and a training loop shared by the training tests.

`train` runs the same loop on the CPU or on the XLA device (where the step ends with
`xm.optimizer_step(..., barrier=True)`), recording each step's loss and the compile
counter, so a test can compare losses across devices and see recompilations.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_xla.core.xla_model as xm
from tests.conftest import compiles

VOCAB, SEQ = 24, 8


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(),
                                 nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(self.dropout(self.features(x).flatten(1)))


class LSTMLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, 16, batch_first=True)
        self.head = nn.Linear(16, VOCAB)

    def forward(self, tokens):
        return self.head(self.lstm(self.embed(tokens))[0])


class TransformerLM(nn.Module):
    """A causal transformer language model (nn.TransformerEncoder with a causal mask)."""

    def __init__(self, dropout=0.0, d=16, heads=2, layers=1):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.randn(SEQ, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, tokens):
        t = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=tokens.device)
        h = self.encoder(self.embed(tokens) + self.pos[:t], mask=mask, is_causal=True)
        return self.head(h)


def classification_batches(shape, classes=4, n=4, seed=0):
    """Inputs labelled by a fixed linear rule (so that models can learn them)."""
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(*shape, generator=g) for _ in range(n)]
    rule = torch.randn(xs[0][0].numel(), classes, generator=g)
    return [(x, (x.flatten(1) @ rule).argmax(1)) for x in xs]


def lm_batches(batch=4, n=4, seed=0):
    """Token batches (inputs, next-token targets) from a learnable sequence rule."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        start = torch.randint(0, VOCAB, (batch, 1), generator=g)
        seq = (start + 3 * torch.arange(SEQ + 1)) % VOCAB
        out.append((seq[:, :-1], seq[:, 1:]))
    return out


def loss_of(model, x, y):
    out = model(x)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def train(model, device, make_opt, batches, steps):
    """Trains `model` (moved to `device`) for `steps`; returns (losses, compile counts after
    each step, model)."""
    model = model.to(device)
    opt = make_opt(model.parameters())
    losses, counts = [], []
    for step in range(steps):
        x, y = (t.to(device) for t in batches[step % len(batches)])
        opt.zero_grad()
        loss = loss_of(model, x, y)
        loss.backward()
        if device == "cpu":
            opt.step()
        else:
            xm.optimizer_step(opt, barrier=True)
        losses.append(loss.item())
        counts.append(compiles())
    return losses, counts, model
