"""Each public helper's docstring names the notebooks that use it, and some do.

"Used by" is read from the notebooks' own imports: `from helpers... import name`, or a
module imported from helpers and used as `module.name`. A helper no notebook uses is
not taught, so it does not belong in helpers/.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import types
from pathlib import Path

import pytest
from conftest import NOTEBOOKS

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
MODULES = sorted(p.stem for p in HELPERS.glob("*.py") if p.stem != "__init__")
LIST = r"\d\d(?:–\d\d|-\d\d)?(?:(?:, |,? and )\d\d(?:–\d\d|-\d\d)?)*"
REF = re.compile(rf"\((?:notebooks? )?({LIST})\)|[Uu]sed by notebooks? ({LIST})")


def _said(doc: str) -> set[str]:
    """Return the notebooks a docstring names: "(03, 05-07)" or "Used by ..."."""
    out: set[str] = set()
    for match in REF.finditer(doc):
        for part in re.split(r",? and |, ", match[1] or match[2]):
            first, _, last = part.replace("–", "-").partition("-")
            out |= {f"{i:02d}" for i in range(int(first), int(last or first) + 1)}
    return out


def _python(source: str) -> ast.Module | None:
    lines = ["" if line.lstrip().startswith(("%", "!")) else line
             for line in source.split("\n")]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None  # a cell magic such as %%bash


def _uses(path: Path) -> set[str]:
    """Return the `module.name`s of helpers that a notebook's code imports or calls."""
    found, modules = set(), {}
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]  # no nbformat needed
    trees = [t for c in cells
             if c["cell_type"] == "code" and (t := _python("".join(c["source"])))]
    for tree in trees:
        for node in ast.walk(tree):
            if (isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("helpers")):
                for alias in node.names:
                    if node.module == "helpers" and alias.name in MODULES:
                        modules[alias.asname or alias.name] = alias.name
                    else:
                        found.add(alias.name)
    for tree in trees:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in modules):
                found.add(node.attr)
    return found


USES = {p.name[:2]: _uses(p) for p in NOTEBOOKS}
def _is_class(obj: object) -> bool:
    """True for a class; an alias such as tuple[int, str] is none (3.10 says it is)."""
    return inspect.isclass(obj) and not isinstance(obj, types.GenericAlias)


PUBLIC = [(m, name) for m in MODULES
          for mod in [importlib.import_module(f"helpers.{m}")]
          for name in getattr(mod, "__all__", [])
          if inspect.isfunction(obj := getattr(mod, name)) or _is_class(obj)]


def _signature(module: str, name: str) -> str:
    """Return a function's annotations as text ("" for a class)."""
    obj = getattr(importlib.import_module(f"helpers.{module}"), name)
    return str(inspect.signature(obj)) if inspect.isfunction(obj) else ""


def test_the_reference_reader():
    assert _said("Return x (01, 03-05).") == {"01", "03", "04", "05"}
    assert _said("Used by notebooks 06, 12 and 15.") == {"06", "12", "15"}


@pytest.mark.parametrize(("module", "name"), PUBLIC,
                         ids=[f"{m}.{n}" for m, n in PUBLIC])
def test_docstring_names_the_notebooks_that_use_it(module, name):
    obj = getattr(importlib.import_module(f"helpers.{module}"), name)
    used = {number for number, names in USES.items() if name in names}
    if _is_class(obj):  # a type is used wherever what takes or returns it is
        used |= {number for m, f in PUBLIC
                 if re.search(rf"\b{name}\b", _signature(m, f))
                 for number, names in USES.items() if f in names}
    assert used, f"helpers.{module}.{name}: no notebook uses it; is it taught?"
    said = _said(inspect.getdoc(obj) or "")
    assert said == used, (f"helpers.{module}.{name}: its docstring names notebooks "
                          f"{sorted(said)}, but {sorted(used)} use it")
