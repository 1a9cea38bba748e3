"""PT_XLA_DEBUG / PT_XLA_DEBUG_LEVEL: torch_xla's analysis of each graph compiled and run.

Level 1 writes, for each program compiled, a "Compilation Analysis" block, then a "Post
Compilation Analysis" block (its sizes, from XLA's memory analysis); level 2, and
PT_XLA_DEBUG=1 (every level), also an "Execution Analysis" block for each run of a lazy
graph or of a dynamo graph. A block names the cause (what asked for the graph: a step's end
by torch_xla.sync, by a profiler StepTrace region or by the parallel loader, torch_xla.compile,
dynamo; otherwise a read of a tensor's value), the graph's name, hash, number of inputs and
outputs, and the Python frames outside the engine that triggered it (PT_XLA_DEBUG_MAX_FRAME of
them, 8 by default). The layout is torch_xla's, line for line, so what parses its output
parses ours; a compilation's cause also says why the program is new against the closest one
compiled before, and the user's line (`compile_explanation`).

The blocks go to PT_XLA_DEBUG_FILE (appended) or else stderr, from the local master process
only. Eager ops are not analysed (their callers give no cause).
"""
import contextlib
import os
import sys
import threading

from . import pjrt
from ..base import user_code

RULE = "=" * 80
DASHES = "-" * 80
READ_CAUSE = "most likely user code trying to access tensor value before torch_xla.sync"
DYNAMO_COMPILE = "dynamo is compiling a FX graph to HLO"
DYNAMO_RUN = "dynamo is executing a compiled program"

_local = threading.local()  # .reasons: the (cause, graph name) pairs open on this thread


class Explanation:
    """What the analysis of a program says of it: its number of inputs and outputs
    (`graph_io`), whether dynamo made it, and `why_new()`, the lines saying why it is new,
    which the program keeps only until it is compiled (`release`: they may hold the graph,
    and with it the buffers of its inputs)."""
    __slots__ = ("graph_io", "dynamo", "_why_new")

    def __init__(self, graph_io, why_new=None, dynamo=False):
        self.graph_io, self.dynamo, self._why_new = graph_io, dynamo, why_new

    def why_new(self) -> list:
        return self._why_new() if self._why_new is not None else []

    def release(self) -> None:
        self._why_new = None


def level() -> int:
    """PT_XLA_DEBUG_LEVEL, else 100 under PT_XLA_DEBUG=1, else 0."""
    given = os.environ.get("PT_XLA_DEBUG_LEVEL")
    if given not in (None, "", "-1"):
        return int(given)
    return 100 if os.environ.get("PT_XLA_DEBUG", "").upper() in ("1", "ON", "YES", "TRUE", "Y") else 0


@contextlib.contextmanager
def reason(cause: str, name: str = ""):
    """The graphs run inside are run for `cause` (and named `name`); an enclosing reason
    wins (a StepTrace region's end calls torch_xla.sync)."""
    reasons = _local.__dict__.setdefault("reasons", [])
    reasons.append((cause, name))
    try:
        yield
    finally:
        reasons.pop()


def _current():
    reasons = getattr(_local, "reasons", None)
    return reasons[0] if reasons else (READ_CAUSE, "")


def _write(text: str) -> None:
    if pjrt.local_process_index() != 0:
        return
    path = os.environ.get("PT_XLA_DEBUG_FILE")
    if path:
        with open(path, "a") as f:
            f.write(text)
    else:
        print(text, end="", file=sys.stderr, flush=True)


def _frames() -> list:
    lines = user_code.stack_lines()
    most = int(os.environ.get("PT_XLA_DEBUG_MAX_FRAME", 8))
    return lines[:most] + (["  .........."] if len(lines) > most else [])


def graph_hash(executable) -> str:
    return f"{hash(executable.key if executable.key is not None else id(executable)) & (2**64 - 1):016x}"


def _block(prefix, heading, cause_lines, executable, name) -> str:
    n_inputs, n_outputs = executable.analysis.graph_io
    lines = [RULE, heading, *cause_lines, "Graph Info: "]
    if name:
        lines.append(f"  Graph Name: {name}")
    lines += [f"  Graph Hash: {graph_hash(executable)}", f"  Number of Graph Inputs: {n_inputs}",
              f"  Number of Graph Outputs: {n_outputs}", "Python Frame Triggered Execution: ",
              *_frames(), DASHES, RULE]
    return "\n" + "".join(f"{prefix}{line}\n" for line in lines)


def compiled(executable) -> None:
    """After `executable` was compiled: its Compilation and Post Compilation Analysis (why
    it is a new program indented under the cause)."""
    explanation = executable.analysis
    cause, name = (DYNAMO_COMPILE, "") if explanation.dynamo else _current()
    causes = [f"  {cause}"] + [f"  {line}" for line in explanation.why_new()]
    text = _block("Compilation Analysis: ", "Compilation Cause", causes, executable, name)
    _write(text + _post_compilation(executable.compiled))


def _post_compilation(compiled) -> str:
    stats = compiled.memory_analysis()

    def gb(field):
        size = getattr(stats, field, None)
        return "Unknown " if size is None else f"{size / 1024 ** 3:.6f}"
    prefix = "Post Compilation Analysis: "
    lines = [RULE, f"Graph input size: {gb('argument_size_in_bytes')} GB",
             f"Graph output size: {gb('output_size_in_bytes')} GB",
             f"Aliased Input size: {gb('alias_size_in_bytes')} GB",
             f"Intermediate tensor size: {gb('temp_size_in_bytes')} GB",
             f"Compiled program size: {gb('generated_code_size_in_bytes')} GB", DASHES, RULE]
    return "\n" + "".join(f"{prefix}{line}\n" for line in lines)


def executed(executable) -> None:
    """Before a run of `executable` (level 2 and up): its Execution Analysis."""
    cause, name = (DYNAMO_RUN, "") if executable.analysis.dynamo else _current()
    _write(_block("Execution Analysis: ", "Execution Cause", [f"  {cause}"], executable, name))
