"""StableHLO composites: `torch.ops.xla.mark_tensor` marks the inputs and outputs of a pattern
(`torch_xla.experimental.mark_pattern_utils.StableHLOCompositeBuilder`); a program holding marks
lowers each marked region as one `jax.lax.composite`, a `stablehlo.composite` op named after
the pattern, with its attributes, whose decomposition is the region. XLA inlines it when the
program runs; an exported module keeps it for a converter that knows the pattern.

Both program builders go through `run_steps`: the lazy graph's (`graph_program`) and the FX
graph's (`graph_capture.fx_lowering`), each describing its steps. A region is what lies between
a pattern's input marks and its output marks; a value it reads from outside (a program input,
a dynamic scalar, a value computed before the pattern) becomes one more operand of the
composite, after the marked ones. Nested patterns are not supported
(nor by torch_xla).
"""
import collections
import heapq
import re
from typing import NamedTuple

import jax
import numpy as np

from . import lower_on_demand


@lower_on_demand("xla::mark_tensor", static_scalars=True)  # attributes are constants
def mark_tensor(x, name, pos, id, is_input, attr=None):
    """Outside the making of its composite (`run_steps`), a mark is its tensor."""
    return x


class Mark(NamedTuple):
    name: str
    pos: int
    id: str
    is_input: bool
    attr: tuple


def mark_of(lowering, args, kwargs):
    """The Mark a step of `lowering` on `args`/`kwargs` (its op's arguments) makes, or None."""
    if lowering is None or lowering.fn is not mark_tensor:
        return None
    values = dict(zip(Mark._fields, args[1:]))
    values.update(kwargs)
    values.setdefault("attr", None)
    return Mark(**{f: values[f] for f in Mark._fields})


class _Pattern:
    """One marked pattern instance: its marks by position, its region and attributes."""

    def __init__(self, name):
        self.name = name
        self.inputs, self.outputs = {}, {}  # position -> step
        self.attr = None
        self.region = []                    # the steps between, in the program's order

    def add(self, step, mark):
        side = self.inputs if mark.is_input else self.outputs
        if mark.pos in side:
            raise RuntimeError(f"composite {self.name!r} (id {mark.id!r}): two "
                               f"{'inputs' if mark.is_input else 'outputs'} marked at position {mark.pos}")
        side[mark.pos] = step
        if not mark.is_input and mark.attr is not None:
            self.attr = dict(mark.attr)

    def find_region(self, order, parents):
        """The steps on a path from an input mark to an output mark; returns the steps outside
        it that the region or the outputs read (besides the input marks)."""
        inputs = set(self.inputs.values())
        below = set(inputs)  # the input marks and every step depending on one
        for step in order:
            if step not in below and any(p in below for p in parents(step)):
                below.add(step)
        region, outside = set(), set()
        stack = [p for s in self.outputs.values() for p in parents(s)]
        while stack:
            step = stack.pop()
            if step in inputs or step in region or step in outside:
                continue
            if step in below:
                region.add(step)
                stack.extend(parents(step))
            else:
                outside.add(step)
        self.region = [s for s in order if s in region]
        return outside | inputs

    def run(self, env, evaluate, entry, value):
        ins = [self.inputs[p] for p in sorted(self.inputs)]
        outs = [self.outputs[p] for p in sorted(self.outputs)]

        def decomposition(*xs):
            local = collections.ChainMap({s: entry(x) for s, x in zip(ins, xs)}, env)
            for step in self.region:
                local[step] = evaluate(step, local)
            return tuple(value(evaluate(s, local)) for s in outs)

        args = [value(env[s]) for s in ins]
        traced = jax.make_jaxpr(decomposition)(*args)
        # the values of the program the region reads (tracers of its trace) become operands
        read = [i for i, c in enumerate(traced.consts) if isinstance(c, jax.core.Tracer)]

        def closed(*xs, **attributes):
            consts = list(traced.consts)
            for i, x in zip(read, xs[len(args):]):
                consts[i] = x
            return jax.core.eval_jaxpr(traced.jaxpr, consts, *xs[:len(args)])

        attributes = {k: _attribute(v) for k, v in (self.attr or {}).items()}
        results = jax.lax.composite(closed, self.name)(*args, *[traced.consts[i] for i in read],
                                                       **attributes)
        for step, result in zip(outs, results):
            env[step] = entry(result)


