"""The dynamic shape detector (torch_xla/_lazy/graph/dynamic_shape_detector.py): a compiled
function's graphs recorded op by op into a trie, the one too many refused at the op that makes
it, with the IR node met and those expected there."""
import re
import threading

import pytest
import torch

import torch_xla
from torch_xla import _XLAC
from torch_xla._lazy.graph import dynamic_shape_detector as detector


def _node(op, shape="f32[4]{0}"):
    return re.escape(f"[] aten::{op}, xla_shape={shape}, dynamic_dims: ()")


def test_a_new_input_shape_raises_at_the_op_naming_both_shapes(dev):
    def f(x):
        return x + x
    torch_xla.compile(f, max_different_graphs=1)(torch.ones(4, device=dev))
    torch_xla.compile(f, max_different_graphs=1)(torch.zeros(4, device=dev))  # the same graph
    message = (r"exceeded: 1\nGot: " + _node("add", "f32[2]{0}") + r"\nExpected: " + _node("add"))
    with pytest.raises(RuntimeError, match=message):
        torch_xla.compile(f, max_different_graphs=1)(torch.ones(2, device=dev))
    assert not detector.session_active()


def test_a_fork_lists_every_branch_the_trie_expected(dev):
    def f(x, step):
        r = x * 2
        return r - x if step == 0 else r + x if step == 1 else r / 3
    x = torch.ones(4, device=dev)
    for step in (0, 1, 0):
        torch_xla.compile(f, max_different_graphs=2)(x, step)
    message = (r"Got: " + _node("div") + r"\nExpected either of:\n  - " + _node("sub") +
               r"\n  - " + _node("add"))
    with pytest.raises(RuntimeError, match=message):
        torch_xla.compile(f, max_different_graphs=2)(x, 2)


def test_a_call_ending_where_no_graph_ended_is_a_new_graph(dev):
    def f(x, more):
        r = x * 2
        return r + 1 if more else r
    x = torch.ones(4, device=dev)
    torch_xla.compile(f, max_different_graphs=1)(x, True)
    with pytest.raises(RuntimeError, match=r"Reached the end of the function at: " + _node("mul")
                       + r"\nExpected: " + _node("add")):
        torch_xla.compile(f, max_different_graphs=1)(x, False)


def test_a_session_ends_with_its_function_and_the_limit_is_torch_xlas(dev):
    x = torch.ones(4, device=dev)
    for _ in range(2):  # two functions of one name: the second starts a session of its own
        def f(y):
            return y.sum() if _ else y * 3
        torch_xla.compile(f, max_different_graphs=1)(x)
        del f
    _XLAC._dynamic_shape_detector_set_max_different_graphs(3)
    assert _XLAC._dynamic_shape_detector_get_max_different_graphs() == 3


def test_sessions_nest_and_another_threads_nodes_are_not_the_calls(dev):
    x = torch.ones(4, device=dev)
    inner = torch_xla.compile(lambda y: y * 2, max_different_graphs=1)

    def outer(y, n):
        thread = threading.Thread(target=lambda: torch.ones(n, device=dev) - 1)
        thread.start()  # a graph of another shape in each call, on another thread
        thread.join()
        return inner(y) + 1
    for n in (3, 5):  # the same graphs again: no new one, for the inner or the outer
        torch_xla.compile(outer, max_different_graphs=1)(x, n)
    assert not detector.session_active()
