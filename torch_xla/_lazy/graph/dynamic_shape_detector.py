"""The dynamic shape detector: how many different graphs one compiled function traces.

`torch_xla.compile(f, max_different_graphs=N)` opens a session named after `f` around each
call. While it is open, every IR node made is recorded, in the order it is made, into the
session's trie of the graphs seen before (a compressed trie: each trie node holds a run of
IR nodes, keyed by their hashes, which every graph through it shares; its children are where
graphs part). Tracing a call walks down the trie; a node that leaves it, or a call that ends
where no graph ended before, is a new graph. Once the session has N graphs, a new one raises
at once, at the op that makes it (or when the call ends), naming the IR node met and those
the trie expected there: a graph that keeps changing (a new input shape each call, a Python
branch on values) is reported before its compilations pile up.

A session lives as long as the function it is named after (`torch_xla.compile` drops it
when the function is gone); the limit is one for the whole process, as in torch_xla
(`_XLAC._dynamic_shape_detector_set_max_different_graphs`).
"""
import threading

from . import ir

_limit = [1]          # graphs allowed per session
_sessions = {}        # name -> _Session
_active = []          # the open sessions' cursors, innermost last (compiled functions nest)


def node_text(node) -> str:
    """An IR node as torch_xla's detector names it: `[] aten::add, xla_shape=f32[10]{0},
    dynamic_dims: ()` (shapes here are static: no dimension is dynamic)."""
    outputs = f", num_outputs={len(node.avals)}" if len(node.avals) != 1 else ""
    return f"[] {ir.ir_op_name(node.op.name)}{outputs}, xla_shape={ir.xla_shape(node.avals)}, dynamic_dims: ()"


class _TrieNode:
    """A run of IR nodes (hash, text) that the graphs through this trie node share, whether a
    graph ends after it, and the trie nodes that follow it by their first IR node's hash (in
    the order they were made)."""
    __slots__ = ("run", "ends_graph", "children")

    def __init__(self, run, ends_graph=False, children=None):
        self.run = run
        self.ends_graph = ends_graph
        self.children = {} if children is None else children

    def split(self, at: int) -> None:
        """Keeps `run[:at]` here and moves the rest (its graph end, its children) to a new
        child, if there is a rest."""
        if at < len(self.run):
            rest = _TrieNode(self.run[at:], self.ends_graph, self.children)
            self.run = self.run[:at]
            self.children = {rest.run[0][0]: rest}
            self.ends_graph = False


class _Session:
    __slots__ = ("name", "root", "graphs")

    def __init__(self, name):
        self.name = name
        self.root = _TrieNode([])
        self.graphs = 0


class _Cursor:
    """Where the call being traced is in its session's trie: `matched` IR nodes of `node`'s
    run. Only the nodes the opening thread makes are the call's (other threads, such as
    DataParallel's replicas, trace graphs of their own meanwhile)."""
    __slots__ = ("session", "node", "matched", "thread")

    def __init__(self, session):
        self.session, self.node, self.matched = session, session.root, 0
        self.thread = threading.get_ident()

    def add(self, entry) -> None:
        node, matched = self.node, self.matched
        run = node.run
        if matched == len(run) and not node.children and not node.ends_graph:
            run.append(entry)  # a trie node this call made: it grows with the call
            self.matched += 1
            return
        if matched < len(run) and run[matched][0] == entry[0]:
            self.matched += 1
            return
        child = node.children.get(entry[0]) if matched == len(run) else None
        if child is None:
            self._new_graph(entry)
            node.split(matched)
            child = node.children[entry[0]] = _TrieNode([entry])
        self.node, self.matched = child, 1

    def end(self) -> None:
        """The call ends here: a new graph unless one ended here before."""
        node, matched = self.node, self.matched
        if matched == 0 or (matched == len(node.run) and node.ends_graph):
            return
        self._new_graph(None)
        node.split(matched)
        node.ends_graph = True
        self.session.graphs += 1

    def _new_graph(self, entry) -> None:
        """Raises if the session may not have another graph: `entry`, the IR node met (None:
        the call ended), against what the trie expected."""
        if self.session.graphs < _limit[0]:
            return
        node, matched = self.node, self.matched
        lines = [f"Maximum number of different graphs allowed per function exceeded: {_limit[0]}"]
        lines.append(f"Got: {entry[1]}" if entry is not None else
                     f"Reached the end of the function at: {node.run[matched - 1][1]}")
        if matched < len(node.run):
            lines.append(f"Expected: {node.run[matched][1]}")
        else:
            lines.append("Expected either of:")
            lines += [f"  - {child.run[0][1]}" for child in node.children.values()]
        lines.append(f"(in torch_xla.compile's function {self.session.name}: a new input shape "
                     f"or a Python branch on values makes a new graph, each one compiled)")
        raise RuntimeError("\n".join(lines))


def _observe(node) -> None:
    cursor = _active[-1]
    if cursor.thread != threading.get_ident():
        return
    try:
        cursor.add((node.hash, node_text(node)))
    except RuntimeError:
        cursor.node, cursor.matched = cursor.session.root, 0  # the rest of the call: from the root
        raise


def set_max_different_graphs(n: int) -> None:
    _limit[0] = int(n)


def max_different_graphs() -> int:
    return _limit[0]


def start_session(name: str) -> None:
    """Records the IR nodes made from now on into session `name` (made if new)."""
    session = _sessions.get(name)
    if session is None:
        session = _sessions[name] = _Session(name)
    _active.append(_Cursor(session))
    ir.node_observer = _observe


def end_session() -> None:
    """Stops recording into the innermost open session (an outer one records again): the
    call's graph ends here (raises if it is one too many)."""
    if not _active:
        raise RuntimeError("no dynamic shape detector session is active")
    cursor = _active.pop()
    if not _active:
        ir.node_observer = None
    cursor.end()


def remove_session(name: str) -> None:
    _sessions.pop(name, None)


def session_active() -> bool:
    return bool(_active)
