"""Typical wrong answers to notebook 15's exercises: each check must say "not yet"."""

_LOOP = ("def accumulate(model, x, y, accum):\n"
         "    for i, (xm, ym) in enumerate(zip(x.chunk(accum), y.chunk(accum))):\n"
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
        "  # forward only"],
    3: ["def accumulate(model, x, y, accum):\n"
        "    for xm, ym in zip(x.chunk(accum), y.chunk(accum)):  # syncs every time\n"
        "        (gpt.loss_fn(model(xm), ym) / accum).backward()",
        _LOOP.format(skip="i < accum - 1")
        + "        with skip:\n"
        "            gpt.loss_fn(model(xm), ym).backward()  # not divided by accum",
        _LOOP.format(skip="i < accum - 1")
        + "        loss = gpt.loss_fn(model(xm), ym) / accum  # forward outside\n"
        "        with skip:\n"
        "            loss.backward()",
        _LOOP.format(skip="i == 0")  # skips the first, syncs the rest
        + "        with skip:\n"
        "            (gpt.loss_fn(model(xm), ym) / accum).backward()"],
}
