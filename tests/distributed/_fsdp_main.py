"""Run in a subprocess with CPU_NUM_DEVICES=4: FSDPv1 and ZeRO-1 on 4 DataParallel threads
(each a replica with its quarter of every global batch) against one model on the CPU
trained on the whole batches. Prints one line per check that passed."""
import copy
import functools

import torch
import torch.nn as nn

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.data_parallel as dp
import torch_xla.runtime as xr
from torch_xla.distributed.fsdp import (XlaFullyShardedDataParallel as FSDP, checkpoint_module,
                                        consolidate_sharded_state_dicts, transformer_auto_wrap_policy)
from torch_xla.distributed.zero_redundancy_optimizer import ZeroRedundancyOptimizer
from tests.compare import assert_same

WORLD, BATCH, STEPS = 4, 8, 3


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(width), nn.Linear(width, width)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.norm(x)))


class Net(nn.Module):
    """Embedding, two blocks, and a head tied to the embedding."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(11, 6)
        self.blocks = nn.Sequential(Block(6), Block(6))
        self.head = nn.Linear(6, 11, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.blocks(self.embed(ids)))


_NET = Net()


def batches():
    g = torch.Generator().manual_seed(3)
    return [(torch.randint(0, 11, (BATCH, 5), generator=g), torch.randint(0, 11, (BATCH, 5), generator=g))
            for _ in range(STEPS)]


def loss_fn(logits, target):
    return nn.functional.cross_entropy(logits.reshape(-1, 11), target.reshape(-1))


def reference(opt_cls=torch.optim.SGD, clip=None, **opt_args):
    """Losses and final state dict of the model on the CPU over the whole batches."""
    model = Net()
    opt = opt_cls(model.parameters(), **opt_args)
    losses = []
    for ids, target in batches():
        opt.zero_grad()
        loss = loss_fn(model(ids), target)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
    return losses, model.state_dict()


def _threads(fn):
    devices = [f"xla:{i}" for i in range(WORLD)]
    return dp.DataParallel(nn.Identity(), device_ids=devices)(
        lambda model, loader, device, context: fn(device), [0] * WORLD)


def _fsdp_replica(device, wrap, clip=None, accumulate=False):
    """One replica's FSDP training: its quarter of each batch; the global loss (mean of
    the replicas' means) read each step; the shards' state dict and metadata at the end."""
    r = xr.global_ordinal()
    model = wrap(copy.deepcopy(_NET))  # built once: threads drawing initial weights would interleave
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    losses, compiles = [], []
    for ids, target in batches():
        ids, target = ids.chunk(WORLD)[r].to(device), target.chunk(WORLD)[r].to(device)
        opt.zero_grad()
        if accumulate:  # two halves, the first under no_sync: the same gradient
            with model.no_sync():
                first = loss_fn(model(ids[:1]), target[:1]) / 2
                first.backward()
            second = loss_fn(model(ids[1:]), target[1:]) / 2
            second.backward()
            loss = first.detach() + second.detach()
        else:
            loss = loss_fn(model(ids), target)
            loss.backward()
        if clip:
            model.clip_grad_norm_(clip)
        opt.step()
        xm.mark_step()
        losses.append(xm.all_reduce(xm.REDUCE_SUM, loss.detach(), scale=1.0 / WORLD))
        compiles.append(met.counter_value("UncachedCompile"))
    state = xm._maybe_convert_to_cpu(model.state_dict())
    return [l.item() for l in losses], state, model.get_shard_metadata(), compiles


def _assert_matches(results, expected, tag, **tol):
    losses, ref_state = expected
    states = [s for _, s, _, _ in results]
    full = consolidate_sharded_state_dicts(states, results[0][2])
    for got_losses, _, meta, _ in results:
        assert_same(torch.tensor(got_losses), torch.tensor(losses), **tol, device="cpu")
    assert set(full) == set(ref_state) - {"head.weight"}, (tag, sorted(full))  # tied: saved once
    for name, value in full.items():
        assert_same(value, ref_state[name], **tol, path=f"{tag} {name}", device="cpu")
    print("ok", tag)


def _zero_replica(device):
    """ZeRO-1 (AdamW, the default clipping to norm 1) on the replica's quarter of each batch;
    its state dict then loads into a fresh optimizer that steps alike."""
    r = xr.global_ordinal()
    model = copy.deepcopy(_NET).to(device)
    opt = ZeroRedundancyOptimizer(model.parameters(), torch.optim.AdamW, lr=0.05, save_master_weights=True)
    losses, compiles = [], []
    for ids, target in batches():
        ids, target = ids.chunk(WORLD)[r].to(device), target.chunk(WORLD)[r].to(device)
        opt.zero_grad()
        loss = loss_fn(model(ids), target)
        loss.backward()
        opt.step()
        xm.mark_step()
        losses.append(xm.all_reduce(xm.REDUCE_SUM, loss.detach(), scale=1.0 / WORLD))
        compiles.append(met.counter_value("UncachedCompile"))
    shard_size = opt.base_optimizer.param_groups[0]["params"][0].numel()
    state = opt.state_dict()
    again = ZeroRedundancyOptimizer(model.parameters(), torch.optim.AdamW, lr=0.05)
    again.load_state_dict(state)
    moments = [again.base_optimizer.state[s]["exp_avg"].cpu() for s in again.base_optimizer.param_groups[0]["params"]]
    expected = [st["exp_avg"].cpu() for st in state["base_state"].values()]
    assert_same(moments, expected, device="cpu")
    return [l.item() for l in losses], xm._maybe_convert_to_cpu(model.state_dict()), shard_size, compiles


def main():
    sgd = dict(lr=0.5, momentum=0.9)
    expected = reference(**sgd)
    blocks = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    # the root alone; blocks wrapped (resharded after forward); blocks checkpointed
    _assert_matches(_threads(lambda d: _fsdp_replica(d, FSDP)), expected, "root")
    nested = _threads(lambda d: _fsdp_replica(d, lambda m: FSDP(m, auto_wrap_policy=blocks)))
    _assert_matches(nested, expected, "nested")
    compiles = nested[0][3]
    assert compiles[-1] == compiles[-2], compiles  # the steady loop compiles nothing new
    print("ok compiles", compiles)
    ckpt = lambda m, *a, **k: FSDP(checkpoint_module(m), *a, **k)  # noqa: E731
    _assert_matches(_threads(lambda d: _fsdp_replica(
        d, lambda m: FSDP(m, auto_wrap_policy=blocks, auto_wrapper_callable=ckpt))), expected, "checkpointed")
    _assert_matches(_threads(lambda d: _fsdp_replica(d, lambda m: FSDP(m, shard_param_on_dim_0=True),
                                                     clip=0.05)),
                    reference(clip=0.05, **sgd), "dim0+clip")
    _assert_matches(_threads(lambda d: _fsdp_replica(d, lambda m: FSDP(m, auto_wrap_policy=blocks),
                                                     accumulate=True)), expected, "no_sync")
    losses, ref_state = reference(torch.optim.AdamW, clip=1.0, lr=0.05)
    for got_losses, state, shard_size, compiles in _threads(_zero_replica):
        assert_same(torch.tensor(got_losses), torch.tensor(losses), device="cpu")
        assert_same(state, ref_state, device="cpu")
        assert shard_size == 3 * 6, shard_size  # the embedding: 11 rows padded to 12, 3 each
        assert compiles[-1] == compiles[-2], compiles
    print("ok zero1", compiles)


if __name__ == "__main__":
    main()
