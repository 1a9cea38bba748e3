"""The package's layout stays as ARCHITECTURE.md draws it: imports go one way, down the flow.

Imports are read from the source (at the top of a file, inside functions, at the bottom),
so a circle hidden in a function body counts too.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "torch_xla"
MAX_LINES = 600

# The engine's stages, top to bottom: a module may import modules of its own stage or of
# stages below it, never above. Every engine module must be listed.
STAGES = (
    ("torch_xla._lazy",),
    ("torch_xla._lazy.hooks.device", "torch_xla._lazy.hooks.inplace", "torch_xla._lazy.hooks.serialization",
     "torch_xla._lazy.hooks.module_conversion", "torch_xla._lazy.hooks.packed_sequences", "torch_xla._lazy.hooks.einsum",
     "torch_xla._lazy.hooks.out_arguments"),
    ("torch_xla._lazy.trace.engine_ops", "torch_xla._lazy.trace.engine_ops.copies",
     "torch_xla._lazy.trace.engine_ops.aliases", "torch_xla._lazy.trace.engine_ops.indexing",
     "torch_xla._lazy.trace.engine_ops.batch_norm", "torch_xla._lazy.trace.engine_ops.argument_checks",
     "torch_xla._lazy.trace.collective_ops", "torch_xla._lazy.launch.replica_threads",
     "torch_xla._lazy.trace.mark_sharding", "torch_xla._lazy.trace.op_sharding",
     "torch_xla._lazy.trace.optimization_barrier", "torch_xla._lazy.trace.value_checks", "torch_xla._lazy.trace.loops",
     "torch_xla._lazy.hooks.dlpack", "torch_xla._lazy.trace.ready"),
    ("torch_xla._lazy.trace.traced",),
    ("torch_xla._lazy.trace.jax_functions",),
    ("torch_xla._lazy.trace.dispatch",),
    ("torch_xla._lazy.trace.meta", "torch_xla._lazy.trace.fallback", "torch_xla._lazy.trace.eager",
     "torch_xla._lazy.trace.eager_fused", "torch_xla._lazy.trace.dynamic_ops", "torch_xla._lazy.trace.dynamic_sizes"),
    ("torch_xla._lazy.graph_capture.compiled", "torch_xla._lazy.graph_capture.export",
     "torch_xla._lazy.graph_capture.dynamo_config", "torch_xla._lazy.graph_capture.fake_fallback"),
    ("torch_xla._lazy.graph_capture", "torch_xla._lazy.graph_capture.decompose"),
    ("torch_xla._lazy.graph_capture.fx_lowering", "torch_xla._lazy.graph_capture.cached_graphs"),
    ("torch_xla._lazy.step.execution", "torch_xla._lazy.inspect.graph_dump", "torch_xla._lazy.inspect.graph_save",
     "torch_xla._lazy.inspect.lowering_context"),
    ("torch_xla._lazy.step.deferred_checks", "torch_xla._lazy.step.execution_errors"),
    ("torch_xla._lazy.launch.transfers",),
    ("torch_xla._lazy.launch.spmd_program", "torch_xla._lazy.launch.graph_cache"),
    ("torch_xla._lazy.launch.manual_regions", "torch_xla._lazy.launch.subgraph"),
    ("torch_xla._lazy.launch.graph_program",),
    ("torch_xla._lazy.lowering",  # and every module under it
     "torch_xla._lazy.lowering.sharding_constraint", "torch_xla._lazy.lowering.collectives"),
    ("torch_xla._lazy.graph.tensor", "torch_xla._lazy.launch.replica_program",
     "torch_xla._lazy.graph.dynamic_shape_detector", "torch_xla._lazy.graph.unbounded_dims"),
    ("torch_xla._lazy.graph.ir", "torch_xla._lazy.graph.rng", "torch_xla._lazy.graph.spmd_layout",
     "torch_xla._lazy.trace.op_rules", "torch_xla._lazy.launch.program_store"),
    ("torch_xla._lazy.runtime.runner", "torch_xla._lazy.runtime.compile_explanation", "torch_xla._lazy.launch.scalar_arrays"),
    ("torch_xla._lazy.runtime.pjrt", "torch_xla._lazy.runtime.device_info", "torch_xla._lazy.base.counters",
     "torch_xla._lazy.base.caches", "torch_xla._lazy.runtime.hosts",
     "torch_xla._lazy.launch.donation", "torch_xla._lazy.runtime.preemption",
     "torch_xla._lazy.base.frames", "torch_xla._lazy.base.user_code", "torch_xla._lazy.hooks.kernel_libraries",
     "torch_xla._lazy.base.scopes", "torch_xla._lazy.runtime.trace_spans", "torch_xla._lazy.runtime.graph_analysis",
     "torch_xla._lazy.inspect.hlo_proto", "torch_xla._lazy.runtime.directory_trust", "torch_xla._lazy.runtime.peer_watch"),
    ("torch_xla._lazy.hooks.device_guard", "torch_xla._lazy.base.torch_compat", "torch_xla._lazy.base.jax_compat",
     "torch_xla._lazy.base.jax_compat.executables"),
    ("torch_xla._lazy.hooks.guard_build",),
    WINGS := tuple(f"torch_xla._lazy.{f}" for f in (  # the folders: imported by their modules
        "hooks", "trace", "step", "inspect", "launch", "graph", "runtime", "base")),
)
ENGINE = "torch_xla._lazy"


def _modules():
    mods = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


MODULES = _modules()


def _imported(name, path):
    """Modules of the package that `name` imports anywhere in its source."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            prefix = ".".join(base[:len(base) - node.level + 1] + [node.module or ""]) if node.level \
                else node.module
            prefix = prefix.rstrip(".")
            targets = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


