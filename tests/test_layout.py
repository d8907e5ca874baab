r"""The package's layout shows its architecture: subpackages for data,
layers, training, evaluation and interpretation, every module importable,
and no import cycle between modules (imports at module level)."""
import ast
import importlib
import pkgutil

import pyg_degreembed

SUBPACKAGES = {'data', 'nn', 'training', 'evaluation', 'interpret'}


def modules():
    return sorted(m.name for m in pkgutil.walk_packages(
        pyg_degreembed.__path__, 'pyg_degreembed.'))


def imports_of(name: str) -> set:
    r"""The package modules :obj:`name` imports at module level."""
    module = importlib.import_module(name)
    tree = ast.parse(open(module.__file__).read())
    package = name if module.__file__.endswith('__init__.py') else \
        name.rsplit('.', 1)[0]
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')
                base = base[:len(base) - node.level + 1]
                target = '.'.join(base + ([node.module] if node.module
                                          else []))
            else:
                target = node.module or ''
            candidates = [target] + [f'{target}.{a.name}' for a in
                                     node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        found |= {c for c in candidates if c.startswith('pyg_degreembed')
                  and c in ALL}
    return found - {name}


ALL = set(modules()) | {'pyg_degreembed'}


def test_subpackages_and_every_module_imports():
    packages = {m.split('.')[1] for m in modules()
                if m.count('.') >= 2}
    assert SUBPACKAGES <= packages
    for name in modules():
        importlib.import_module(name)


def test_no_import_cycle():
    graph = {name: imports_of(name) for name in ALL
             if name != 'pyg_degreembed'}
    # A package's __init__ is not part of a cycle through its own modules
    # (Python imports it first); only module-to-module edges count.
    state = {}

    def visit(name, path):
        state[name] = 'open'
        for other in sorted(graph.get(name, ())):
            if other not in graph:
                continue
            if state.get(other) == 'open':
                cycle = path[path.index(other):] + [other]
                raise AssertionError('import cycle: ' + ' -> '.join(cycle))
            if other not in state:
                visit(other, path + [other])
        state[name] = 'done'

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
