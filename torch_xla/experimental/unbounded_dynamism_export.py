"""torch_xla's FX passes for exported programs with dynamic (symbolic) input dimensions.

torch_xla's own export traced the program lazily, which could not carry a symbolic size
through `view`, `expand`, `select`, `split_with_sizes`, `unsqueeze`, embedding or the
norms, so it rewrote those first: these passes, one job each, on `ep.graph_module` in
place. Here `torch_xla.stablehlo` lowers the graph with jax's symbolic shapes, which need
none of them, so the export does not run them; they are kept for code that calls them, and
each leaves a graph that computes what it computed (`ep.module()` gives the same results).
A pass handles nodes with one symbolic dimension and leaves the others as they are.
"""
import contextlib
import operator

import torch
from torch.fx import GraphModule, subgraph_rewriter

import torch_xla.experimental.xla_dynamic_reshape_ops  # noqa: F401  (torch.ops.xla.dynamic_*)
from torch_xla.utils.stablehlo_test_utils import wrap_func_as_nn_module  # noqa: F401

aten = torch.ops.aten
_INT64_MAX = torch.iinfo(torch.int64).max


def _val(arg):
    """What an fx argument stands for when the graph runs on fake tensors: a node's
    `meta['val']`, containers item by item, anything else as it is."""
    if isinstance(arg, torch.fx.Node):
        return arg.meta["val"]
    if isinstance(arg, (list, tuple)):
        return type(arg)(_val(a) for a in arg)
    return arg


def call_function(graph: torch.fx.Graph, target, args=(), kwargs=None) -> torch.fx.Node:
    """A new `call_function` node of `target` at the graph's insertion point, with its
    `meta['val']` computed on its arguments' fake values."""
    node = graph.call_function(target, tuple(args), kwargs or {})
    _set_val(node)
    return node


def _set_val(node) -> None:
    """`node.meta['val']` computed again from its arguments' fake values."""
    args, kwargs = _val(node.args), _val(dict(node.kwargs))
    mode = torch._guards.detect_fake_mode([v for v in args if isinstance(v, torch.Tensor)])
    with mode if mode is not None else contextlib.nullcontext():
        node.meta["val"] = node.target(*args, **kwargs)


def _symbolic_dims(node) -> list:
    """The dims of the tensor `node` stands for whose sizes are symbolic."""
    return [d for d, s in enumerate(node.meta["val"].shape) if not isinstance(s, int)]


def _sizes(graph, node, skip=None) -> list:
    """`node`'s sizes, a `sym_size` node for each symbolic one, less dim `skip`."""
    sizes = []
    for d, s in enumerate(node.meta["val"].shape):
        if d != skip:
            sizes.append(s if isinstance(s, int) else call_function(graph, aten.sym_size.int, (node, d)))
    return sizes


def _calls(gm, *targets):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in targets]


# ---- the norms as elementwise math ---------------------------------------------------------

def native_layer_norm_impl(input, normalized_shape, weight, bias, eps):
    """Layer norm over the last dimension (output 0 of `native_layer_norm`)."""
    mean = torch.mean(input, -1, keepdim=True)
    rstd = torch.rsqrt(torch.var(input, -1, keepdim=True, correction=0) + eps)
    return (input - mean) * rstd * weight + bias


def native_group_norm_impl(input, weight, bias, N, C, HxW, group, eps):
    """Group norm of `input` `(N, C, *)` in `group` groups (output 0 of `native_group_norm`),
    without the batch size: it may be symbolic."""
    grouped = input.unflatten(1, (group, -1)).flatten(2)
    mean = torch.mean(grouped, -1, keepdim=True)
    rstd = torch.rsqrt(torch.var(grouped, -1, keepdim=True, correction=0) + eps)
    normalized = ((grouped - mean) * rstd).view_as(input)
    return (normalized.transpose(1, -1) * weight + bias).transpose(1, -1)


def native_layer_norm_pattern(x, dim, weight, bias, eps):
    return aten.native_layer_norm.default(x, dim, weight, bias, eps)[0]


def native_group_norm_pattern(x, weight, bias, N, C, HxW, group, eps):
    return aten.native_group_norm.default(x, weight, bias, N, C, HxW, group, eps)[0]


