"""Every script in notebooks/scripts/ can be copied on its own, and each one that joins
a process group does it with the same setup()."""

from __future__ import annotations

import ast

import pytest
from conftest import NOTEBOOK_DIR, foreign_imports

SCRIPTS = sorted((NOTEBOOK_DIR / "scripts").glob("*.py"))
SPAWNED = {"ddp_spawn_worker"}  # started by mp.spawn, not torchrun: no LOCAL_RANK

# The one process-group setup every torchrun script carries, word for word (issue 19):
# a learner who copies one script has it, and the copies cannot drift apart.
CANONICAL_SETUP = '''\
def setup(device: str = "auto") -> torch.device:
    """Join the process group torchrun describes; return this rank's device."""
    if "LOCAL_RANK" not in os.environ:
        raise SystemExit(f"start me with torchrun, e.g. torchrun --standalone "
                         f"--nproc-per-node=2 {os.path.basename(sys.argv[0])}")
    local_rank = int(os.environ["LOCAL_RANK"])  # this process's index on its machine
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])  # processes on this machine
    if device == "auto":  # a GPU for every process on this machine, or none
        device = "cuda" if torch.cuda.device_count() >= local_world else "cpu"
    if device == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise SystemExit(f"local rank {local_rank} has no GPU of its own: "
                             f"{torch.cuda.device_count()} visible on this machine")
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)  # binds the group to this GPU
        return dev
    dist.init_process_group("gloo")
    atexit.register(time.sleep, 0.2)  # workaround: gloo's threads finish freeing
    return torch.device("cpu")'''


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
def test_script_joins_its_group_with_the_canonical_setup(path):
    source = path.read_text()
    if path.stem in SPAWNED:
        pytest.skip(f"{path.name} is started by mp.spawn, not torchrun")
    if "init_process_group" not in source:  # joins through a sibling's setup(), or not
        joiners = [s for s in sorted(_siblings(path))
                   if "init_process_group" in path.with_name(f"{s}.py").read_text()]
        if not joiners:
            pytest.skip(f"{path.name} joins no process group")
        path = path.with_name(f"{joiners[0]}.py")  # whose setup() it joins through
        source = path.read_text()
    setup = _functions(path).get("setup")
    assert setup == CANONICAL_SETUP, (
        f"{path.name}: setup() must be tests/test_scripts.py's CANONICAL_SETUP, "
        "word for word")
    calls = source.count("init_process_group(")
    assert calls == 2, f"{path.name}: init_process_group outside setup(): {calls} calls"
