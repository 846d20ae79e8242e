"""Static facts about nnrt's own source (nnrt_core, the shipped plugins and
schedulers): the import graph, private names reached across modules, module
and function sizes.  ``tests/test_architecture.py`` holds the rules; run this
file to print the findings:  python tests/architecture.py"""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Module", "load_modules", "import_cycles", "private_accesses", "long_functions", "plugin_surface_breaches",
           "dependency_internals", "PACKAGE_LAYERS", "package_of", "package_breaches", "ROOT"]

ROOT = Path(__file__).resolve().parent.parent


def package_dirs(root: Path = ROOT) -> list[Path]:
    """The first-party packages: the core, every plugin under plugins/, the schedulers."""
    return [root / "nnrt_core", *sorted((root / "plugins").glob("*/nnrt_*")), root / "schedulers" / "nnrt_schedulers"]


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: int
    imports: set[str] = field(default_factory=set)  #: first-party modules imported (anywhere in the file)
    defined: set[str] = field(default_factory=set)  #: names defined here (functions, classes, attributes)


def _module_name(path: Path, dirs: list[Path]) -> str:
    for d in dirs:
        if path.is_relative_to(d):
            parts = list(path.relative_to(d.parent).with_suffix("").parts)
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def _resolve(mod: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.name.split(".")
    if mod.path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _defined_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def load_modules(root: Path = ROOT) -> dict[str, Module]:
    """Every first-party module with its first-party imports (type-checking
    and function-level imports included: they are dependencies too)."""
    dirs = package_dirs(root)
    mods: dict[str, Module] = {}
    for d in dirs:
        for p in sorted(d.rglob("*.py")):
            text = p.read_text()
            tree = ast.parse(text)
            m = Module(_module_name(p, dirs), p, tree, len(text.splitlines()))
            m.defined = _defined_names(tree)
            mods[m.name] = m
    for m in mods.values():
        for node in ast.walk(m.tree):
            if isinstance(node, ast.Import):
                m.imports |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(m, node)
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    m.imports.add(sub if sub in mods else target)
        m.imports = {i for i in m.imports if i in mods and i != m.name}
    return mods


def import_cycles(mods: dict[str, Module]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(mods[v].imports):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(mods)))
    try:
        for v in sorted(mods):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return cycles


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_accesses(mods: dict[str, Module]) -> list[str]:
    """``from m import _x`` of a first-party module, and ``obj._x`` where ``_x``
    is not defined in the accessing module (``self``/``cls``/``super()`` are
    the object's own business)."""
    found = []
    for m in mods.values():
        for node in ast.walk(m.tree):
            if isinstance(node, ast.ImportFrom):
                target = _resolve(m, node)
                if target.split(".")[0] in {n.split(".")[0] for n in mods}:
                    found += [f"{m.name}:{node.lineno} from {target} import {a.name}"
                              for a in node.names if _is_private(a.name)]
            elif isinstance(node, ast.Attribute) and _is_private(node.attr) and node.attr not in m.defined:
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                    continue
                if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
                    continue
                found.append(f"{m.name}:{node.lineno} {ast.unparse(node)}")
    return found


def long_functions(mods: dict[str, Module], limit: int) -> list[str]:
    out = []
    for m in mods.values():
        for node in ast.walk(m.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append(f"{m.name}.{node.name}: {n} lines")
    return out


#: the bottom modules of nnrt_core: every package may import them; they import only each other
FOUNDATION = frozenset({"errors", "record", "logs", "gc_pause", "background", "version", "control", "entry_points"})
#: package of nnrt_core -> the packages it may import besides the foundation (docs/architecture.md shows
#: the same table); a top-level module is a package of its own, ``nnrt_core`` is the package's __init__
PACKAGE_LAYERS: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    "ir": [],
    "backend": ["ir"],
    "config": ["backend"],
    "hookspec": ["backend", "placement"],
    "registry_records": ["backend"],
    "registry": ["backend", "config", "hookspec", "registry_records"],
    "placement": ["ir", "backend", "config"],
    "passes": ["ir", "backend"],
    "frontends": ["ir"],
    "storage": ["ir"],
    "runtime": ["ir", "backend"],
    "compiler": ["ir", "backend", "config", "hookspec", "registry", "registry_records", "placement", "passes",
                 "frontends", "storage", "runtime"],
    "profiling": ["ir", "backend", "placement", "compiler", "runtime"],
    "session": ["ir", "backend", "config", "registry", "placement", "compiler", "runtime", "storage", "profiling"],
    "builder": ["ir", "backend", "config", "registry", "frontends", "compiler", "session"],
    "quantization": ["ir", "config", "registry", "passes", "frontends", "compiler", "session"],
    "tools": ["ir", "backend", "config", "registry", "placement", "passes", "frontends", "storage", "runtime",
              "compiler", "profiling", "session", "builder", "quantization"],
    "plugin_api": ["ir", "backend", "hookspec", "config", "registry", "placement", "frontends", "storage", "runtime",
                   "compiler"],
    "nnrt_core": ["ir", "backend", "config", "registry", "compiler", "runtime", "profiling", "session", "builder",
                  "tools"],
}.items()}


