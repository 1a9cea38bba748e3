"""torch_xla.distributed.spmd.debugging: a tensor's sharding drawn as a table (`rich`).

The table has one cell per block of the tensor's first two dimensions, labelled with the
device kind and the device holding the block, or the list of devices holding it where it
is replicated (`{replicated}`, `last_tile_dim_replicate`, or dimensions past the second).
"""
import re

import numpy as np

import torch_xla
import torch_xla.runtime as xr

try:
    import rich.align
    import rich.box
    import rich.console
    import rich.padding
    import rich.style
    import rich.table
except ImportError:  # the tables need rich; the rest of the package does not
    rich = None

_TILED = re.compile(r"\{devices=\[([\d,]+)\]([\d,]+)( last_tile_dim_replicate)?\}")
_MAXIMAL = re.compile(r"\{maximal device=(\d+)\}")


def _blocks(sharding: str) -> list:
    """Rows of cells: each the device (an int) or the devices (a list) holding that block of
    the first two dimensions."""
    if sharding in ("", "{replicated}"):
        return [[list(range(xr.global_runtime_device_count()))]]
    maximal = _MAXIMAL.fullmatch(sharding)
    if maximal:
        return [[int(maximal.group(1))]]
    tiled = _TILED.fullmatch(sharding)
    if tiled is None:
        raise ValueError(f"sharding {sharding!r} is not organized as expected: "
                         "'{replicated}', '{maximal device=N}' or '{devices=[...]...}'")
    dims = [int(d) for d in tiled.group(1).split(",")]
    ids = np.array([int(d) for d in tiled.group(2).split(",")])
    if ids.size != int(np.prod(dims)):
        raise ValueError(f"sharding {sharding!r} is not organized as expected: "
                         f"{ids.size} devices for a tile assignment of {dims}")
    replicate = bool(tiled.group(3))  # the last dimension lists each tile's replicas
    tile_dims = dims[:-1] if replicate else dims
    grid = (tile_dims + [1, 1])[:2]
    holders = ids.reshape(grid + [-1])  # row-major: a block's devices are contiguous
    replicated = holders.shape[2] > 1 or replicate
    return [[holders[i, j].tolist() if replicated else int(holders[i, j, 0])
             for j in range(grid[1])] for i in range(grid[0])]


def visualize_sharding(sharding: str, use_color: bool = True, scale: float = 1.,
                       min_width: int = 9, max_width: int = 80):
    """Prints, and returns as a `rich` table, sharding `sharding` (as
    `torch_xla._XLAC._get_xla_sharding_spec` gives it) over its first two dimensions.
    `scale` and `min_width` are accepted for torch_xla's signature (cells take their
    label's size)."""
    if rich is None:
        raise ValueError("`visualize_sharding` requires `rich` to be installed.")
    blocks = _blocks(sharding)
    print(f"Visualizing {sharding} (showing up to the first two dimensions)")
    console = rich.console.Console(width=max_width)
    use_color = use_color and console.color_system is not None
    table = rich.table.Table(show_header=False, show_lines=not use_color, padding=0,
                             highlight=not use_color, pad_edge=False,
                             box=rich.box.SQUARE if not use_color else None)
    kind = xr.device_type()
    for row in blocks:
        table.add_row(*[
            rich.padding.Padding(rich.align.Align(f"{kind} {holder}", "center",
                                                  vertical="middle"),
                                 (1, 1, 1, 1), style=rich.style.Style(bgcolor=None, color=None))
            for holder in row])
    console.print(table, end="\n\n")
    return table


def visualize_tensor_sharding(t, **kwargs):
    """`visualize_sharding` of XLA tensor `t`'s sharding (an XLAShardedTensor's global
    tensor's)."""
    from torch_xla.distributed.spmd import XLAShardedTensor
    if isinstance(t, XLAShardedTensor):
        t = t.global_tensor
    return visualize_sharding(torch_xla._XLAC._get_xla_sharding_spec(t), **kwargs)