def _normalizes_the_last_dim(match, original_graph, pattern_graph) -> bool:
    norm = next(n for n in match.nodes_map.values()
                if getattr(n, "target", None) is aten.native_layer_norm.default)
    return len(norm.args[1]) == 1


def decompose_dynamic_native_layer_norm(gm: GraphModule):
    """`native_layer_norm(...)[0]` over the last dimension as its elementwise math."""
    subgraph_rewriter.replace_pattern_with_filters(
        gm, native_layer_norm_pattern, native_layer_norm_impl,
        match_filters=[_normalizes_the_last_dim], ignore_literals=False)


def decompose_dynamic_native_group_norm(gm: GraphModule):
    """`native_group_norm(...)[0]` as its elementwise math."""
    subgraph_rewriter.replace_pattern_with_filters(
        gm, native_group_norm_pattern, native_group_norm_impl, ignore_literals=True)


# ---- ops with a symbolic input as slices, views and expands --------------------------------

def _static_dim_of_symbolic(src, dim, what):
    """`dim` of `src` made non-negative if `src` has a symbolic dim (None if it has none);
    `what` along that symbolic dim itself is refused."""
    symbolic = _symbolic_dims(src)
    if not symbolic:
        return None
    dim %= src.meta["val"].dim()
    if dim in symbolic:
        raise NotImplementedError(f"{what} along a symbolic dimension")
    return dim


def decompose_dynamic_shape_select(gm: GraphModule):
    """`select.int` of a tensor with a symbolic dim (not the one selected) as a slice of
    length one and a view without that dim."""
    graph = gm.graph
    for n in _calls(gm, aten.select.int):
        src, dim, index = n.args[:3]
        dim = _static_dim_of_symbolic(src, dim, "select")
        if dim is None:
            continue
        with graph.inserting_before(n):
            index %= src.meta["val"].shape[dim]
            sliced = call_function(graph, aten.slice.Tensor, (src, dim, index, index + 1, 1))
            viewed = call_function(graph, aten.view.default, (sliced, _sizes(graph, src, skip=dim)))
        n.replace_all_uses_with(viewed)
        graph.erase_node(n)


def decompose_split_with_sizes(gm: GraphModule):
    """`split_with_sizes` of a tensor with a symbolic dim (not the one split) as slices; the
    split is left in the graph, unused, as torch_xla leaves it (`eliminate_dead_code` drops it)."""
    graph = gm.graph
    for n in _calls(gm, aten.split_with_sizes.default):
        src, sizes = n.args[:2]
        dim = _static_dim_of_symbolic(src, n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0),
                                      "split_with_sizes")
        if dim is None:
            continue
        with graph.inserting_before(n):
            starts = [sum(sizes[:i]) for i in range(len(sizes))]
            pieces = [call_function(graph, aten.slice.Tensor, (src, dim, s, s + size))
                      for s, size in zip(starts, sizes)]
        for user in list(n.users):
            if user.target is not operator.getitem:
                raise NotImplementedError(f"split_with_sizes used by {user.target}")
            user.replace_all_uses_with(pieces[user.args[1]])


def flatten_embedding_indices_tensor(gm: GraphModule):
    """`embedding` with indices of a symbolic shape: the indices flattened to one dim, the
    result reshaped back to the indices' shape plus the embedding dim."""
    graph = gm.graph
    for n in _calls(gm, aten.embedding.default):
        weight, indices = n.args[:2]
        symbolic = _symbolic_dims(indices)
        if not symbolic:
            continue
        if len(symbolic) > 1:
            raise NotImplementedError("embedding indices with several symbolic dimensions")
        with graph.inserting_before(n):
            sizes = _sizes(graph, indices)
            count = sizes[symbolic[0]]
            for d, s in enumerate(sizes):
                if d != symbolic[0]:
                    count = call_function(graph, operator.mul, (count, s))
            flat = call_function(graph, aten.reshape.default, (indices, [count]))
        n.update_arg(1, flat)
        _set_val(n)
        with graph.inserting_after(n):
            restored = call_function(graph, aten.reshape.default,
                                     (n, sizes + [weight.meta["val"].shape[-1]]))
        n.replace_all_uses_with(restored, delete_user_cb=lambda user: user is not restored)


def _is_no_op_slice(n) -> bool:
    start, end, step = (list(n.args[2:5]) + [None, None, 1][len(n.args[2:5]):])
    return start in (0, None) and end in (None, _INT64_MAX) and step == 1


