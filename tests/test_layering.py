"""The package's layout stays as ARCHITECTURE.md draws it: imports go one way, down the flow.

The engine (`torch_xla/_lazy`) is folders by stage, top to bottom as FOLDERS lists them: a
module imports modules of its own folder or of folders below, never above, and no module sits
beside the folders but `_lazy/__init__` (which installs the engine).

Imports are read from the source (at the top of a file, inside functions, at the bottom),
so a circle hidden in a function body counts too; so does a use of a name of
`torch_xla/torch_xla.py` through the package (`torch_xla.sync()` after `import torch_xla`),
an import of that module.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "torch_xla"
MAX_LINES = 600
ENGINE = "torch_xla._lazy"

# The engine's folders, top to bottom (ARCHITECTURE.md draws them).
FOLDERS = ("hooks", "graph_capture", "trace", "step", "inspect", "launch", "lowering", "graph",
           "runtime", "base")


def _modules():
    mods = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


MODULES = _modules()


def _public_names():
    """The names `torch_xla/torch_xla.py` defines: `torch_xla.<name>` is that module's."""
    names = set()
    for node in ast.parse((ROOT / "torch_xla.py").read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names - {"__all__"}


PUBLIC_NAMES = _public_names()
PUBLIC = "torch_xla.torch_xla"

def _imported(name, path):
    """Modules of the package that `name` imports anywhere in its source: `from P import x`
    imports module P.x where there is one, else P; `torch_xla.<name>` after `import torch_xla`
    (or `from torch_xla import <name>`) imports torch_xla/torch_xla.py where it defines <name>."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text())
    found, binds_package = set(), False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
            binds_package |= any(a.asname is None and a.name.split(".")[0] == "torch_xla"
                                 for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            prefix = ".".join(base[:len(base) - node.level + 1] + [node.module or ""]) if node.level \
                else node.module
            prefix = prefix.rstrip(".")
            targets = []
            for a in node.names:
                if f"{prefix}.{a.name}" in MODULES:
                    targets.append(f"{prefix}.{a.name}")
                elif prefix == "torch_xla" and a.name in PUBLIC_NAMES:
                    targets.append(PUBLIC)
                else:
                    targets.append(prefix)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "torch_xla" and node.attr in PUBLIC_NAMES):
            targets = [PUBLIC] if binds_package else []
        else:
            continue
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


IMPORTS = {name: _imported(name, path) for name, path in MODULES.items()}


def _folder(name):
    """The engine folder `name` sits in (None for `_lazy/__init__` and modules outside)."""
    parts = name.split(".")
    return parts[2] if name.startswith(ENGINE + ".") and parts[2] in FOLDERS else None


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


def test_xla_model_sits_above_the_top_level_functions():
    """xla_model calls `torch_xla.device`/`torch_xla.sync` through the package (seen as an
    import of torch_xla/torch_xla.py), and torch_xla/torch_xla.py imports nothing that leads
    back to it: the circle the import statements alone did not show."""
    assert PUBLIC in IMPORTS["torch_xla.core.xla_model"]
    assert "torch_xla.core.xla_model" not in IMPORTS[PUBLIC]


def test_engine_does_not_import_the_public_package():
    upward = sorted(f"{m} -> {t}" for m, ts in IMPORTS.items() if m.startswith(ENGINE)
                    for t in ts if not t.startswith(ENGINE))
    assert not upward, upward


def test_every_engine_module_sits_in_a_folder():
    """`_lazy/__init__` (it installs the engine) and the folders: no module beside them."""
    assert sorted(p.name for p in (ROOT / "_lazy").iterdir() if p.suffix == ".py") == ["__init__.py"]
    loose = sorted(m for m in MODULES if m.startswith(ENGINE + ".") and _folder(m) is None)
    assert not loose, f"put these in the folder of their stage (and ARCHITECTURE.md): {loose}"
    folders = sorted(p.name for p in (ROOT / "_lazy").iterdir() if (p / "__init__.py").exists())
    assert folders == sorted(FOLDERS), "add new folders to FOLDERS, in their place"


def test_engine_tests_mirror_the_folders():
    """tests/_lazy holds one folder per engine folder it tests (named as that folder), and no
    test beside them."""
    tests = ROOT.parent / "tests" / "_lazy"
    assert sorted(p.name for p in tests.iterdir() if p.suffix == ".py") == ["__init__.py"]
    folders = [p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert set(folders) <= set(FOLDERS), sorted(set(folders) - set(FOLDERS))


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_folder_says_what_it_is_and_imports_nothing(folder):
    """A folder's `__init__` says what it holds and who calls it, and imports nothing, so that
    importing one of its modules brings no other with it."""
    name = f"{ENGINE}.{folder}"
    assert ast.get_docstring(ast.parse(MODULES[name].read_text())), f"{name} has no docstring"
    assert not IMPORTS[name], f"{name} imports {sorted(IMPORTS[name])}"


def test_engine_imports_go_down_the_folders():
    """A module of a folder imports modules of its folder or of folders below it, and none
    imports `_lazy/__init__`, the top."""
    upward = []
    for m, ts in IMPORTS.items():
        if _folder(m) is None:
            continue
        for t in ts:
            if t == ENGINE or (_folder(t) and FOLDERS.index(_folder(t)) < FOLDERS.index(_folder(m))):
                upward.append(f"{m} ({_folder(m)}) -> {t} ({_folder(t) or 'top'})")
    assert not upward, upward


def test_public_package_reaches_the_engine_by_folders():
    """The public modules import engine modules by their folders (`_lazy.graph.tensor`); only
    `torch_xla/__init__` and `_XLAC` import `_lazy` itself (to install it)."""
    top = sorted(f"{m} -> {t}" for m, ts in IMPORTS.items() for t in ts
                 if t == ENGINE and not m.startswith(ENGINE) and m not in ("torch_xla", "torch_xla._XLAC"))
    assert not top, top


def _exports(folder):
    """The names a folder's `__init__` exports to the public package (its `__all__`)."""
    for node in ast.parse(MODULES[f"{ENGINE}.{folder}"].read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            return set(ast.literal_eval(node.value))
    return set()


def _engine_imports_of_public_modules():
    """(module, folder or the engine path imported, names) for each import of the engine in
    a public module's source."""
    found = []
    for name, path in MODULES.items():
        if name.startswith(ENGINE + ".") or name == ENGINE:
            continue
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [(name, a.name, None) for a in node.names if a.name.startswith(ENGINE + ".")]
            elif isinstance(node, ast.ImportFrom):
                module = ".".join(base[:len(base) - node.level + 1] + [node.module or ""]).rstrip(".") \
                    if node.level else node.module
                if module.startswith(ENGINE + "."):
                    found.append((name, module, [a.name for a in node.names]))
    return found


def test_public_modules_import_only_the_folders_exports():
    """The door: a public module imports from the engine only what a folder's `__init__`
    exports (`from torch_xla._lazy.graph import tensor`), never a module's insides
    (`from torch_xla._lazy.graph.tensor import wrap`) or a module not exported."""
    wrong = []
    for name, module, names in _engine_imports_of_public_modules():
        folder = module.split(".")[2]
        if names is None or module != f"{ENGINE}.{folder}" or folder not in FOLDERS:
            wrong.append(f"{name}: {module}")
        else:
            wrong += [f"{name}: {module}.{n} (not in its __all__)" for n in names if n not in _exports(folder)]
    assert not wrong, wrong


def test_every_export_is_imported_by_the_public_package():
    """A folder exports what the public package uses, nothing stale."""
    used = {}
    for _, module, names in _engine_imports_of_public_modules():
        used.setdefault(module.split(".")[2], set()).update(names or ())
    stale = sorted(f"{f}.{n}" for f in FOLDERS for n in _exports(f) - used.get(f, set()))
    assert not stale, stale


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_short(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines (at most {MAX_LINES}: split it by what it does)"


def test_public_modules_reach_the_engine_through_its_modules():
    """One door: public modules call the engine's modules the folders export; `_XLAC` (what user scripts call,
    named as torch_xla's C++ extension) wraps the same calls, and no module goes through it."""
    through = sorted(m for m, ts in IMPORTS.items() if "torch_xla._XLAC" in ts and m != "torch_xla")
    assert not through, through


def _package(name):
    """The public package a module is in: its first two parts, or `torch_xla` itself for the
    modules beside the packages (torch_xla.py, _XLAC.py...: their circles are the module test's)."""
    package = ".".join(name.split(".")[:2])
    return package if package in MODULES and MODULES[package].name == "__init__.py" else "torch_xla"


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