def _attribute(v):
    """A composite attribute as torch_xla types it: floats f32, ints i64, lists dense arrays."""
    if isinstance(v, float):
        return np.float32(v)
    if isinstance(v, (list, tuple)):
        kinds = {type(e) for e in v}
        dtype = np.bool_ if kinds == {bool} else np.int64 if kinds == {int} else np.float32
        return np.asarray(v, dtype)
    return v


def _patterns(order, mark):
    patterns = {}
    for step in order:
        m = mark(step)
        if m is not None:
            patterns.setdefault((m.name, m.id), _Pattern(m.name)).add(step, m)
    return list(patterns.values())


def run_steps(order, parents, mark, evaluate, env, entry=lambda x: x, value=lambda x: x):
    """Evaluates the steps of `order` (a topological order) into `env` (a dict) as
    `evaluate(step, env)` does, except that the output marks of each pattern are the outputs
    of its composite. `parents(step)`: the steps it reads; `mark(step)`: its Mark or None;
    `entry(array)` / `value(entry)`: a one-output step's output as `env` holds it, and back."""
    patterns = _patterns(order, mark)
    owner, needs = {}, {}
    for pattern in patterns:
        needs[pattern] = pattern.find_region(order, parents)
        owner.update((s, pattern) for s in pattern.outputs.values())
    for unit in _schedule(order, parents, owner, needs):
        if isinstance(unit, _Pattern):
            unit.run(env, evaluate, entry, value)
        else:
            env[unit] = evaluate(unit, env)


def _schedule(order, parents, owner, needs):
    """`order` with each pattern's output marks replaced by the pattern, placed after every
    step its composite reads (Kahn's algorithm, ties in `order`'s order)."""
    units = [s for s in order if s not in owner] + list(needs)
    rank = {s: i for i, s in enumerate(order)}
    rank.update((p, min(rank[s] for s in p.outputs.values())) for p in needs)
    deps = {u: {owner.get(p, p) for p in (needs[u] if u in needs else parents(u))} for u in units}
    users = collections.defaultdict(list)
    for u, ds in deps.items():
        for d in ds:
            users[d].append(u)
    waiting = {u: len(ds) for u, ds in deps.items()}
    ready = [(rank[u], i, u) for i, u in enumerate(units) if not waiting[u]]
    heapq.heapify(ready)
    seq = {u: i for i, u in enumerate(units)}
    done = []
    while ready:
        u = heapq.heappop(ready)[2]
        done.append(u)
        for v in users[u]:
            waiting[v] -= 1
            if not waiting[v]:
                heapq.heappush(ready, (rank[v], seq[v], v))
    if len(done) != len(units):
        stuck = sorted({p.name for p in needs if p not in done})
        raise RuntimeError(f"composite {', '.join(map(repr, stuck))}: its region reads its own "
                           "output (nested or overlapping patterns are not supported)")
    return done


_COMPOSITE = re.compile(r'stablehlo\.composite "([^"]+)".*?decomposition = @([\w.$-]+)')


def upstream_names(text: str) -> str:
    """StableHLO text with each composite's decomposition named as torch_xla names it
    (`@test.p.impl`, `@test.p.impl_0`) rather than as jax does (`@test.p`, `@test.p_0`);
    the bytecode keeps jax's names."""
    renames = {}
    for name, symbol in _COMPOSITE.findall(text):
        if symbol.startswith(name):
            renames[symbol] = f"{name}.impl{symbol[len(name):]}"
    if not renames:
        return text
    symbols = "|".join(map(re.escape, sorted(renames, key=len, reverse=True)))
    return re.sub(rf"@({symbols})(?![\w.$-])", lambda m: "@" + renames[m.group(1)], text)
