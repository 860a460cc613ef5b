"""Typical wrong answers to notebook 15's exercises: each check must say "not yet"."""

_LOOP = ("def accumulate(model, x, y, accum):\n"
         "    pieces = zip(x.tensor_split(accum), y.tensor_split(accum))\n"
         "    for i, (xm, ym) in enumerate(pieces):\n"
         "        skip = model.no_sync() if {skip} else contextlib.nullcontext()\n")

WRONG = {
    1: ["answer = 6 * 123_587_328  # 6N alone: the attention term forgotten",
        "answer = 6 * (123_587_328 + 50304 * 768) + 12 * 12 * 1024 * 768"
        "  # the tied head counted twice",
        "answer = 2 * 123_587_328 + 4 * 12 * 1024 * 768  # forward only"],
    2: ["answer = round(100 * 40_000 * 6 * 1.3e9 / 989e12)  # 6N alone",
        "answer = round(100 * 40_000 * (6 * 1.3e9 + 12 * 24 * 2048 * 2048) / 1979e12)"
        "  # the sparse peak",
        "answer = round(100 * 40_000 * (2 * 1.3e9 + 4 * 24 * 2048 * 2048) / 989e12)"
        "  # forward only",
        "answer = round(100 * 40_000 * (6 * 1.3e9 + 12 * 24 * 2048 * 2048) / 989e12, 0)"
        "  # a float, not a whole number"],
    3: [_LOOP.format(skip="i < accum - 1")  # ddp_step of §4: equal sizes assumed
        + "        with skip:\n"
        "            (gpt.loss_fn(model(xm), ym) / accum).backward()",
        "def accumulate(model, x, y, accum):\n"
        "    for xm, ym in zip(x.tensor_split(accum), y.tensor_split(accum)):\n"
        "        (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()  # syncs",
        _LOOP.format(skip="i < accum - 1")
        + "        with skip:\n"
        "            gpt.loss_fn(model(xm), ym).backward()  # not weighted at all",
        _LOOP.format(skip="i < accum - 1")
        + "        loss = gpt.loss_fn(model(xm), ym) * len(xm) / len(x)  # outside\n"
        "        with skip:\n"
        "            loss.backward()",
        _LOOP.format(skip="i == 0")  # skips the first, syncs the rest
        + "        with skip:\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        # forward phase, then backward phase: real DDP then all-reduces during the first
        # backward (micro-batch 0's), and every micro-batch's activations stay alive
        "def accumulate(model, x, y, accum):\n"
        "    losses = []\n"
        "    pieces = zip(x.tensor_split(accum), y.tensor_split(accum))\n"
        "    for i, (xm, ym) in enumerate(pieces):\n"
        "        with model.no_sync() if i < accum - 1 else contextlib.nullcontext():\n"
        "            losses.append(gpt.loss_fn(model(xm), ym) * len(xm) / len(x))\n"
        "    for loss in losses:\n"
        "        loss.backward()",
        "def accumulate(model, x, y, accum):  # one backward of the summed losses\n"
        "    pieces = list(zip(x.tensor_split(accum), y.tensor_split(accum)))\n"
        "    with model.no_sync():\n"
        "        losses = [gpt.loss_fn(model(xm), ym) * len(xm) / len(x)\n"
        "                  for xm, ym in pieces[:-1]]\n"
        "    xm, ym = pieces[-1]\n"
        "    (sum(losses) + gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()"],
}
