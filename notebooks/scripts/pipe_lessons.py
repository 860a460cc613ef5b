"""Run notebook 13's two lessons in one launch of two stages (torch starts once).

    torchrun --standalone --nproc-per-node=2 pipe_lessons.py --out D --chunks 4

pipe_manual.py's hand-written pipeline (its check and its sweep of split sizes), then
pipe_schedules.py's GPipe and 1F1B on the same batch, timed under the same
conditions; each writes its own records to D. It takes both scripts' options. Copy
the folder, not this file.
"""

from __future__ import annotations

from pathlib import Path

import pipe_manual
import pipe_schedules
from common import leave
from pipe_stages import join, stage_parser, synthetic_batch
from torch.distributed.elastic.multiprocessing.errors import record


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main() -> None:
    """Join the group, run both lessons on one batch, leave."""
    p = pipe_schedules.add_options(pipe_manual.add_options(stage_parser(__doc__)))
    args = p.parse_args()
    rank, device = join(args)
    x, y = synthetic_batch(args.batch, args.image)
    pipe_manual.run(args, rank, device, x, y)
    pipe_schedules.check_and_time(Path(args.out), x, y, args.chunks,
                                  args.schedule_repeats, device)
    leave()


if __name__ == "__main__":
    main()
