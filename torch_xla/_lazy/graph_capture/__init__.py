"""Graph capture: a whole FX graph of ATen ops lowered at once, instead of op by op.

`fx_lowering` turns a functional ATen graph (AOTAutograd's forward and backward graphs, a
dynamo graph traced down to ATen, a `torch.export` program) into one jax function with the
lazy path's lowerings; `decompose` brings graphs down to ops that have lowerings.
`compiled` runs such a function as one XLA program on XLA tensors (the dynamo backends);
`export` turns an exported program into a StableHLO module (jax.export).

Called by `_lazy/__init__` and the public package. Modules here may import the folders
below: trace, step, inspect, launch, lowering, graph, runtime, base.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("compiled", "decompose", "export")