IMPORTS = {name: _imported(name, path) for name, path in MODULES.items()}


def _stage(name):
    for i, stage in enumerate(STAGES):
        for s in stage:
            if name == s or (s == "torch_xla._lazy.lowering" and name.startswith(s + ".")):
                return i
    return None


def _is_ancestor(package, name):
    return name.startswith(package + ".")


def test_no_import_circle():
    """No circle among the package's modules (a module importing the package it lives in
    counts only as an upward import, checked below)."""
    edges = {m: {t for t in ts if not _is_ancestor(t, m)} for m, ts in IMPORTS.items()}
    state, circles = {}, []

    def visit(m, path):
        state[m] = "open"
        for t in sorted(edges[m]):
            if state.get(t) == "open":
                circles.append(path[path.index(t):] + [t])
            elif t not in state:
                visit(t, path + [t])
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_engine_does_not_import_the_public_package():
    upward = sorted(f"{m} -> {t}" for m, ts in IMPORTS.items() if m.startswith(ENGINE)
                    for t in ts if not t.startswith(ENGINE))
    assert not upward, upward


def test_every_engine_module_has_a_stage():
    missing = sorted(m for m in MODULES if m.startswith(ENGINE) and _stage(m) is None)
    assert not missing, f"add these to STAGES (and to ARCHITECTURE.md): {missing}"


def test_engine_imports_go_down_the_stages():
    upward = []
    for m, ts in IMPORTS.items():
        if not m.startswith(ENGINE) or _stage(m) is None:
            continue
        for t in ts:
            if t.startswith(ENGINE) and not _is_ancestor(t, m) and (_stage(t) or 0) < _stage(m):
                upward.append(f"{m} (stage {_stage(m)}) -> {t} (stage {_stage(t)})")
    assert not upward, upward


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_short(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines (at most {MAX_LINES}: split it by what it does)"


@pytest.mark.parametrize("wing", WINGS)
def test_a_wing_is_one_folder_of_sub_stages(wing):
    """A feature's wing (SPMD, the replicas) is a folder whose modules sit on the stages of
    the flow they serve (its sub-stages, listed in STAGES); its package imports nothing,
    so that importing one of its modules brings no other stage with it."""
    members = sorted(m for m in MODULES if _is_ancestor(wing, m))
    assert members and all(_stage(m) is not None and _stage(m) < _stage(wing) for m in members)
    assert not IMPORTS[wing], f"{wing} imports {sorted(IMPORTS[wing])}"


def test_public_modules_reach_the_engine_through_its_modules():
    """One door: public modules call the engine's modules; `_XLAC` (what user scripts call,
    named as torch_xla's C++ extension) wraps the same calls, and no module goes through it."""
    through = sorted(m for m, ts in IMPORTS.items() if "torch_xla._XLAC" in ts and m != "torch_xla")
    assert not through, through


def _package(name):
    return ".".join(name.split(".")[:2])


def test_public_packages_import_one_way():
    """No two packages of the public API import each other (`utils` sits below `core`)."""
    edges = {}
    for m, ts in IMPORTS.items():
        for t in ts:
            a, b = _package(m), _package(t)
            if a != b and "torch_xla" not in (a, b) and not b.startswith(ENGINE):
                edges.setdefault(a, {})[b] = f"{m} -> {t}"
    both = sorted(f"{edges[a][b]}, {edges[b][a]}" for a in edges for b in edges[a]
                  if a < b and a in edges.get(b, {}))
    assert not both, both
