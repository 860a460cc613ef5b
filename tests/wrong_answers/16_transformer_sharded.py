"""Typical wrong answers to notebook 16's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def bytes_per_rank(n, world, stage):\n"
        "    return 16 * n if stage == 'ddp' else 16 * n / world  # zero2 as FSDP2",
        "def bytes_per_rank(n, world, stage):\n"
        "    if stage == 'ddp':\n"
        "        return 16 * n\n"
        "    if stage == 'zero2':  # only Adam's state sharded: that is ZeRO-1\n"
        "        return 8 * n + 8 * n / world\n"
        "    return 16 * n / world",
        "def bytes_per_rank(n, world, stage):\n"
        "    return {'ddp': 12, 'zero2': 4 + 8 / world, 'fsdp': 12 / world}[stage] * n"
        "  # gradients forgotten"],
    2: ["answer = ('S(0)', 'S(0)')  # as if rows were split, like q, k, v",
        "answer = ('_S(0, 2)', 'S(1)')  # a strided shard, as for a column split",
        "answer = ('S(1)', 'S(1)')  # FSDP2 shards the same dim as TP"],
    3: ["answer = (56, 104)  # a reduce-scatter per unit and micro-batch",
        "answer = (7, 56)  # forward all-gathers only, none in backward",
        "answer = (1, 104)  # one reduce-scatter per step for the whole model",
        "answer = (7, 112)  # the root gathered again in backward too"],
}
