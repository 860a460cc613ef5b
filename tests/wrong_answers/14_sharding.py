"""Typical wrong answers to notebook 14's exercises: each check must say "not yet"."""

WRONG = {
    1: ["answer = 0.8 * GPU_BYTES / 16  # DDP: every GPU holds the whole state",
        "answer = GPU_BYTES * 8 / 16  # forgot the 20 % left for activations"],
    2: ["def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(Checkpointed(stage1), stage2)  # the other stage",
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(Checkpointed(stage1), Checkpointed(stage2))",
        "def checkpoint_stage2(stage1, stage2):\n"
        "    return nn.Sequential(stage1, stage2)  # nothing checkpointed"],
    3: ["answer = 32 * 256 // 2  # as if each rank sent half the outputs",
        "answer = 32 * 1024  # the outputs of `up`, 4 x dim wide",
        "answer = 256 * 1024 // 2  # one rank's shard of the weight"],
}
