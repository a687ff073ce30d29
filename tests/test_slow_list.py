"""tests/slow_tests.txt names tests that exist (a renamed test would silently join make test)."""

import ast
import functools
import pathlib

from cpu_budget import LIST, nodeid, read_list

ROOT = pathlib.Path(__file__).resolve().parent.parent


@functools.cache
def _functions(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_listed_test_exists():
    listed = read_list()
    assert len(listed) > 50, f"{LIST} lost its entries"
    missing = []
    for n in sorted(listed):
        path, _, rest = n.partition("::")
        name = rest.split("[", 1)[0].split("::")[-1]
        f = ROOT / path
        if not f.exists() or name not in _functions(f):
            missing.append(n)
    assert not missing, f"{LIST.name} names tests that do not exist (regenerate it: tests/cpu_budget.py): {missing[:5]}"


def test_the_xdist_group_suffix_is_not_part_of_the_id():
    assert nodeid("tests/test_compare.py::test_x[a-b]@compare") == "tests/test_compare.py::test_x[a-b]"
    assert nodeid("tests/test_docs_commands.py::test_doc_commands[README.md#Did it help?]") == \
        "tests/test_docs_commands.py::test_doc_commands[README.md#Did it help?]"
