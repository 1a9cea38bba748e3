"""Keeping torch.compile's frame evaluation out of the engine.

While a compiled function runs, dynamo sees every Python frame that starts outside its
graphs (the code around a graph break, autograd's backward pass) and tries to compile it.
Left alone it would compile the engine's own code, from `XLATensor.__torch_dispatch__` and
the Python kernels PyTorch calls down to the lowerings, into graphs of their own. The
engine's entry points are marked to run as written, with every frame they call.
"""
try:
    from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy
except ImportError:  # a PyTorch without per-code strategies: dynamo's own skip rules apply
    set_code_exec_strategy = None


def run_without_dynamo(*fns) -> None:
    """Frames of `fns` (functions, methods, partials), and the frames they call, are never
    traced by dynamo."""
    if set_code_exec_strategy is None:
        return
    strategy = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)
    for fn in fns:
        fn = getattr(fn, "func", fn)        # functools.partial
        fn = getattr(fn, "__func__", fn)    # classmethod, bound method
        set_code_exec_strategy(fn.__code__, strategy)
