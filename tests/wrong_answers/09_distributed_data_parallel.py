"""Typical wrong answers to notebook 09's exercises: each check must say "not yet"."""

WRONG = {
    1: [  # forgets set_epoch: every epoch repeats epoch 0's order
        "def rank_loader(data, batch, rank, world, epoch):\n"
        "    sampler = DistributedSampler(data, world, rank, shuffle=True, seed=SEED)\n"
        "    return DataLoader(data, batch_size=batch // world, sampler=sampler)",
        # each rank takes the whole global batch instead of its share
        "def rank_loader(data, batch, rank, world, epoch):\n"
        "    sampler = DistributedSampler(data, world, rank, shuffle=True, seed=SEED)\n"
        "    sampler.set_epoch(epoch)\n"
        "    return DataLoader(data, batch_size=batch, sampler=sampler)",
        # shuffles in the DataLoader: every rank sees the whole data set
        "def rank_loader(data, batch, rank, world, epoch):\n"
        "    return DataLoader(data, batch_size=batch // world, shuffle=True)",
    ],
    2: ["answer = (64, 32)  # no rounding, no padding",
        "answer = (60, 69)  # micro-batches, not optimizer steps",
        "answer = (60, 34)  # the epoch's short last step forgotten"],
    3: ["answer = 1  # the mean keeps the scale",
        "answer = 2  # the square root of 4",
        "answer = 0.25"],
}