def package_of(module: str) -> str:
    """The package of an ``nnrt_core`` module (``nnrt_core.runtime.executor`` -> ``runtime``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_breaches(mods: dict[str, Module], layers: dict[str, frozenset[str]] = PACKAGE_LAYERS) -> list[str]:
    """Imports between nnrt_core packages that the layer table does not allow
    (each a back arrow or a dependency the table does not show)."""
    found = []
    for m in mods.values():
        if m.name.split(".")[0] != "nnrt_core":
            continue
        a = package_of(m.name)
        for i in sorted(m.imports):
            if i.split(".")[0] != "nnrt_core":
                continue
            b = package_of(i)
            if b == a or b in FOUNDATION and (a not in FOUNDATION or b in FOUNDATION):
                continue
            if b not in layers.get(a, ()):
                found.append(f"{a} -> {b}: {m.name} imports {i}")
    return found


#: what a plugin may import from the core: the plugin surface, the IR, the errors
PLUGIN_SURFACE = ("nnrt_core.plugin_api", "nnrt_core.ir", "nnrt_core.errors")
#: names a plugin may import from ``nnrt_core`` itself (the modules above; Ray also uses the user API)
CORE_NAMES = {"*": {"errors", "ir", "plugin_api"}, "nnrt_ray": {"Session", "ScheduleConfig"}}
#: another plugin's public module, the only one of it a plugin may import (declared as a dependency)
PLUGIN_PUBLIC = {"nnrt_numpy": ("nnrt_numpy.host_kernels",)}


def plugin_dirs(root: Path = ROOT) -> list[Path]:
    """Every plugin's package: the shipped backends, the schedulers, the example backend."""
    return [*sorted((root / "plugins").glob("*/nnrt_*")), root / "schedulers" / "nnrt_schedulers",
            *sorted((root / "examples").glob("*/nnrt_*"))]


def _within(name: str, allowed: tuple[str, ...] | set[str]) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


def plugin_surface_breaches(root: Path = ROOT) -> list[str]:
    """Imports of a plugin package that reach past the plugin surface: a core
    module other than :data:`PLUGIN_SURFACE`, or another plugin's internals."""
    found = []
    for d in plugin_dirs(root):
        own = d.name
        for p in sorted(d.rglob("*.py")):
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.Import):
                    targets = [(a.name, None) for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    targets = [(node.module or "", a.name) for a in node.names]
                else:
                    continue
                for mod, name in targets:
                    top = mod.split(".")[0]
                    if top == "nnrt_core":
                        ok = _within(mod, PLUGIN_SURFACE) or (
                            mod == "nnrt_core" and name in CORE_NAMES["*"] | CORE_NAMES.get(own, set()))
                    elif top.startswith("nnrt_") and top != own:
                        ok = _within(mod, PLUGIN_PUBLIC.get(top, ()))
                    else:
                        ok = True
                    if not ok:
                        found.append(f"{p.relative_to(root)}:{node.lineno} {ast.unparse(node)}")
    return found


#: ctypes' ways to load a shared library (calling into a dependency's binary); memmove & co. are ctypes' own
CTYPES_LOADERS = frozenset({"CDLL", "PyDLL", "WinDLL", "OleDLL", "LibraryLoader", "cdll", "pydll", "windll", "oledll",
                            "pythonapi", "find_library"})
#: the platform's C library (not a dependency's binary): the heap tuning calls glibc's ``mallopt``
PLATFORM_LIBRARIES = frozenset({"libc.so.6"})
#: the import machinery of the process: no first-party module changes it
IMPORT_STATE = frozenset({"modules", "meta_path", "path_hooks", "path_importer_cache"})


def _private_part(dotted: str) -> bool:
    return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in dotted.split("."))


def _third_party(dotted: str) -> bool:
    top = dotted.split(".")[0]
    return bool(top) and not top.startswith("nnrt_") and top not in sys.stdlib_module_names


_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.\w+)+$")


