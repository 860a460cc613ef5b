"""notebooks/scripts/ is one unit a learner copies whole: it needs torch alone, and
every script that joins a process group does it through common.setup."""

from __future__ import annotations

import ast

import pytest
from conftest import NOTEBOOK_DIR, foreign_imports

SCRIPTS = sorted((NOTEBOOK_DIR / "scripts").glob("*.py"))
SPAWNED = {"ddp_spawn_worker"}  # started by mp.spawn, not torchrun: no LOCAL_RANK


def _functions(path) -> dict[str, str]:
    source = path.read_text()
    return {node.name: ast.get_source_segment(source, node)
            for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_script_imports_only_torch_stdlib_and_siblings(path):
    foreign = foreign_imports(path, allowed={p.stem for p in SCRIPTS})
    assert not foreign, (f"{path.name} imports {sorted(foreign)}: a copied scripts/ "
                         "folder must run with torch alone")


def _siblings(path) -> set[str]:
    """Return the sibling scripts that `path` imports."""
    stems = {p.stem for p in SCRIPTS}
    tree = ast.parse(path.read_text())
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
              for a in n.names}
    return names & stems


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_script_joins_its_group_through_common_setup(path):
    """One setup for the folder: common.py's. A copy elsewhere could drift from it."""
    if path.stem in SPAWNED:
        pytest.skip(f"{path.name} is started by mp.spawn, not torchrun")
    own = {"setup", "leave", "sync", "clock"} & _functions(path).keys()
    if path.stem != "common":
        assert not own, (f"{path.name} defines its own {sorted(own)}: import them "
                         "from common.py")
    source = path.read_text()  # a "fake" world (planning, no processes) is no join
    calls = source.count("init_process_group(") - source.count(
        'init_process_group("fake"')
    expected = 2 if path.stem == "common" else 0  # nccl, gloo: both in common.setup
    assert calls == expected, (f"{path.name}: {calls} init_process_group call(s), "
                               f"expected {expected}: join through common.setup")


def _family(stem: str) -> str:
    return stem.split("_")[0]  # ddp, comm, prof, pipe, fsdp, gpt (gpt.py: gpt)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_no_import_crosses_families(path):
    """A script imports only common.py and scripts of its own family (the prefix)."""
    crossing = {s for s in _siblings(path) - {"common"}
                if _family(s) != _family(path.stem)}
    assert not crossing, (f"{path.name} imports {sorted(crossing)} of another family: "
                          "move what is shared into common.py")
