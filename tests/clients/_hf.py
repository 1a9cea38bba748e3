"""A tiny causal language model and its data for the transformers tests: built from a
config (nothing downloaded), trained on sequences that follow a fixed pattern, so the loss
falls quickly."""
import os

for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_var] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402

VOCAB, LENGTH = 32, 8


class PatternDataset(torch.utils.data.Dataset):
    """Sequences start + (0, 1, 2, ...) modulo VOCAB: each token follows from the previous.
    The first label is -100 (no target): then the Trainer's loss, which divides by the
    number of labels, is the model's own mean over its shifted targets."""

    def __init__(self, n, seed=0):
        starts = torch.randint(0, VOCAB, (n, 1), generator=torch.Generator().manual_seed(seed))
        self.ids = (starts + torch.arange(LENGTH)) % VOCAB
        self.labels = self.ids.clone()
        self.labels[:, 0] = -100

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=LENGTH, n_embd=16, n_layer=1, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def cpu_loss(model, dataset, batch_size):
    """Mean of the per-batch losses of `model` (a CPU model) over `dataset`."""
    model.eval()
    with torch.no_grad():
        losses = [model(input_ids=dataset.ids[i:i + batch_size], labels=dataset.labels[i:i + batch_size]).loss
                  for i in range(0, len(dataset), batch_size)]
    return float(torch.stack(losses).mean())


def fsdp_xla_trainer():
    """transformers 5.24's Trainer with FSDP-XLA (v1) wraps the model but never makes the
    optimizer (`_prepare_for_training` delays its creation, then skips it: the scheduler
    raises on None); this makes it from the wrapped model, right after the wrapping."""
    from transformers import Trainer

    class FsdpXlaTrainer(Trainer):
        def _wrap_model(self, model, training=True, dataloader=None):
            wrapped = super()._wrap_model(model, training, dataloader)
            if training and self.is_fsdp_xla_enabled and self.optimizer is None:
                self.create_optimizer(wrapped)
            return wrapped
    return FsdpXlaTrainer


def train(out_dir, epochs=2, optim="adamw_torch", samples=64, fsdp=False):
    """A Trainer that trains (`samples` sequences, batches of 8 per replica), evaluates and
    saves the tiny model; returns what a test checks. `fsdp`: with FSDP-XLA (FSDPv1, each
    GPT-2 block wrapped)."""
    import torch_xla.debug.metrics as met
    from transformers import Trainer, TrainingArguments
    args = TrainingArguments(
        output_dir=out_dir, per_device_train_batch_size=8, per_device_eval_batch_size=8,
        num_train_epochs=epochs, learning_rate=1e-2, logging_steps=2, save_strategy="no",
        report_to=[], seed=0, optim=optim, disable_tqdm=True, dataloader_drop_last=True,
        **({"fsdp": "full_shard", "fsdp_config": {"xla": True, "transformer_layer_cls_to_wrap": ["GPT2Block"]}}
           if fsdp else {}))
    trainer = (fsdp_xla_trainer() if fsdp else Trainer)(model=tiny_gpt2(), args=args, train_dataset=PatternDataset(samples),
                      eval_dataset=PatternDataset(32, seed=1))
    trainer.train()
    evaluation = trainer.evaluate()
    trainer.save_model(os.path.join(out_dir, "final"))
    return {"device": str(args.device), "world": args.world_size, "index": args.process_index,
            "model_device": str(next(trainer.model.parameters()).device),
            "model_class": type(trainer.model).__name__,
            "parameters": sum(p.numel() for p in trainer.model.parameters()),
            "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
            "eval_loss": evaluation["eval_loss"],
            "weights": {k: v.cpu().tolist() for k, v in trainer.model.state_dict().items()},
            "fallbacks": sorted(n for n in met.counter_names() if "::" in n and not n.startswith("xla::"))}


def replica(index, out_dir, fsdp=False):
    """A replica of torch_xla.launch: trains, writes its result as JSON."""
    import json
    result = train(out_dir, epochs=1, samples=128, fsdp=fsdp)  # 4 steps of 4 x 8
    with open(os.path.join(out_dir, f"replica{index}.json"), "w") as f:
        json.dump(result, f)
