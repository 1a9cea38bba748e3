"""Trains a small causal transformer language model on an XLA device.

A character-level model (nn.TransformerEncoder with a causal mask) learns a short text. The
step is an ordinary PyTorch training step ending in `xm.optimizer_step(optimizer,
barrier=True)`; every program is compiled once: the learning rate follows a cosine schedule
without recompiling, and the progress line shows the compilations so far (they stop
growing after the first steps).

    python examples/train_transformer_lm.py --steps 200
    PT_XLA_DEBUG=1 python examples/train_transformer_lm.py --steps 5   # why each compile

At the end it writes a few characters greedily, with a fixed-size window so that
generation, too, runs one program.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
    "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it "
    "was the season of Light, it was the season of Darkness, it was the spring of hope, it "
    "was the winter of despair, we had everything before us, we had nothing before us, we "
    "were all going direct to Heaven, we were all going direct the other way. "
)


class TransformerLM(nn.Module):
    def __init__(self, vocab, seq_len, d_model, heads, layers, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=dropout,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        t = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=tokens.device)
        h = self.encoder(self.embed(tokens) + self.pos[:t], mask=mask, is_causal=True)
        return self.head(self.norm(h))


def batches(data, batch_size, seq_len, generator):
    """Endless random windows of the text: (inputs, next-character targets), on the CPU."""
    while True:
        starts = torch.randint(0, len(data) - seq_len - 1, (batch_size,), generator=generator)
        window = torch.stack([data[s:s + seq_len + 1] for s in starts.tolist()])
        yield window[:, :-1], window[:, 1:]


def compilations() -> int:
    return met.counter_value("UncachedCompile") or 0


def train(args):
    torch.manual_seed(args.seed)
    device = xm.xla_device()
    chars = sorted(set(TEXT))
    data = torch.tensor([chars.index(c) for c in TEXT])
    model = TransformerLM(len(chars), args.seq_len, args.d_model, args.heads, args.layers,
                          args.dropout).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(  # linear warm-up, then cosine decay
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / args.steps)))
    loader = batches(data, args.batch_size, args.seq_len, torch.Generator().manual_seed(args.seed))

    model.train()
    first_loss = loss_value = None
    mark, mark_step = time.perf_counter(), 0
    for step in range(1, args.steps + 1):
        x, y = (t.to(device) for t in next(loader))
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        xm.optimizer_step(optimizer, barrier=True)
        schedule.step()
        if step % args.log_every == 0 or step in (1, args.steps):
            loss_value = loss.item()  # computed by the step's program: no new graph
            first_loss = first_loss if first_loss is not None else loss_value
            now = time.perf_counter()
            rate = (step - mark_step) / (now - mark)
            mark, mark_step = now, step
            print(f"step {step:5d}/{args.steps} | loss {loss_value:.4f} | {rate:7.2f} steps/s | "
                  f"lr {optimizer.param_groups[0]['lr']:.2e} | compilations {compilations()}",
                  flush=True)
    return model, chars, data, first_loss, loss_value


@torch.no_grad()
def generate(model, chars, data, seq_len, count):
    """Greedy continuation of the text's first window, one character at a time."""
    model.eval()
    device = next(model.parameters()).device
    window = data[:seq_len].clone()
    out = []
    for _ in range(count):
        logits = model(window.view(1, -1).to(device))
        nxt = int(logits[0, -1].argmax().item())
        out.append(chars[nxt])
        window = torch.cat([window[1:], torch.tensor([nxt])])
    return "".join(chars[i] for i in data[:seq_len].tolist()) + "|" + "".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--generate", type=int, default=60, help="characters to write at the end")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    model, chars, data, first, last = train(args)
    print(f"loss {first:.4f} -> {last:.4f}; compilations {compilations()}; "
          f"compile time {sum(v for _, v in met.metric_data('CompileTime')[2]) / 1e9:.1f}s")
    if args.generate:
        print("sample:", generate(model, chars, data, args.seq_len, args.generate))


if __name__ == "__main__":
    main()
