"""Runs one OpInfo entry through torch.export and `exported_program_to_stablehlo`.

The entry's first float32 sample becomes a module whose inputs are the sample's tensors (the
other arguments are constants of the module); it is exported with `torch.export` and to
StableHLO, and the module's results on the XLA device are compared with the CPU's (values
and dtypes; shapes and dtypes only for random ops). An entry ends as `pass`, `none`
(torch.export itself cannot export it: data-dependent shapes, no tensor input...), `fail` (the
StableHLO export or run raised) or `wrong` (a different result: a bug).
"""
import warnings

import torch
from torch.utils import _pytree as pytree

from torch_xla import stablehlo

from .catalog import is_random
from .harness import Mismatch, _float64_forward, _loosen, _tolerances, compare
from .tolerances import widen


class _Call(torch.nn.Module):
    """op(*args, **kwargs) with the sample's tensors as the module's inputs."""

    def __init__(self, op, sample):
        super().__init__()
        self.op = op
        leaves, self.spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        self.slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        self.leaves = leaves

    def tensors(self):
        return tuple(self.leaves[i].detach() for i in self.slots)

    def forward(self, *tensors):
        leaves = list(self.leaves)
        for i, t in zip(self.slots, tensors):
            leaves[i] = t
        x, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.op(x, *args, **kwargs)


def export_entry(op):
    """(status, detail) of the entry's first float32 sample."""
    samples = iter(op.sample_inputs("cpu", torch.float32))
    sample = next(samples, None)
    if hasattr(samples, "close"):
        samples.close()  # now, not while a later export traces
    if sample is None:
        return "none", "no float32 sample"
    module = _Call(op, sample)
    tensors = module.tensors()
    if not tensors:
        return "none", "no tensor input"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.no_grad():
                expected = module(*tensors)
                program = torch.export.export(module, tensors, strict=False)
        except Exception as e:  # noqa: BLE001 - torch.export's limits are not ours
            return "none", f"torch.export: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
        try:
            exported = stablehlo.exported_program_to_stablehlo(program)
            actual = exported(*tensors)
        except Exception as e:  # noqa: BLE001
            return "fail", f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    expected, values = _loosen(op, sample, expected), not is_random(op)
    tol = _tolerances(op, torch.float32)
    try:
        try:
            compare(actual, expected, values=values, tol=tol)
        except Mismatch:  # float64 on the CPU arbitrates, as for the lazy path
            ref = _float64_forward(op, widen((sample.input, sample.args, sample.kwargs)))
            if ref is None:
                raise
            compare(actual, expected, values=values, tol=tol, ref=ref)
    except Mismatch as e:
        return "wrong", str(e)[:300]
    return "pass", ""


def main():
    """Every OpInfo entry: prints the entries that do not pass and the totals."""
    import collections

    from .catalog import entries
    totals = collections.Counter()
    for eid, op in entries():
        status, detail = export_entry(op)
        totals[status] += 1
        if status != "pass":
            print(f"{eid}\t{status}\t{detail}", flush=True)
    print(dict(totals))


if __name__ == "__main__":
    main()
