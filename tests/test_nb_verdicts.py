"""A sentence that judges a measurement is printed from the measurement: no verdict
word ("faster", "wins", "negligible", ...) in a string literal of notebook code unless
a measured value chooses it, no number in a verdict band's words, and a message on
every numeric assert.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytest.importorskip("nbformat", reason="no nbformat: the notebook hygiene tests read "
                    "notebooks with it")
from conftest import NOTEBOOKS
from notebook_reading import DEFINITIONS, IDS, call_name, read, strip_magics, tags

pytestmark = pytest.mark.tooling  # the notebook files only: no torch runs

VERDICT_WORDS = re.compile(
    r"\b(faster|slower|wins|beats|gains?|worth|negligible|dominat\w*|cheaper|costlier"
    r"|bottlenecks?|scal(?:es?|ing)\s+(?:well|poorly|linearly))\b", re.IGNORECASE)
NUMERIC_CALLS = {"allclose", "isclose", "assert_close", "equal", "array_equal"}
ORDERING = (ast.Lt, ast.Gt, ast.LtE, ast.GtE)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree)
            for child in ast.iter_child_nodes(node)}


def _allowed(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True if a literal sits where a verdict word may: see verdict_literals."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Call) and call_name(parent.func) == "verdict" \
                and child is not parent.func:
            return True
        if isinstance(parent, ast.IfExp) and child in (parent.body, parent.orelse):
            return True
        if isinstance(parent, ast.Assert) and child is parent.msg:
            return True
        if isinstance(parent, ast.Raise):
            return True
        owner = parents.get(parent)
        if isinstance(parent, ast.Expr) and isinstance(owner, DEFINITIONS) \
                and owner.body[0] is parent:
            return True  # a docstring
        child, parent = parent, parents.get(parent)
    return False


def _line(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> int:
    """Return the line of `node` or of its nearest ancestor that has one."""
    while node is not None and not hasattr(node, "lineno"):
        node = parents.get(node)
    return getattr(node, "lineno", 0)


def verdict_literals(source: str) -> list[tuple[int, str]]:
    """Return (line, text) of string literals holding a verdict word outside the
    allowed places: a verdict(...) call, a conditional expression's branches, an
    assert message, a raise, a docstring. f-strings count by their literal parts."""
    code = strip_magics(source)
    if code is None:
        return []
    tree = ast.parse(code)
    parents = _parents(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and VERDICT_WORDS.search(node.value) and not _allowed(node, parents):
            found.append((_line(node, parents), node.value))
    return sorted(found)


def numbered_band_words(source: str) -> list[tuple[int, str]]:
    """Return (line, words) of verdict() bands whose words hold a number: a band's
    words must stay true for every value in it, so they name no figure."""
    code = strip_magics(source)
    if code is None:
        return []
    found = []
    for node in ast.walk(ast.parse(code)):
        if not (isinstance(node, ast.Call) and call_name(node.func) == "verdict"):
            continue
        bands = node.args[1:2] + [k.value for k in node.keywords if k.arg == "bands"]
        for band in bands:
            for leaf in ast.walk(band):
                if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str) \
                        and re.search(r"\d", leaf.value):
                    found.append((leaf.lineno, leaf.value))
    return sorted(found)


def unexplained_asserts(source: str) -> list[tuple[int, str]]:
    """Return (line, code) of asserts that compare numbers but carry no message."""
    code = strip_magics(source)
    if code is None:
        return []
    found = []
    for node in ast.walk(ast.parse(code)):
        if not isinstance(node, ast.Assert) or node.msg is not None:
            continue
        numeric = any(
            (isinstance(n, ast.Compare)
             and any(isinstance(op, ORDERING) for op in n.ops))
            or (isinstance(n, ast.Call) and call_name(n.func) in NUMERIC_CALLS)
            for n in ast.walk(node.test))
        if numeric:
            found.append((node.lineno, ast.unparse(node)))
    return found


def _scan(path: Path, scanner) -> list[str]:
    problems = []
    for i, cell in enumerate(read(path).cells):
        if cell.cell_type != "code":
            continue
        try:
            hits = scanner(cell.source)
        except SyntaxError as err:
            if "raises-exception" not in tags(cell):
                problems.append(f"cell {i}: does not parse: {err.msg}")
            continue
        problems += [f"cell {i}, line {line}: {text!r}" for line, text in hits]
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_hand_written_verdicts_in_code(path):
    problems = _scan(path, verdict_literals)
    assert not problems, (
        f"{path.name}: a verdict word in a literal that a measurement could "
        "contradict; "
        "print it through helpers.verdict(value, bands) or `'a' if x > y else 'b'`:\n  "
        + "\n  ".join(problems))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_band_words_hold_no_numbers(path):
    found = _scan(path, numbered_band_words)
    assert not found, (f"{path.name}: band words name a figure that the value itself "
                       "may contradict; say it in words:\n  " + "\n  ".join(found))


def test_band_word_scanner_flags_a_number():
    src = 'verdict(r, [(1, "close"), (4, "about 2x, as widths say"), (9, f"{r}")])'
    assert numbered_band_words(src) == [(1, "about 2x, as widths say")]
    assert numbered_band_words('verdict(r, bands=[(2, "close")])') == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_numeric_asserts_have_messages(path):
    problems = _scan(path, unexplained_asserts)
    assert not problems, (
        f"{path.name}: give each numeric assert a message with the measured value and "
        "the limit, e.g. assert d < 1e-4, f\"max |diff| {d:.2e} exceeds 1e-4\":\n  "
        + "\n  ".join(problems))


def test_verdict_scanner_flags_planted_literals():
    planted = '''\
%timeit sum(range(10))
print("DDP is faster here")
msg = f"{s:.2f}x slower than one process"
label = {True: "wins", False: "loses"}[s > 1]
note = "the copy dominates"
'''
    found = [text for _, text in verdict_literals(planted)]
    assert found == ["DDP is faster here", "x slower than one process", "wins",
                     "the copy dominates"], found
    assert verdict_literals("%%time\nprint('faster')") == [(2, "faster")]  # Python


def test_verdict_scanner_allows_measured_forms():
    allowed = '''\
%matplotlib inline
import math
print(verdict(s, [(1.3, "gains little"), (math.inf, "is faster")], ideal=2))
print(helpers.verdict(s, bands=[(math.inf, "scales well")]))
print(f"{s:.2f}x: " + ("faster" if s > 1 else "slower"))
print(f"{'wins' if a < b else 'loses'} by {abs(a - b):.1f} ms")
assert s > 0, f"speed-up {s} is not faster than nothing"
if s < 0:
    raise ValueError("a negative speed-up is not worth printing")
def f():
    """Return whether the GPU is faster."""
    return "measured"
'''
    assert verdict_literals(allowed) == []
    assert verdict_literals("%%bash\necho 'faster'") == []  # a cell magic: not Python


def test_assert_scanner_wants_messages_on_numeric_checks():
    source = '''\
assert diff < 1e-4
assert torch.allclose(a, b)
assert torch.equal(a, b), "weights differ"
assert x.shape == (2, 3)
assert diff <= tol, f"max |diff| {diff:.2e} exceeds {tol}"
assert np.isclose(a, b) and ok
'''
    assert [line for line, _ in unexplained_asserts(source)] == [1, 2, 6]
