"""Typical wrong answers to notebook 14's exercises: each check must say "not yet"."""

WRONG = {
    1: [
        "answer = 0.7 * GPU_BYTES / 16  # DDP: every GPU holds the whole state",
        "answer = GPU_BYTES * 12 / 16  # forgot the 30 % left for activations",
        "answer = 0.7 * 80e9 * 12 / 16  # 80 GB as 80e9 bytes, not 80 GiB",
        "answer = 0.7 * GPU_BYTES * 12 / 2  # bf16 weights only, 2 bytes each",
        "answer = 0.7 * GPU_BYTES * 12 / 12  # no gradients: 4 + 8 bytes",
        "answer = 0.7 * GPU_BYTES * 12 / 20  # DDP's default buckets counted too",
        "answer = 0.8 * GPU_BYTES * 8 / 16  # the numbers of another exercise",
        "answer = 0.7 * GPU_BYTES * 8 / 16  # 8 GPUs, as in a DGX node",
        "answer = 0.8 * GPU_BYTES * 12 / 16  # 80 % of each GPU",
        # a wrong method that used to land on the right number: 8 GPUs / 16 bytes
        "answer = 0.7 * GPU_BYTES / 2",
        # a factor off: the 12 GPUs counted twice
        "answer = 0.7 * GPU_BYTES * 12 * 12 / 16",
        # the GPU this machine has (or none), not the exercise's 80 GiB
        "answer = 0.7 * (torch.cuda.get_device_properties(0).total_memory if "
        "torch.cuda.is_available() else 16 * 2**30) * 12 / 16",
        # 79.6 GiB, not the exercise's 80 GiB: 0.5 % low
        "answer = 0.7 * 79.6 * 2**30 * 12 / 16",
        # rounded down too far: 44.9 billion fills 99.6 % of the 70 %
        "answer = 44.9e9",
    ],
    2: [
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(Checkpointed(stage1), stage2)  # the other stage",
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(Checkpointed(stage1), Checkpointed(stage2))",
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(stage1, stage2)  # nothing checkpointed",
        # both stages inside one checkpoint
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return Checkpointed(nn.Sequential(stage1, stage2))",
        # half the inputs: stage 1 left out
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(Checkpointed(stage2))",
        # a shortcut: stage 1's output detached, so stage 1 never trains
        "class Detach(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x.detach()\n\n"
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(stage1, Detach(), Checkpointed(stage2))",
        # stage 2 run twice in forward, no memory saved: the rerun without the point
        "class Twice(nn.Module):\n"
        "    def __init__(self, stage):\n"
        "        super().__init__()\n"
        "        self.stage = stage\n"
        "    def forward(self, x):\n"
        "        with torch.no_grad():\n"
        "            self.stage(x)\n"
        "        return self.stage(x)\n\n"
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(stage1, Twice(stage2))",
        # the reentrant checkpoint on stage 1, which sees only data: no gradients
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(Checkpointed(stage1, use_reentrant=True), stage2)",
    ],
    3: [
        "answer = 24 * 512 // 2  # as if each rank sent half the outputs",
        "answer = 24 * 4 * 512  # the outputs of `up`, 4 x dim wide",
        "answer = 512 * 4 * 512 // 2  # one rank's shard of down's weight",
        "answer = 6 * 24 * 512  # every block's all-reduce in one forward",
        "answer = 2 * 24 * 512  # forward and backward counted together",
        "answer = 24 * 512 * 8  # float64 bytes, not values",
        "answer = 32 * 256  # the §6 run's batch and dim, not this model's",
        "answer = tp.forward_elements  # read from the §6 run",
        "answer = 24 + 512  # added, not multiplied",
        # the follow-up question (dim=4096) answered instead: lands on float64 bytes
        "answer = 24 * 4096",
        # the batch halved per rank, as if TP split the data like DDP
        "answer = 12 * 512",
        # up's per-rank width (4 x dim / 2) times the batch
        "answer = 24 * 1024",
        # float32 bytes, and bf16 bytes: counted in bytes, not values
        "answer = 24 * 512 * 4",
        "answer = 24 * 512 * 2  # bf16",
    ],
}
