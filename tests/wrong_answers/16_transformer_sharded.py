"""Typical wrong answers to notebook 16's exercises: each check must say "not yet"."""


def _split(ddp, zero1, zero2, zero3, divide: str = "world", stages=None) -> str:
    """Return a bytes_per_rank that keeps `whole` bytes per parameter and divides
    `split` by `divide`, from a (whole, split) pair per stage."""
    stages = stages or ("ddp", "zero1", "zero2", "zero3")
    table = dict(zip(stages, (ddp, zero1, zero2, zero3), strict=True))
    return ("def bytes_per_rank(n, world, stage):\n"
            f"    whole, split = {table}[stage]\n"
            f"    return whole * n + split * n / {divide}")


WRONG = {
    1: [
        # the float32 master weights forgotten: 2 + 2 + 8
        _split((12, 0), (4, 8), (2, 10), (0, 12)),
        # ZeRO-1 written as ZeRO-2: the gradients divided too
        _split((16, 0), (2, 14), (2, 14), (0, 16)),
        # only the two moments counted as optimizer state
        _split((16, 0), (8, 8), (6, 10), (0, 16)),
        # FSDP2's float32 layout (4 + 4 + 8) put into ZeRO's stages
        _split((16, 0), (8, 8), (4, 12), (0, 16)),
        # ZeRO-3 keeping the bf16 weights whole, as ZeRO-2 does
        _split((16, 0), (4, 12), (2, 14), (2, 14)),
        # divided by world - 1, not world (a factor off)
        _split((16, 0), (4, 12), (2, 14), (0, 16), "max(world - 1, 1)"),
        # bits, not bytes
        _split((128, 0), (32, 96), (16, 112), (0, 128)),
        # right only at the notebook's size: N, not the argument n
        "def bytes_per_rank(n, world, stage):\n"
        "    whole, split = {'ddp': (16, 0), 'zero1': (4, 12), 'zero2': (2, 14),\n"
        "                    'zero3': (0, 16)}[stage]\n"
        "    return whole * N + split * N / world",
        # right only on 8 ranks: the world hard-coded
        _split((16, 0), (4, 12), (2, 14), (0, 16), "8"),
        # half the inputs: the stages of the old exercise only
        _split((16, 0), (4, 12), (2, 14), (0, 16),
               stages=("ddp", "zero1", "zero2", "fsdp")),
        # a wrong method that lands on the right number on 2 ranks only: ZeRO-2 as
        # ZeRO-1 less half the gradients
        "def bytes_per_rank(n, world, stage):\n"
        "    zero1 = 4 * n + 12 * n / world\n"
        "    return {'ddp': 16 * n, 'zero1': zero1, 'zero2': zero1 - n,\n"
        "            'zero3': 16 * n / world}[stage]",
        # DDP's bytes divided by the ranks for every stage
        "def bytes_per_rank(n, world, stage):\n"
        "    return 16 * n / world",
        # float32 gradients, as FSDP2 keeps them: 2 + 4 + 12 bytes
        "def bytes_per_rank(n, world, stage):\n"
        "    w, g, o = 2 * n, 4 * n, 12 * n\n"
        "    return {'ddp': w + g + o, 'zero1': w + g + o / world,\n"
        "            'zero2': w + (g + o) / world,\n"
        "            'zero3': (w + g + o) / world}[stage]",
    ],
    2: [
        "answer = ('S(0)', 'S(0)')  # as if rows were split, like q, k, v",
        "answer = ('_S(0, 2)', 'S(1)')  # a strided shard, as for a column split",
        "answer = ('S(1)', 'S(1)')  # FSDP2 shards the same dim as TP",
        "answer = ('S(1)', 'S(0)')  # the two mesh dims swapped",
        "answer = ('R', 'S(1)')  # as if FSDP2 left TP's shards whole",
        "answer = ('S(0)', 'R')  # as if TP left the row-split weight whole",
        "answer = ('Shard(dim=0)', 'Shard(dim=1)')  # not as §5 prints them",
        # another weight's placements, read from the run
        "answer = tuple(mesh[0].placements['tok.weight'])",
        "answer = ('S(0)', '_S(1, 2)')  # a strided shard on the tp dim",
        "answer = ('S(0)', 'P')  # as if the weight were a partial sum",
        "answer = ('R', 'R')  # nothing split",
    ],
    3: [
        "answer = (56, 104)  # a reduce-scatter per unit and micro-batch",
        "answer = (7, 56)  # forward all-gathers only, none in backward",
        "answer = (1, 104)  # one reduce-scatter per step for the whole model",
        "answer = (6, 96)  # the root forgotten: blocks only",
        "answer = (7, 112)  # the root gathered again in backward too",
        "answer = (7, 13)  # one micro-batch's all-gathers",
        "answer = (3, 20)  # §3's counts per step, copied",
        "answer = (7, 8 * 13 * 2)  # counted forward and backward twice",
        "answer = (104, 7)  # the two numbers swapped",
        "answer = (8, 104)  # the tied embedding and head as a unit of their own",
        "answer = (7, 96)  # the root's forward all-gather forgotten",
        "answer = (14, 104)  # a reduce-scatter in forward and in backward",
    ],
}
