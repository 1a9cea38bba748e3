"""`stablehlo.custom_call`s from PyTorch code, and the host-offloading annotations made of
them (`place_to_host`, `place_to_device`), as torch_xla has them."""
import torch

import torch_xla


def stablehlo_custom_call(args, call_target, output_shapes, output_dtypes, has_side_effect=False,
                          backend_config="", api_version=0, frontend_attributes=None):
    """A call of XLA's custom call target `call_target` on XLA tensors `args`, recorded in
    the graph: one tensor per (shape, dtype) of `output_shapes`/`output_dtypes` (the tensor
    itself for one output, else the list)."""
    outs = torch_xla._XLAC._xla_custom_call(list(args), call_target, list(output_shapes),
                                            list(output_dtypes), has_side_effect, backend_config,
                                            api_version, frontend_attributes or {})
    return outs[0] if len(output_shapes) == 1 else outs


def extract_custom_call_outputs_shape_dtype(n: torch.fx.Node):
    """The output shapes and dtypes of an FX node (from its `val` metadata), as
    `stablehlo_custom_call` takes them."""
    val = n.meta.get("val")
    if val is None:
        raise ValueError(f"node {n.name} has no 'val' metadata (trace it with torch.export)")
    if isinstance(val, torch.Tensor):
        return [val.shape], [val.dtype]
    if not all(isinstance(v, torch.Tensor) for v in val):
        raise ValueError(f"node {n.name} has outputs that are not tensors")
    return tuple(v.shape for v in val), tuple(v.dtype for v in val)


def _annotate_placement(t: torch.Tensor, placement: str) -> torch.Tensor:
    return stablehlo_custom_call([t], "annotate_device_placement", [t.shape], [t.dtype],
                                 has_side_effect=True,
                                 frontend_attributes={"_xla_buffer_placement": placement})


@torch.library.custom_op("xla::place_to_host", mutates_args=())
def place_to_host(t: torch.Tensor) -> torch.Tensor:
    """`t`, annotated to live in pinned host memory (XLA's host offloading)."""
    return _annotate_placement(t, "pinned_host")


@torch.library.custom_op("xla::place_to_device", mutates_args=())
def place_to_device(t: torch.Tensor) -> torch.Tensor:
    """`t`, annotated to live in device memory (back from `place_to_host`)."""
    return _annotate_placement(t, "device")


def _same_shape(t):
    return torch.empty_like(t)


def _gradient_through(ctx, grad):
    return grad


for _op in (place_to_host, place_to_device):
    _op.register_fake(_same_shape)
    _op.register_autograd(_gradient_through)
