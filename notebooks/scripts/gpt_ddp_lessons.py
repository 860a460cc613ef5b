"""Run notebook 15's two DDP lessons in one launch (torch starts once).

    torchrun --standalone --nproc-per-node=2 gpt_ddp_lessons.py --out build/gpt_ddp

gpt_ddp.py (float64: accumulation under no_sync equals one process), then
gpt_ddp_timing.py (float32: DDP and one process in alternating rounds), each
writing its own record to OUT. It takes their options. Copy the folder, not this
file.
"""

import gpt_ddp
import gpt_ddp_timing
from common import leave


def main() -> None:
    args = gpt_ddp.parse_args(__doc__)
    joined = gpt_ddp.join(args)
    gpt_ddp.run(args, *joined)
    gpt_ddp_timing.run(args, *joined)
    leave()


if __name__ == "__main__":
    main()
