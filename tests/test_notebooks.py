"""Hygiene of every notebook: structure, outputs, size and Colab conventions.

Also the course's contract for every notebook (COMMON template, issues 10, 12, 13):
one template (title cell, `## N · ` sections, a fixed tail, a **Next:** link), a word
budget, exercises with a check and a hidden solution, test plumbing in cell tags, no
hand-written verdicts in code, and a message on every numeric assert.
"""

from __future__ import annotations

import ast
import getpass
import re
import socket
from pathlib import Path

import pytest

pytest.importorskip("nbformat", reason="no nbformat: the notebook hygiene tests read "
                    "notebooks with it")
import nbformat
from conftest import NOTEBOOKS
from exercise_plugin import wrong_answers

from helpers.exercises import SOLUTION_RIGHT
from tools import notebook_conventions as conv
from tools.learner_time import markdown_words

pytestmark = pytest.mark.tooling  # the notebook files only: no torch runs

MAX_BYTES = 300_000
MAX_WORDS = 1_800  # markdown words per notebook (issue 12), about 30 minutes
LEAKS = [r"/root\b", r"/home/", r"/Users/", r"/work/", r"/tmp/", r"\.venv",
         r"site-packages", r"[A-Za-z]:\\\\"]

ids = [p.stem for p in NOTEBOOKS]


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _output_text(out: nbformat.NotebookNode) -> str:
    """Return every textual part of one output, tracebacks included."""
    parts = [out.get("text", ""), out.get("evalue", ""), *out.get("traceback", [])]
    for key, value in out.get("data", {}).items():
        if key.startswith("text/") or key == "application/json":
            parts.append(value if isinstance(value, str) else str(value))
    return "\n".join(parts)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"


def _kernel_reports() -> tuple[dict, dict]:
    """Return the kernelspec and language_info that the installed ipykernel reports,
    i.e. what JupyterLab writes into a notebook once its kernel has started."""
    from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict

    from tools import nbbuild

    spec = get_kernel_dict()
    kernelspec = {"display_name": spec["display_name"], "language": spec["language"],
                  "name": KERNEL_NAME}
    return kernelspec, nbbuild.language_info()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_kernelspec_is_what_ipykernel_reports(path):
    """Else JupyterLab rewrites it on opening, and the checkout turns dirty."""
    kernelspec, _ = _kernel_reports()
    stored = dict(_read(path).metadata.get("kernelspec", {}))
    assert stored == kernelspec, (
        f"{path.name}: kernelspec {stored} differs from ipykernel's {kernelspec}")


