"""torch_xla.core.xla_op_registry: PyTorch ops defined by an XLA lowering function.

In torch_xla the lowering is written with its Python XLA op builder (`xla_builder.Op`,
XlaBuilder calls). This package has no XlaBuilder: jax builds its programs, so an op
registered here refuses to run, naming the replacement: the same computation as a jax
function, run on XLA tensors by `torch_xla.core.xla_builder.call_jax`.
"""


class Op:
    """An op named `name` whose lowering is `opfn`, written with XLA's Python op builder."""

    def __init__(self, name, opfn):
        self._name = name
        self._opfn = opfn

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(
            f"xla_op_registry op {self._name!r}: lowerings written with XLA's Python op builder "
            "(xla_builder.Op) cannot run here (this package builds programs with jax); write "
            "it as a jax function and call torch_xla.core.xla_builder.call_jax(fn, args)")


def register(name, opfn) -> Op:
    return Op(name, opfn)
