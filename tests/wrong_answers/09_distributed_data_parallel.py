"""Typical wrong answers to notebook 09's exercises: each check must say "not yet".

Written as an adversary would, one or more per class: the targeted misconception, a
factor off, right only at the test's sizes, a skipped point, the wrong thing left
behind, half the inputs, a wrong method that lands on the right number. No exercise
here depends on a device.
"""

_HEAD = "def rank_loader(data, batch, rank, world, epoch, seed=SEED):\n"

WRONG = {
    1: [  # forgets set_epoch: every epoch repeats epoch 0's order
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=seed)\n"
        "    return DataLoader(data, batch_size=batch // world, sampler=sampler)",
        # each rank takes the whole global batch instead of its share
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=seed)\n"
        "    sampler.set_epoch(epoch)\n"
        "    return DataLoader(data, batch_size=batch, sampler=sampler)",
        # shuffles in the DataLoader: every rank sees the whole data set
        _HEAD + "    return DataLoader(data, batch_size=batch // world, shuffle=True)",
        # right only at sizes that divide: the seeded order dealt by hand, no padding
        _HEAD
        + "    order = torch.randperm(len(data), generator=torch.Generator()"
        ".manual_seed(seed + epoch)).tolist()\n"
        "    return DataLoader(order[rank::world], batch_size=batch // world)",
        # right only where the ranks divide the batch: each share rounded up
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=seed)\n"
        "    sampler.set_epoch(epoch)\n"
        "    return DataLoader(data, batch_size=-(-batch // world), sampler=sampler)",
        # right only at 2 ranks: the share of the batch hard-coded
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=seed)\n"
        "    sampler.set_epoch(epoch)\n"
        "    return DataLoader(data, batch_size=batch // 2, sampler=sampler)",
        # half the inputs: the seed argument ignored (SEED instead)
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=SEED)\n"
        "    sampler.set_epoch(epoch)\n"
        "    return DataLoader(data, batch_size=batch // world, sampler=sampler)",
        # a wrong method that lands on the right order only where SEED is 0
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=epoch)\n"
        "    return DataLoader(data, batch_size=batch // world, sampler=sampler)",
        # trims instead of padding: the last samples are never seen
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=seed, "
        "drop_last=True)\n"
        "    sampler.set_epoch(epoch)\n"
        "    return DataLoader(data, batch_size=batch // world, sampler=sampler)",
        # drops each rank's last, short batch
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=seed)\n"
        "    sampler.set_epoch(epoch)\n"
        "    return DataLoader(data, batch_size=batch // world, sampler=sampler, "
        "drop_last=True)",
        # the sampler not shuffling: the stored order
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, shuffle=False)\n"
        "    return DataLoader(data, batch_size=batch // world, sampler=sampler)",
        # the wrong thing left behind: the right batches from a reseeded global RNG
        _HEAD
        + "    torch.manual_seed(seed + epoch)\n"
        "    order = torch.randperm(len(data)).tolist()\n"
        "    order += order[:-len(data) % world]\n"
        "    return DataLoader(order[rank::world], batch_size=batch // world)",
        # right only where the ranks do not divide the data: pads a whole world more
        _HEAD
        + "    order = torch.randperm(len(data), generator=torch.Generator()"
        ".manual_seed(seed + epoch)).tolist()\n"
        "    order += order[:world - len(data) % world]\n"
        "    return DataLoader(order[rank::world], batch_size=batch // world)",
        # padded and shuffled right, but each rank takes a block, not every world-th
        _HEAD
        + "    order = torch.randperm(len(data), generator=torch.Generator()"
        ".manual_seed(seed + epoch)).tolist()\n"
        "    order += order[:-len(data) % world]\n"
        "    per = len(order) // world\n"
        "    return DataLoader(order[rank * per:(rank + 1) * per], "
        "batch_size=batch // world)",
        # a factor off in the epoch: set_epoch(epoch + 1)
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=seed)\n"
        "    sampler.set_epoch(epoch + 1)\n"
        "    return DataLoader(data, batch_size=batch // world, sampler=sampler)",
        # the epoch counted twice: in the seed and in set_epoch
        _HEAD
        + "    sampler = DistributedSampler(data, world, rank, seed=seed + epoch)\n"
        "    sampler.set_epoch(epoch)\n"
        "    return DataLoader(data, batch_size=batch // world, sampler=sampler)",
    ],
    2: ["answer = (64, 32, 64)  # no rounding, no padding",
        "answer = (60, 69, 10)  # micro-batches, not optimizer steps",
        "answer = (60, 34, 60)  # the epoch's short last step forgotten",
        "answer = (60, 35, 8)  # 2048 - 34 x 60: the padding forgotten",
        "answer = (60, 35, 30)  # the last micro-batch taken as full",
        "answer = (30, 35, 10)  # one micro-batch per rank, not a step of 2",
        "answer = (60, 35)  # half the question",
        "answer = [64, 35, 10]  # the batch as asked",
        "answer = (60, 35, 2)  # the last step of one rank, not of all 5",
        "answer = (12, 35, 2)  # one rank's numbers throughout"],
    3: ["answer = 1  # the mean keeps the scale",
        "answer = 2  # the square root of 4",
        "answer = 0.25  # divided, not multiplied",
        "answer = 16  # the squared norm's factor",
        "answer = 64  # the batch, not the micro-batches",
        "answer = 8  # twice the micro-batches",
        "answer = '4'  # a string, not a number"],
}