def test_nbbuild_writes_ipykernels_kernelspec():
    from tools import nbbuild

    assert nbbuild.KERNELSPEC == _kernel_reports()[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_language_info_is_what_the_kernel_reports(path):
    """All but "version", which is the Python that ran `make outputs`: on another
    Python JupyterLab rewrites that one field (see tests/browser/test_lab_opens.py)."""
    _, reported = _kernel_reports()
    stored = dict(_read(path).metadata.get("language_info", {}))
    version = stored.pop("version", None)
    reported.pop("version")
    assert stored == reported, (
        f"{path.name}: language_info {stored} differs from the kernel's {reported}; "
        "run `make outputs`")
    assert re.fullmatch(r"3\.\d+\.\d+", version or ""), (
        f"{path.name}: language_info.version {version!r} is not a Python version")


def test_language_info_versions_agree():
    """One `make outputs`, one Python: every notebook stores the same version."""
    versions = {p.name: _read(p).metadata.get("language_info", {}).get("version")
                for p in NOTEBOOKS}
    assert len(set(versions.values())) == 1, (
        f"notebooks were executed by different Pythons: {versions}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_valid_nbformat_with_cell_ids(path):
    nb = _read(path)
    nbformat.validate(nb)
    assert all(cell.get("id") for cell in nb.cells), "every cell needs an id"
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_title_matches_file_name(path):
    first = _read(path).cells[0]
    assert first.cell_type == "markdown"
    number = path.name[:2]
    assert first.source.startswith(f"# {number} · "), (
        f"the H1 must start with '# {number} · '")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_execution_counts_are_sequential(path):
    counts = [c.execution_count for c in _read(path).cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), (
        "run `make outputs` so every code cell is executed once, in order")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_errors_only_where_tagged(path):
    for i, cell in enumerate(_read(path).cells):
        if cell.cell_type != "code":
            continue
        tagged = "raises-exception" in _tags(cell)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert bool(errors) == tagged, (
            f"cell {i}: {'untagged error' if errors else 'tagged but raised nothing'}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_machine_specific_leaks(path):
    secrets = [re.escape(getpass.getuser()), re.escape(socket.gethostname())]
    patterns = LEAKS + [rf"\b{s}\b" for s in secrets if len(s) > 3 and s != "root"]
    for i, cell in enumerate(_read(path).cells):
        for out in cell.get("outputs", []):
            text = _output_text(out)
            for pat in patterns:
                assert not re.search(pat, text), f"cell {i} output leaks {pat!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_size_is_small(path):
    assert path.stat().st_size < MAX_BYTES


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_colab_badge_points_at_this_notebook(path):
    title = _read(path).cells[0].source
    assert conv.badge(path) in title, "run `make badges` to fix the Colab badge"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_colab_setup_cell_is_first_and_current(path):
    nb = _read(path)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert conv.COLAB_TAG in _tags(first_code)
    assert first_code.source == conv.colab_cell_source()
    assert first_code.metadata.get("cellView") == "form", "collapse it: make badges"
    assert first_code.metadata.get("jupyter", {}).get("source_hidden") is True
    assert first_code.outputs == [], "the Colab cell must be silent off Colab"
    assert nb.metadata.get("accelerator") == "GPU"


def test_badges_use_the_one_repository_url():
    url = conv.repo_url()
    assert url.startswith("https://github.com/") and url.count("/") == 4


# --- One template for all notebooks (COMMON.md; issue 13 §7) -------------------------

TITLE = re.compile(r"^# (\d\d) · \S.*$")
NUMBERED = re.compile(r"^## (\d+) · \S")
TAIL = ["## Pitfalls", "## Summary", "## Exercises", "## Further reading"]
REQUIRED_TAIL = ["## Summary", "## Exercises", "## Further reading"]
NB_LINK = re.compile(r"\[([^\]]+)\]\(((\d\d)_[\w-]+\.ipynb)(#[^)]*)?\)")
NEXT = re.compile(r"^\*\*Next:\*\* \[(\d\d) · [^\]]+\]"
                  r"\(((\d\d)_[\w-]+\.ipynb)\): \S.*$")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def _markdown(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """Return (cell index, source without fenced code blocks) of each markdown cell."""
    return [(i, FENCE.sub("", c.source)) for i, c in enumerate(nb.cells)
            if c.cell_type == "markdown"]


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return cell.metadata.get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_title_cell_follows_the_template(path):
    """Cell 0: H1, blank, badge, blank, summary, learn, prerequisites, hardware."""
    source = _read(path).cells[0].source
    lines = source.split("\n")
    where = f"{path.name} cell 0"
    assert TITLE.match(lines[0]), (
        f"{where}: line 1 must be '# NN · Title': {lines[0]!r}")
    layout = lines[:5] + [""] * (5 - len(lines[:5]))
    assert layout[1] == "" and layout[3] == "", (
        f"{where}: the badge must sit alone between blank lines (run `make badges`): "
        f"{layout[1:4]!r}")
    assert conv.BADGE_RE.fullmatch(layout[2]), (
        f"{where}: line 3 must be the Colab badge alone: {layout[2]!r}")
    assert layout[4].strip() and not layout[4].startswith(("**", "-", "#")), (
        f"{where}: line 5 must start the one/two-line summary: {layout[4]!r}")
    order = []
    for key in ("**What you will learn**", "**Prerequisites**: ", "**Hardware**: "):
        found = [n for n, line in enumerate(lines) if line.startswith(key)]
        assert len(found) == 1, f"{where}: need exactly one line starting {key!r}"
        order.append(found[0])
    assert order == sorted(order), (
        f"{where}: put What you will learn, Prerequisites, Hardware in that order")
    learn = order[0]
    assert lines[learn] == "**What you will learn**" and learn + 1 < len(lines) \
        and lines[learn + 1].startswith("- "), (
        f"{where}: '**What you will learn**' alone on its line, then '- ' bullets")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_prerequisites_link_earlier_notebooks(path):
    line = next((ln for ln in _read(path).cells[0].source.split("\n")
                 if ln.startswith("**Prerequisites**")), "")
    links = NB_LINK.findall(line)
    if path == NOTEBOOKS[0]:
        assert not links, (
            f"{path.name}: the first notebook's Prerequisites is plain text")
        return
    assert links, (f"{path.name} cell 0: Prerequisites must link the notebook(s) "
                   f"before it as [NN · Title](NN_file.ipynb): {line!r}")
    for text, target, number, _ in links:
        assert (path.parent / target).is_file(), (
            f"{path.name} cell 0: Prerequisites links {target}, which does not exist")
        assert text.startswith(f"{number} · "), (
            f"{path.name} cell 0: link text {text!r} must start with '{number} · '")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_sections_are_numbered_then_the_fixed_tail(path):
    """`## 1 · `, `## 2 · `, ... then Pitfalls, Summary, Exercises, Further reading."""
    headings = [(i, line) for i, src in _markdown(_read(path))
                for line in src.split("\n") if line.startswith("## ")]
    problems, numbered, tail = [], [], []
    for i, line in headings:
        match = NUMBERED.match(line)
        if match:
            numbered.append(int(match.group(1)))
            if tail:
                problems.append(
                    f"cell {i}: numbered section after {tail[-1]!r}: {line!r}")
        elif line.rstrip() in TAIL:
            tail.append(line.rstrip())
        else:
            problems.append(f"cell {i}: use '## N · Title' or one of {TAIL}: {line!r}")
    if numbered != list(range(1, len(numbered) + 1)):
        problems.append(f"sections must be numbered 1, 2, 3, ...: got {numbered}")
    if tail != [t for t in TAIL if t in tail]:
        problems.append(f"the tail must read {TAIL} in that order (at most once each): "
                        f"got {tail}")
    missing = [t for t in REQUIRED_TAIL if t not in tail]
    if missing:
        problems.append(f"missing {missing}")
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_next_link_ends_the_notebook(path):
    """The last markdown line links the next notebook; the last notebook has none."""
    md = _markdown(_read(path))
    nexts = [(i, ln) for i, src in md for ln in src.split("\n")
             if ln.lstrip("- ").startswith(("**Next:**", "Next:", "**Next**"))]
    position = NOTEBOOKS.index(path)
    if position == len(NOTEBOOKS) - 1:
        assert not nexts, f"{path.name} is the last notebook: no Next line: {nexts}"
        return
    i, last = md[-1][0], md[-1][1].rstrip().split("\n")[-1]
    match = NEXT.match(last)
    assert match, (f"{path.name} cell {i}: the last markdown line must be "
                   f"'**Next:** [NN · Title](NN_file.ipynb): what it does.': {last!r}")
    assert len(nexts) == 1, f"{path.name}: exactly one Next line, got {nexts}"
    number, target, target_number = match.groups()
    expected = NOTEBOOKS[position + 1].name
    assert target == expected, (
        f"{path.name} cell {i}: Next links {target}; the next notebook is {expected}")
    assert number == target_number, (
        f"{path.name} cell {i}: link text says {number}, target is {target}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_links_between_notebooks_resolve(path):
    broken = [(i, target) for i, src in _markdown(_read(path))
              for _, target, _, _ in NB_LINK.findall(src)
              if not (path.parent / target).is_file()]
    assert not broken, (
        f"{path.name}: links to missing notebooks (cell, target): {broken}")


# --- Budget and exercises (issue 12) ------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_word_budget(path):
    words = markdown_words(_read(path))
    assert words <= MAX_WORDS, (
        f"{path.name}: {words} markdown words, over the budget of {MAX_WORDS}")


MAX_CELL_LINES = 15  # learner-visible code per cell, not counting imports and blanks


def _code_lines(source: str) -> int:
    """Count a cell's non-blank lines outside import statements and magics."""
    python = _strip_magics(source)
    if python is None:
        return 0  # %%bash and the like: not Python code
    lines = python.split("\n")
    try:
        tree = ast.parse(python)
    except SyntaxError:
        return sum(1 for line in lines if line.strip())
    imports = {n for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
               for n in range(node.lineno, node.end_lineno + 1)}
    return sum(1 for n, line in enumerate(lines, 1)
               if line.strip() and n not in imports)


def test_code_line_counter_skips_imports_and_blanks():
    cell = ("import os\nfrom helpers import (\n    check,\n    try_gpu,\n)\n\n"
            "x = 1\n%time y = 2")
    assert _code_lines(cell) == 1, _code_lines(cell)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_code_cells_are_short(path):
    long = [(i, n) for i, cell in enumerate(_read(path).cells)
            if cell.cell_type == "code" and "solution" not in _tags(cell)
            and not cell.source.startswith("#@title")
            and (n := _code_lines(cell.source)) > MAX_CELL_LINES]
    assert not long, (f"{path.name}: code cells over {MAX_CELL_LINES} lines "
                      f"(cell index, lines): {long}")

def _output_texts(cell: nbformat.NotebookNode) -> str:
    return "\n".join(_output_text(o) for o in cell.get("outputs", []))


def _ends_with_checked_assert(source: str) -> bool:
    """True if the last statement is `assert check(...), "message"`."""
    try:
        body = ast.parse(_strip_magics(source) or "").body
    except SyntaxError:
        return False
    last = body[-1] if body else None
    return (isinstance(last, ast.Assert) and last.msg is not None
            and isinstance(last.test, ast.Call) and _name(last.test.func) == "check")


def bound_names(source: str) -> set[str]:
    """Return the names a cell binds at its top level (not inside its functions)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (*DEFINITIONS,)):
            names.add(node.name)
            return  # a function's own locals are not the notebook's names
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        if isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.Lambda, ast.comprehension)):
                visit(child)

    visit(ast.parse(_strip_magics(source) or ""))
    return names


def _ends_with_a_check_call(source: str) -> bool:
    """True if the last statement is a bare `check(...)`, which the wrong-answer
    plugin (tests/exercise_plugin.py) reruns after each wrong answer."""
    body = ast.parse(_strip_magics(source) or "").body
    last = body[-1] if body else None
    return (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
            and _name(last.value.func) == "check")


def _exercise_problems(path: Path) -> list[str]:
    cells = _read(path).cells
    problems = []
    exercises = [i for i, c in enumerate(cells) if "exercise" in _tags(c)]
    solutions = [i for i, c in enumerate(cells) if "solution" in _tags(c)]
    wrong = wrong_answers(path)
    if not 3 <= len(exercises) <= 4:
        problems.append(f"{len(exercises)} cells tagged 'exercise', want 3 to 4")
    paired = []
    for n, i in enumerate(exercises, start=1):
        cell = cells[i]
        if cell.cell_type != "code" or not _ends_with_a_check_call(cell.source):
            problems.append(f"cell {i} (exercise {n}): a code cell whose last "
                            "statement is a bare check(...) call")
        if "not answered yet" not in _output_texts(cell):
            problems.append(f"cell {i} (exercise {n}): stored output must say "
                            "'not answered yet' (run `make outputs`)")
        if not wrong.get(n):
            problems.append(f"exercise {n}: no typical wrong answer in "
                            f"tests/wrong_answers/{path.stem}.py")
        task = next((cells[j] for j in range(i - 1, -1, -1)
                     if cells[j].cell_type == "markdown"), None)
        numbers = re.findall(r"^\*\*(\d+)\. ", task.source if task else "", re.M)
        if numbers[-1:] != [str(n)]:
            problems.append(f"cell {i}: the markdown before exercise {n} must set it "
                            f"as a paragraph starting '**{n}. Title.**'")
        j = next((j for j in range(i + 1, len(cells)) if cells[j].cell_type == "code"),
                 None)
        if j is None or "solution" not in _tags(cells[j]):
            problems.append(f"cell {i} (exercise {n}): the next code cell must be "
                            "tagged 'solution'")
            continue
        paired.append(j)
        solution = cells[j]
        if solution.source.split("\n")[0] != conv.SOLUTION_TITLE or any(
                solution.metadata.get(k) != v for k, v in (
                    ("cellView", "form"), ("jupyter", {"source_hidden": True}))):
            problems.append(f"cell {j} (solution {n}): collapsed, with the title line "
                            "first (run `make badges`)")
        if not _ends_with_checked_assert(solution.source):
            problems.append(f"cell {j} (solution {n}): end with "
                            "`assert check(...), \"...\"`")
        if _output_texts(solution).strip() not in ("right", SOLUTION_RIGHT):
            problems.append(f"cell {j} (solution {n}): its stored output must be "
                            f"{SOLUTION_RIGHT!r} alone (check(..., solution=True)), "
                            "so it shows no answer and says whose it is")
        shared = sorted(bound_names(solution.source) & bound_names(cell.source))
        if shared:
            problems.append(f"cell {j} (solution {n}) rebinds the learner's names "
                            f"{shared}: give the solution its own names")
    stray = sorted(set(solutions) - set(paired))
    if stray:
        problems.append(f"cells {stray}: tagged 'solution' but follow no exercise")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_exercises_have_a_check_and_a_hidden_solution(path):
    problems = _exercise_problems(path)
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


def test_bound_names_sees_the_learners_names():
    src = ("import math as m\nanswer = 1\nfor i in range(2):\n    pass\n"
           "def f(x):\n    y = x\n    return y\nsq = [k * k for k in range(3)]")
    assert bound_names(src) == {"m", "answer", "i", "f", "sq"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_solution_details_blocks(path):
    found = [i for i, src in _markdown(_read(path))
             if re.search(r"<details>\s*<summary>\s*(<b>)?\s*Solution", src, re.I)]
    assert not found, (f"{path.name} cells {found}: solutions live in hidden "
                       "'solution' cells now, not <details> blocks")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_nbval_markers_are_tags_not_comments(path):
    found = [(i, line.strip()) for i, c in enumerate(_read(path).cells)
             if c.cell_type == "code" for line in c.source.split("\n")
             if re.match(r"\s*#\s*NBVAL_", line)]
    assert not found, (f"{path.name}: use cell tags (nbval-ignore-output, "
                       f"raises-exception, ...) instead of comments: {found}")


# --- Verdicts come from numbers; numeric asserts explain themselves (issue 10) -------

VERDICT_WORDS = re.compile(
    r"\b(faster|slower|wins|beats|gains?|worth|negligible|dominat\w*|cheaper|costlier"
    r"|bottlenecks?|scal(?:es?|ing)\s+(?:well|poorly|linearly))\b", re.IGNORECASE)
NUMERIC_CALLS = {"allclose", "isclose", "assert_close", "equal", "array_equal"}
ORDERING = (ast.Lt, ast.Gt, ast.LtE, ast.GtE)
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun"}  # their body is Python


def _strip_magics(source: str) -> str | None:
    """Return the cell as Python (magic lines blanked), or None if it is not Python
    (a cell magic such as %%bash or %%writefile)."""
    if source.lstrip().startswith("%%"):
        magic = source.lstrip()[2:].split(None, 1)[0] if source.lstrip()[2:] else ""
        if magic not in PYTHON_CELL_MAGICS:
            return None
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.split("\n"))


def _name(func: ast.expr) -> str:
    """Return the called name: `f` for f(...), `attr` for x.y.attr(...)."""
    return func.id if isinstance(func, ast.Name) else (
        func.attr if isinstance(func, ast.Attribute) else "")


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree)
            for child in ast.iter_child_nodes(node)}


def _allowed(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True if a literal sits where a verdict word may: see verdict_literals."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Call) and _name(parent.func) == "verdict" \
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
    code = _strip_magics(source)
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
    code = _strip_magics(source)
    if code is None:
        return []
    found = []
    for node in ast.walk(ast.parse(code)):
        if not (isinstance(node, ast.Call) and _name(node.func) == "verdict"):
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
    code = _strip_magics(source)
    if code is None:
        return []
    found = []
    for node in ast.walk(ast.parse(code)):
        if not isinstance(node, ast.Assert) or node.msg is not None:
            continue
        numeric = any(
            (isinstance(n, ast.Compare)
             and any(isinstance(op, ORDERING) for op in n.ops))
            or (isinstance(n, ast.Call) and _name(n.func) in NUMERIC_CALLS)
            for n in ast.walk(node.test))
        if numeric:
            found.append((node.lineno, ast.unparse(node)))
    return found


def _scan(path: Path, scanner) -> list[str]:
    problems = []
    for i, cell in enumerate(_read(path).cells):
        if cell.cell_type != "code":
            continue
        try:
            hits = scanner(cell.source)
        except SyntaxError as err:
            if "raises-exception" not in _tags(cell):
                problems.append(f"cell {i}: does not parse: {err.msg}")
            continue
        problems += [f"cell {i}, line {line}: {text!r}" for line, text in hits]
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_hand_written_verdicts_in_code(path):
    problems = _scan(path, verdict_literals)
    assert not problems, (
        f"{path.name}: a verdict word in a literal that a measurement could "
        "contradict; "
        "print it through helpers.verdict(value, bands) or `'a' if x > y else 'b'`:\n  "
        + "\n  ".join(problems))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_band_words_hold_no_numbers(path):
    found = _scan(path, numbered_band_words)
    assert not found, (f"{path.name}: band words name a figure that the value itself "
                       "may contradict; say it in words:\n  " + "\n  ".join(found))


def test_band_word_scanner_flags_a_number():
    src = 'verdict(r, [(1, "close"), (4, "about 2x, as widths say"), (9, f"{r}")])'
    assert numbered_band_words(src) == [(1, "about 2x, as widths say")]
    assert numbered_band_words('verdict(r, bands=[(2, "close")])') == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
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


# --- tools.notebook_conventions ------------------------------------------------------

def test_repository_url_reads_the_same_without_tomllib():
    """Python 3.10 has no tomllib: the regex fallback must agree with it."""
    text = (conv.ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert conv._repo_url_by_regex(text).rstrip("/") == conv.repo_url()
    with pytest.raises(ValueError, match="Repository"):
        conv._repo_url_by_regex("[project]\nname = 'x'\n")


@pytest.mark.parametrize("source", [
    "# 06 · T\n\n[![Open In Colab](a)](b)\nSummary.\n\n**What you will learn**",
    "# 06 · T\n\n[![Open In Colab](old)](old)\n\nSummary.\n\n**What you will learn**",
    "# 06 · T\nSummary.\n\n**What you will learn**",
])
def test_sync_lays_out_the_title_cell_as_the_template(source):
    badge = "[![Open In Colab](img)](target)"
    fixed = conv.title_cell_source(source, badge)
    assert fixed == f"# 06 · T\n\n{badge}\n\nSummary.\n\n**What you will learn**"
    assert conv.title_cell_source(fixed, badge) == fixed  # a second sync: no change
