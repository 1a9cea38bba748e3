"""A second dynamo backend, `dynamo_backend` (AOTAutograd's `aot_function` around the
bridge): `torch.compile(f, backend=dynamo_backend)` compiles the forward graph of ATen ops
into one XLA program, as the `openxla` backend does."""
from functorch.compile import aot_function, make_boxed_func

from torch_xla._dynamo import dynamo_bridge


def _forward(gm, example_args):
    return make_boxed_func(dynamo_bridge.extract_compiled_graph(gm, example_args))


def dynamo_backend(fx, args):
    return aot_function(fx, fw_compiler=_forward)
