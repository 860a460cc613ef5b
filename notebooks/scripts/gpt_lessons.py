"""Run notebook 16's lessons in one launch of 4 ranks (torch starts once).

    torchrun --standalone --nproc-per-node=4 gpt_lessons.py --out build/gpt

All 4 ranks measure the build (gpt_build.py, §1) and train and save the 2 x 2 mesh
(gpt_mesh.py, §5); then ranks 0 and 1, as FSDP2 alone, run the options
(gpt_options.py, §2-§3), the memory moments (gpt_memory.py, §4, §7) and the
strategies (gpt_strategies.py, §8), and resume the mesh's checkpoint on their own
layout (gpt_resume.py, §6): one `Pair` record each, OUT/fsdp_r{rank}.pt, while ranks
2 and 3 wait. It takes gpt_mesh.py's options. Copy the folder, not this file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gpt
import gpt_build
import gpt_mesh
import torch.distributed as dist
from common import leave, save_record, setup
from gpt_memory import memory
from gpt_options import options
from gpt_resume import Resumed, resume
from gpt_strategies import strategies
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.elastic.multiprocessing.errors import record


@dataclass
class Pair:
    """What ranks 0 and 1 write to OUT/fsdp_r{rank}.pt (notebook 16 reads them)."""

    mixed: dict  # gpt_options.py, §2: dtypes seen, bytes gathered
    accumulate: dict  # gpt_options.py, §3: weights, collectives
    memory: dict  # gpt_memory.py, §4, §7: by way, bytes after each moment
    strategies: dict  # gpt_strategies.py, §8: by strategy
    resume: Resumed  # gpt_resume.py, §6


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    args = gpt_mesh.parse_args(argv)
    gpt_mesh.quiet()
    device = setup(args.device)
    rank, out = dist.get_rank(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpt_build.run(device, out)
    gpt_mesh.run(args, device)
    group = dist.new_group([0, 1])  # another layout: FSDP2 alone, on ranks 0 and 1
    if rank < 2:
        pair = DeviceMesh.from_group(group, device.type)
        cfg, data, k = gpt.Config(), gpt.corpus(), args.steps
        two = Pair(**options(cfg, data, device, pair, rank, 2, k),
                   memory=memory(cfg, data, device, pair, rank, 2),
                   strategies=strategies(cfg, data, device, pair, rank, 2, k),
                   resume=resume(cfg, data, device, pair, (rank, 2), out / "ckpt", k,
                                 args.more))
        save_record(out / f"fsdp_r{rank}.pt", two)
    print(f"rank {rank}: done, results in {out}")
    leave()  # ranks 2 and 3 wait here


if __name__ == "__main__":
    main()
