"""The walk of one `mark_step` through the engine's rooms (ARCHITECTURE.md, "One mark_step"):
from `xm.mark_step` to the program's launch each room is entered once, down the stages."""
import sys

import torch

import torch_xla.core.xla_model as xm
from tests.conftest import compiles
from tests.test_layering import FOLDERS, _folder

# What every room may call (the data model, the services below the runner, settings, the
# program tables), and the switch between the kinds of program (`launch.program_kinds`, a
# call through to the room of the kind chosen): these are left out of the walk.
_SERVICES = {"torch_xla._lazy." + m for m in (
    "graph.ir", "graph.tensor", "runtime.pjrt", "base.counters", "base.caches", "launch.donation",
    "base.frames", "base.user_code", "runtime.device_info", "step.deferred_checks",
    "lowering.precision", "base.scopes", "runtime.trace_spans", "runtime.graph_analysis",
    "launch.program_kinds", "launch.program_tables")} | {"torch_xla.utils.utils"}
_ROOMS = ["torch_xla.core.xla_model", "torch_xla.torch_xla", "torch_xla._lazy.step.execution",
          "torch_xla._lazy.launch.graph_cache", "torch_xla._lazy.launch.graph_program", "torch_xla._lazy.runtime.runner",
          "torch_xla.utils.closures"]  # (the step closures, once the program is launched)


def _rooms_entered(fn):
    """The package's modules `fn()` enters, in order, each run of calls into one counted once."""
    entered = []

    def trace(frame, event, arg):
        module = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if module.startswith("torch_xla") and module != caller and module not in _SERVICES \
                and (not entered or entered[-1] != module):
            entered.append(module)
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return entered


def test_a_cached_step_enters_each_room_once_down_the_stages(dev):
    w = torch.randn(4, 4, device=dev)
    for _ in range(3):
        w = (w @ w.t()).relu() * 0.5 + w
        xm.mark_step()
    w = (w @ w.t()).relu() * 0.5 + w
    n = compiles()
    rooms = _rooms_entered(xm.mark_step)
    assert compiles() == n  # the step's program was cached
    assert rooms == _ROOMS, rooms
    engine = [FOLDERS.index(_folder(m)) for m in rooms if m.startswith("torch_xla._lazy")]
    assert engine == sorted(engine)
