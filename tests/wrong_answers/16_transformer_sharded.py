"""Typical wrong answers to notebook 16's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def bytes_per_rank(n, world, stage):  # the float32 master weights forgotten\n"
        "    whole, split = {'ddp': (12, 0), 'zero1': (4, 8), 'zero2': (2, 10),\n"
        "                    'fsdp': (0, 12)}[stage]\n"
        "    return whole * n + split * n / world",
        "def bytes_per_rank(n, world, stage):  # ZeRO-1 written as ZeRO-2\n"
        "    whole, split = {'ddp': (16, 0), 'zero1': (2, 14), 'zero2': (2, 14),\n"
        "                    'fsdp': (0, 16)}[stage]\n"
        "    return whole * n + split * n / world",
        "def bytes_per_rank(n, world, stage):  # §7's float32 bytes: 4 + 4 + 8\n"
        "    whole, split = {'ddp': (16, 0), 'zero1': (8, 8), 'zero2': (4, 12),\n"
        "                    'fsdp': (0, 16)}[stage]\n"
        "    return whole * n + split * n / world",
        "def bytes_per_rank(n, world, stage):  # divided by world - 1, not world\n"
        "    whole, split = {'ddp': (16, 0), 'zero1': (4, 12), 'zero2': (2, 14),\n"
        "                    'fsdp': (0, 16)}[stage]\n"
        "    return whole * n + split * n / max(world - 1, 1)"],
    2: ["answer = ('S(0)', 'S(0)')  # as if rows were split, like q, k, v",
        "answer = ('_S(0, 2)', 'S(1)')  # a strided shard, as for a column split",
        "answer = ('S(1)', 'S(1)')  # FSDP2 shards the same dim as TP"],
    3: ["answer = (56, 104)  # a reduce-scatter per unit and micro-batch",
        "answer = (7, 56)  # forward all-gathers only, none in backward",
        "answer = (1, 104)  # one reduce-scatter per step for the whole model",
        "answer = (7, 112)  # the root gathered again in backward too"],
}
