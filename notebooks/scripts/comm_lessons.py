"""Run notebook 11's seven lessons in one launch (torch starts once).

    TORCH_FR_BUFFER_SIZE=2000 torchrun --standalone --nproc-per-node=4 \
        comm_lessons.py --out build/comm

In the same processes, in turn: comm_collectives.py (§1), comm_ring.py (§2),
comm_bandwidth.py (§3), comm_buckets.py (§4), comm_overlap.py (§5), comm_compress.py
and comm_join.py (§6); each writes its own record to --out. It takes the family's
options (comm_model.py). Copy the folder, not this file.
"""

from __future__ import annotations

from pathlib import Path

import comm_bandwidth
import comm_buckets
import comm_collectives
import comm_compress
import comm_join
import comm_overlap
import comm_ring
from comm_model import parse_args
from common import leave, setup
from torch.distributed.elastic.multiprocessing.errors import record


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    device = setup(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    comm_collectives.run(out, device)
    comm_ring.run(out, device, args.ring_numel)
    comm_bandwidth.run(out, device, args.max_kib)
    comm_buckets.run(args, device)
    comm_overlap.run(args, device)
    comm_compress.run(args, device)
    comm_join.run(args)
    leave()


if __name__ == "__main__":
    main()
