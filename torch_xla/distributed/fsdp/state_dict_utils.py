"""Sharded FSDP checkpoints into one state dict of the unwrapped module.

Every replica saves `{"model": fsdp.state_dict(), "shard_metadata": fsdp.get_shard_metadata()}`;
a shard's key holds `_fsdp_shard` (`<instance path>.<shard name>`), and its metadata gives
the parameter's original name and size. Concatenating the replicas' shards (in rank order),
cutting the padding and restoring the shape gives the parameter; buffers come from rank 0,
cast back to their original dtype; the wrappers' names leave the keys.
"""
import glob
import pickle
from collections import OrderedDict

import torch

_WRAPPER_NAMES = ("_fsdp_wrapped_module.", "_fpw_module.")


def _unwrapped(name: str) -> str:
    for part in _WRAPPER_NAMES:
        name = name.replace(part, "")
    return name


def _split_shard_key(name):
    """(instance path, shard name) of a shard's key, or None for any other entry."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_fsdp_shard"):
            return ".".join(parts[:i]), ".".join(parts[i:])
    return None


def _full_param(shards, orig_size):
    """Flattened shards (the default) or shards of dim 0 (`shard_param_on_dim_0`)."""
    full = torch.cat(shards, dim=0)
    if full.dim() == 1:
        return full[:torch.Size(orig_size).numel()].view(*orig_size)
    return full[:orig_size[0]]


def consolidate_sharded_state_dicts(state_dict_list, shard_metadata):
    """The unwrapped module's state dict from every rank's `model.state_dict()` (in rank
    order) and any rank's `model.get_shard_metadata()`."""
    if len(state_dict_list) != shard_metadata["world_size"]:
        raise ValueError(f"{len(state_dict_list)} state dicts for a world of {shard_metadata['world_size']}")
    if shard_metadata.get("flatten_info"):
        raise NotImplementedError("consolidating flattened parameters (flatten_parameters=True) is not supported")
    buffer_info = shard_metadata.get("buffer_info", {})
    full = OrderedDict()
    for name, value in state_dict_list[0].items():
        split = _split_shard_key(name)
        if split is None:
            if name in buffer_info:
                value = value.to(buffer_info[name]["_orig_dtype"])
            full[_unwrapped(name)] = value
            continue
        prefix, shard_name = split
        info = shard_metadata["shard_info"][prefix][shard_name]
        param = _full_param([sd[name] for sd in state_dict_list], info["_orig_size"])
        full[_unwrapped(f"{prefix}.{info['_orig_name']}" if prefix else info["_orig_name"])] = param
    return full


def _load_checkpoint(path):
    """A replica's checkpoint file, read as `torch.load(weights_only=True)` reads (torch_xla
    reads it whole, so that a file from elsewhere can run any code)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise pickle.UnpicklingError(
            f"{path} is refused: it holds more than tensors, containers, numbers, strings and "
            "the classes allowed to load (torch.load's weights_only rules); if you trust it, "
            f"consolidate within torch.serialization.safe_globals([the classes named below])\n{e}") from e


def consolidate_sharded_model_checkpoints(ckpt_prefix, ckpt_suffix="*.pth", save_path="", save_model=True):
    """Loads the files matching `ckpt_prefix + ckpt_suffix` (each a dict with "model" and
    "shard_metadata"), consolidates them and, with `save_model`, saves `{"model": ...}` to
    `save_path` (default `ckpt_prefix + "_consolidated.pth"`). Returns the state dict and
    the path saved to (None without `save_model`). The files are read as
    `torch.load(weights_only=True)` reads: objects of the user's own classes saved beside
    the model load only within `torch.serialization.safe_globals([...])`."""
    pattern = ckpt_prefix + ckpt_suffix
    paths = glob.glob(pattern)
    if not paths:
        raise FileNotFoundError(f"Cannot find any files matching {pattern}.")
    print(f"found {len(paths)} checkpoint files in {pattern}")
    ckpts = sorted(((_load_checkpoint(p), p) for p in paths),
                   key=lambda c: c[0]["shard_metadata"]["rank"])
    for rank, (ckpt, path) in enumerate(ckpts):
        meta = ckpt["shard_metadata"]
        if meta["world_size"] != len(ckpts) or meta["rank"] != rank:
            raise ValueError(f"{path} is rank {meta['rank']} of {meta['world_size']}, but {len(ckpts)} files "
                             f"match {pattern}: check for missing or unexpected files")
    state_dict = consolidate_sharded_state_dicts([c["model"] for c, _ in ckpts], ckpts[0][0]["shard_metadata"])
    saved = None
    if save_model:
        saved = save_path or ckpt_prefix + "_consolidated.pth"
        torch.save({"model": state_dict}, saved)
        print(f"saved consolidated model to {saved}")
    return state_dict, saved
