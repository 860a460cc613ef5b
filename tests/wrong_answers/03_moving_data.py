"""Typical wrong answers to notebook 03's exercises: each check must say "not yet"."""

_NEXT = "next(s for s, r in zip(sizes, rates) if r >= max(rates) / 2)"

WRONG = {
    1: ["def half_point(sizes, rates):  # the size of the best rate\n"
        "    return sizes[rates.index(max(rates))]",
        "def half_point(sizes, rates):  # half the best rate, not a size\n"
        "    return max(rates) / 2",
        "def half_point(sizes, rates):  # in KiB, not bytes\n"
        f"    return {_NEXT} // 1024",
        "def half_point(sizes, rates):  # its index, not its size\n"
        "    return next(i for i, r in enumerate(rates) if r >= max(rates) / 2)",
        "def half_point(sizes, rates):  # half the largest copy's rate, not the best\n"
        "    return next(s for s, r in zip(sizes, rates) if r >= rates[-1] / 2)",
        "def half_point(sizes, rates):  # half the mean rate\n"
        "    return next(s for s, r in zip(sizes, rates)\n"
        "                if r >= sum(rates) / len(rates) / 2)",
        "def half_point(sizes, rates):  # strictly above half: equal reaches it\n"
        "    return next(s for s, r in zip(sizes, rates) if r > max(rates) / 2)",
        "def half_point(sizes, rates):  # the last size below half\n"
        "    return max(s for s, r in zip(sizes, rates) if r < max(rates) / 2)",
        "def half_point(s, r):  # the kept table, whatever it is given\n"
        f"    return {_NEXT}",
        "def half_point(sizes, rates):  # the largest size reaching half\n"
        "    return max(s for s, r in zip(sizes, rates) if r >= max(rates) / 2)"],
    2: ["answer = {way: 8 if 'float16' in way else 16 for way in LINK}"
        "  # both float16 ways convert on the CPU",
        "answer = {way: 16 if way == 'float16' else 8 if 'float16' in way else 16\n"
        "          for way in LINK}  # the two float16 ways swapped",
        "answer = {way: (8 if way == 'float16' else 16) * 2**20 for way in LINK}"
        "  # bytes, not MiB",
        "answer = {way: 32 if way == 'float32' else 8 if way == 'float16' else 16\n"
        "          for way in LINK}  # the staging copy counted on the link",
        "answer = {way: 0 if 'pinned' in way else 8 if way == 'float16' else 16\n"
        "          for way in LINK}  # pinned memory sends nothing",
        "answer = min(times, key=times.get)  # the fastest way here, not bytes",
        "answer = {'float16': 8, 'float32': 16}  # half the ways",
        "answer = {way: 16 / 2 if 'float16' in way else 16 / 1 for way in LINK}"
        "  # half for float16, whatever does the converting"],
    3: ["def losses_batched(every=10):  # still one read per step\n"
        "    return losses_every_step()",
        "def losses_batched(every=10):  # a copy to the host every step\n"
        "    steps = [(xb @ w).square().mean().to('cpu') for xb in xs]\n"
        "    return torch.stack(steps).tolist()",
        "def losses_batched(every=10):  # writes each loss into a host tensor\n"
        "    host = torch.empty(len(xs))\n"
        "    for i, xb in enumerate(xs):\n"
        "        host[i] = (xb @ w).square().mean()\n"
        "    return host.tolist()",
        "def losses_batched(every=10):  # ignores `every`: one read at the end\n"
        "    return torch.stack([(xb @ w).square().mean() for xb in xs]).tolist()",
        "def losses_batched(every=10):  # blocks of 10 whatever `every` says\n"
        "    losses = torch.stack([(xb @ w).square().mean() for xb in xs])\n"
        "    return [v for block in losses.split(10) for v in block.tolist()]",
        "def losses_batched(every=10):  # blocks one step too long\n"
        "    losses = torch.stack([(xb @ w).square().mean() for xb in xs])\n"
        "    return [v for block in losses.split(every + 1) for v in block.tolist()]",
        "def losses_batched(every=10):  # drops the last, shorter block\n"
        "    logged, pending = [], []\n"
        "    for step, xb in enumerate(xs, start=1):\n"
        "        pending.append((xb @ w).square().mean())\n"
        "        if step % every == 0:\n"
        "            logged += torch.stack(pending).tolist()\n"
        "            pending = []\n"
        "    return logged",
        "def losses_batched(every=10):  # float64 on the device: other numbers\n"
        "    losses = [(xb.double() @ w.double()).square().mean() for xb in xs]\n"
        "    return [v for i in range(0, len(xs), every)\n"
        "            for v in torch.stack(losses[i:i + every]).tolist()]",
        "def losses_batched(every=10):  # the values read one by one with float()\n"
        "    losses = torch.stack([(xb @ w).square().mean() for xb in xs])\n"
        "    return [float(v) for v in losses]",
        "def losses_batched(every=10):  # builds a host tensor from device scalars\n"
        "    losses = [(xb @ w).square().mean() for xb in xs]\n"
        "    return [v for i in range(0, len(xs), every)\n"
        "            for v in torch.tensor(losses[i:i + every]).tolist()]"],
}