def remove_no_op_slice(gm: GraphModule):
    """Drops `slice(x, dim, 0, INT64_MAX)`, which is `x`."""
    for n in _calls(gm, aten.slice.Tensor):
        if _is_no_op_slice(n):
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)


def _size_source(size):
    """(tensor node, dim, factor) of a size computed as `sym_size(t, d)` or `sym_size(t, d) * k`."""
    factor = 1
    if size.target is operator.mul:
        a, b = size.args
        size, factor = (a, b) if isinstance(b, int) else (b, a)
        if not isinstance(factor, int):
            raise NotImplementedError(f"a symbolic size computed as {a} * {b}")
    if size.target is not aten.sym_size.int:
        raise NotImplementedError(f"a symbolic size computed by {size.target}")
    return size.args[0], size.args[1], factor


def _to_one_symbolic_size(gm, ops, what):
    """(node, target dim, source tensor node, source dim, factor) for each call of `ops` whose
    size list (argument 1) holds one symbolic size, read from a tensor's size."""
    for n in _calls(gm, *ops):
        symbolic = [(d, s) for d, s in enumerate(n.args[1]) if not isinstance(s, int)]
        if not symbolic:
            continue
        if len(symbolic) > 1:
            raise NotImplementedError(f"{what} to several symbolic sizes")
        (target_dim, size), = symbolic
        yield (n, target_dim, *_size_source(size))


def replace_dynamic_expand_with_xla_op(gm: GraphModule):
    """`expand` to a symbolic size read from another tensor as `xla.dynamic_expand`."""
    for n, target_dim, src, src_dim, factor in _to_one_symbolic_size(gm, (aten.expand.default,), "expand"):
        if factor != 1:
            raise NotImplementedError("expand to a multiple of a symbolic size")
        n.target = torch.ops.xla.dynamic_expand.default
        n.args = (n.args[0], list(n.args[1]), src, src_dim, target_dim)


_VIEWS = (aten.view.default, aten.reshape.default, aten._unsafe_view.default)


def replace_dynamic_view_with_xla_op(gm: GraphModule):
    """`view`/`reshape` to a symbolic size (a tensor's size, or it times an int) as
    `xla.dynamic_view`."""
    for n, target_dim, src, src_dim, factor in _to_one_symbolic_size(gm, _VIEWS, "a view"):
        n.target = torch.ops.xla.dynamic_view.default
        n.args = (n.args[0], list(n.args[1]), src, src_dim, target_dim, float(factor))


def dynamic_unsqueeze_to_view(gm: GraphModule):
    """`unsqueeze` of a tensor with a symbolic dim as a view with the new dim of size one."""
    graph = gm.graph
    for n in _calls(gm, aten.unsqueeze.default):
        src, dim = n.args[:2]
        if not _symbolic_dims(src):
            continue
        with graph.inserting_before(n):
            sizes = _sizes(graph, src)
            dim %= len(sizes) + 1
            viewed = call_function(graph, aten.view.default, (src, sizes[:dim] + [1] + sizes[dim:]))
        n.replace_all_uses_with(viewed)
        graph.erase_node(n)


def exported_program_has_symbolic_input_shape(ep: torch.export.ExportedProgram) -> bool:
    """Whether an input of `ep` has a dynamic (symbolic) dimension."""
    for n in ep.graph_module.graph.nodes:
        val = n.meta.get("val") if n.op == "placeholder" else None
        if isinstance(val, torch.Tensor) and any(not isinstance(s, int) for s in val.shape):
            return True
    return False


_PASSES = (decompose_dynamic_shape_select, decompose_split_with_sizes, remove_no_op_slice,
           decompose_dynamic_native_group_norm, decompose_dynamic_native_layer_norm,
           dynamic_unsqueeze_to_view, flatten_embedding_indices_tensor,
           replace_dynamic_expand_with_xla_op, replace_dynamic_view_with_xla_op)


def process_exported_program_with_symbolic_input(ep: torch.export.ExportedProgram) -> None:
    """Every pass above on `ep`'s graph, in torch_xla's order, dead code dropped after each."""
    for run in _PASSES:
        run(ep.graph_module)
        ep.graph_module.graph.eliminate_dead_code()
        ep.graph_module.graph.lint()
        ep.graph_module.recompile()
