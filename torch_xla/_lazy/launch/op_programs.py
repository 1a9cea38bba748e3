"""Eager mode's table of one-op programs (`trace/eager`, op by op): the program an op ran as,
found again by the op's key (its node's type, its inputs' signatures) and launched at once on
new inputs, without a node, a walk or a graph look-up.

A hit skips the walk and the graph look-up a step's program takes, and (`eager.relaunch`)
the node: a launch is most of an eager op's time. The table holds weak references: the
programs live in the runner's cache alone, and one it dropped is compiled again.
"""
from . import graph_program
from .program_tables import ProgramTable
from ..runtime import runner

# op key -> the program, and which input each of its arguments is
_table = ProgramTable()


def launch(key, inputs, scalars, device):
    """The outputs of the op's cached program run on `inputs` and `scalars`; None if there
    is none, or its parameters are shared where `scalars` differ."""
    found = _table.get(key)
    if found is None or not graph_program.cached(found[0]):
        return None
    program, picks = found
    if len(scalars) > 1 and not program.fits(scalars):
        return None
    return runner.execute(runner.reused(program), (), tuple([inputs[i].data for i in picks]),
                          program.pack_on(scalars, device) if scalars else (),
                          timed_as="EagerOpExecuteTime", analysed=False)


def remember(key, node, program) -> None:
    """Keeps `program`, which ran `node`'s outputs, for the next call of the op."""
    if program.n_donated or program.roots != tuple((0, i) for i in range(len(node.avals))):
        return
    picks = _argument_inputs(node, program)
    if picks is None:
        return
    _table.put(key, program, picks)


def _argument_inputs(node, program):
    """For each argument of `program` (its leaves, in order), the position of that leaf in
    `node`'s inputs; None if the plan reads them otherwise than as `node`'s inputs."""
    refs = program.plan[0][2]
    if len(refs) != len(node.inputs) or any(p != -1 for p, _ in refs):
        return None
    picks = {}
    for position, (_, leaf) in enumerate(refs):
        picks.setdefault(leaf, position)
    if sorted(picks) != list(range(len(picks))):
        return None
    return tuple(picks[i] for i in range(len(picks)))