def _installed(top: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _external_aliases(tree: ast.Module) -> set[str]:
    """Local names bound to another distribution's modules or objects."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name.split(".")[0]) for a in node.names if _third_party(a.name)}
        elif isinstance(node, ast.ImportFrom) and not node.level and _third_party(node.module or ""):
            names |= {a.asname or a.name for a in node.names}
    return names


def _uses_of_internals(node: ast.AST, external: set[str]) -> str | None:
    """Why ``node`` reaches into a dependency's internals, the process's import state or a binary; None if not."""
    if isinstance(node, ast.Import):
        bad = [a.name for a in node.names if _third_party(a.name) and _private_part(a.name)]
        return f"imports private module {bad[0]}" if bad else None
    if isinstance(node, ast.ImportFrom) and not node.level and _third_party(node.module or ""):
        if _private_part(node.module or ""):
            return f"imports from private module {node.module}"
        bad = [a.name for a in node.names if _private_part(a.name)]
        if node.module == "ctypes" and any(a.name in CTYPES_LOADERS for a in node.names):
            return "loads a shared library through ctypes"
        return f"imports private name {bad[0]} of {node.module}" if bad else None
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        fn = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        arg = node.args[0] if node.args else None
        if fn in ("import_module", "__import__", "find_spec") and isinstance(arg, ast.Constant) \
                and isinstance(arg.value, str) and _third_party(arg.value) and _private_part(arg.value):
            return f"imports private module {arg.value} by name"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _DOTTED.match(node.value) \
            and _third_party(node.value) and _private_part(node.value) and _installed(node.value.split(".")[0]):
        return f"names private module {node.value}"
    if isinstance(node, ast.Attribute):
        base = node.value
        if isinstance(base, ast.Name) and base.id in external and _private_part(node.attr):
            return f"reads private attribute {base.id}.{node.attr}"
        if isinstance(base, ast.Name) and base.id == "ctypes" and node.attr in CTYPES_LOADERS:
            return f"loads a shared library through ctypes.{node.attr}"
        if isinstance(base, ast.Name) and base.id == "sys" and node.attr in IMPORT_STATE \
                and not isinstance(node.ctx, ast.Load):
            return f"replaces sys.{node.attr}"
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "sys" \
                and base.attr in IMPORT_STATE and node.attr not in ("get", "keys", "values", "items", "copy"):
            return f"changes sys.{base.attr} ({node.attr})"
    if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
        v = node.value
        if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "sys" \
                and v.attr in IMPORT_STATE:
            return f"writes sys.{v.attr}[...]"
    return None


def _own_private_names(trees: list[ast.Module]) -> set[str]:
    """Private names first-party code defines itself: functions, classes,
    module and class attributes, ``self.``/``cls.`` attributes, ``__slots__``."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                      for t in node.targets):
                names |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                          and isinstance(c.value, str)}
    return {n for n in names if _private_part(n)}


def _foreign_private(node: ast.AST, own: set[str]) -> str | None:
    """A private attribute no first-party code defines, read by name or written on another object."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2 \
            and node.func.id in ("getattr", "hasattr", "setattr", "delattr"):
        name = node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private_part(name.value) \
                and name.value not in own:
            return f"{node.func.id} of another package's private attribute {name.value}"
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private_part(node.attr) \
            and node.attr not in own and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
        return f"writes another package's private attribute {node.attr}"
    return None


def dependency_internals(root: Path = ROOT) -> list[str]:
    """First-party code (the core, the plugins, the schedulers, the example
    backend) that uses another distribution's private names (``_``-prefixed
    modules or attributes), changes ``sys.modules`` / ``sys.meta_path`` or
    loads a shared library through ctypes."""
    found = []
    files = [p for d in [root / "nnrt_core", *plugin_dirs(root)] for p in sorted(d.rglob("*.py"))]
    trees = {p: ast.parse(p.read_text()) for p in files}
    own = _own_private_names(list(trees.values()))
    for p, tree in trees.items():
        external = _external_aliases(tree)
        libc = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
                and isinstance(n.args[0], ast.Constant) and n.args[0].value in PLATFORM_LIBRARIES}
        for node in ast.walk(tree):
            why = None if id(node) in libc else _uses_of_internals(node, external) or _foreign_private(node, own)
            if why:
                found.append(f"{p.relative_to(root)}:{node.lineno} {why}")
    return found


if __name__ == "__main__":
    modules = load_modules()
    print("import cycles:", import_cycles(modules) or "none")
    print("private accesses:", *private_accesses(modules) or ["none"], sep="\n  ")
    print("functions over 80 lines:", *long_functions(modules, 80) or ["none"], sep="\n  ")
    print("modules over 450 lines:", *[f"{m.name}: {m.lines}" for m in modules.values() if m.lines > 450] or ["none"],
          sep="\n  ")
    print("plugin imports past the plugin surface:", *plugin_surface_breaches() or ["none"], sep="\n  ")
    print("package imports the layer table does not allow:", *package_breaches(modules) or ["none"], sep="\n  ")
    print("dependency internals, import state, ctypes:", *dependency_internals() or ["none"], sep="\n  ")
