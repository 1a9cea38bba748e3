"""The lazy engine behind torch_xla: see ARCHITECTURE.md for how the parts fit.

Importing it installs the engine into PyTorch: the ops with engine meaning into the
dispatch entry, the collectives as ops (`xla::all_reduce`...), the XLA device's hooks, the
fast in-place kernels, torch.save/load, module conversion that keeps tied weights tied,
packed sequences, einsum as one op, the CPU's checks of `out=` arguments, XLA tensors' DLPack methods,
the configuration of PyTorch's `openxla` dynamo backend, and fake tensors' fallback for ops
without a meta kernel on XLA tensors.
"""
# trace.engine_ops and trace.collective_ops register themselves on import
from .base import counters  # noqa: F401
from .hooks import (device, dlpack, einsum, inplace, module_conversion,  # noqa: F401
                    out_arguments, packed_sequences, serialization)
from .trace import engine_ops, op_rules, traced  # noqa: F401
from .graph_capture import dynamo_config, fake_fallback
from .trace import collective_ops  # noqa: F401

_installed = []


def install() -> None:
    """Installs the engine into PyTorch, once (counted as `RegisterXLAFunctions`, as torch_xla
    counts the registration of its kernels); later calls find it installed."""
    if _installed:
        return
    device.install()
    inplace.install()
    serialization.install()
    dynamo_config.install()
    fake_fallback.install()
    module_conversion.install()
    packed_sequences.install()
    einsum.install()
    dlpack.install()
    out_arguments.install()
    op_rules.set_kernel_tracer(traced.trace)  # exports trace ops' own kernels through dispatch
    counters.count("RegisterXLAFunctions")
    _installed.append(True)


install()
