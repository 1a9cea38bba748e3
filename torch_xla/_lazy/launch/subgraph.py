"""A part of the lazy graph as a plan that replays inside another program.

`extract(roots, stop)` walks the graph behind `roots` down to the values where `stop(v)`
holds (and to buffers), and writes what lies between as a plan in `graph_program`'s form:
the values it stopped at become its inputs, the nodes' dynamic scalars its scalars. A
manual region (`_lazy/launch/manual_regions`) and a traced function (`_lazy/trace/traced`) are such plans;
`run` replays one on jax values (tracers of the enclosing program).
"""
from . import graph_program


def _order(roots, stop):
    """The nodes between `roots` and the values where the walk stops, in topological order."""
    order, seen = [], set()
    stack = [(v.node, False) for v in reversed(roots) if v.node is not None and not stop(v)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((i.node, False) for i in reversed(node.inputs)
                     if i.node is not None and not stop(i) and id(i.node) not in seen)
    return order


def extract(roots, stop):
    """(plan, root refs, inputs, scalars): the graph from the values where `stop(v)` holds
    (and buffers), in first-use order the plan's `inputs`, to `roots`."""
    inputs, input_pos, positions, plan, scalars = [], {}, {}, [], []

    def ref(x):
        if x.node is None or stop(x):
            if id(x) not in input_pos:
                input_pos[id(x)] = len(inputs)
                inputs.append(x)
            return (-1, input_pos[id(x)])
        return (positions[id(x.node)], x.index)

    for node in _order(roots, stop):
        refs = tuple(ref(x) for x in node.inputs)
        s0 = len(scalars)
        scalars.extend(node.scalars)
        positions[id(node)] = len(plan)
        plan.append((node.op, node.template, refs, s0, len(scalars), node.avals))
    root_refs = tuple(ref(v) for v in roots)
    return tuple(plan), root_refs, inputs, scalars


def run(plan, root_refs, inputs, scalars):
    """The roots of `plan` computed from jax values `inputs` and `scalars`."""
    return graph_program.Program(plan, root_refs, 0, ()).run_traced((), tuple(inputs), list(scalars))
