"""Typical wrong answers to notebook 05's exercises: each check must say "not yet"."""

_ACCUM_OK = ("def accum_step(model, opt, loss_fn, xb, yb, parts=4):\n"
             "    opt.zero_grad(set_to_none=True)\n"
             "    total = torch.zeros((), dtype=xb.dtype)\n"
             "    for x, y in zip(xb.chunk(parts), yb.chunk(parts)):\n"
             "        loss = loss_fn(model(x), y) * (len(x) / len(xb))\n"
             "        loss.backward()\n"
             "        total += loss.detach()\n"
             "    opt.step()\n"
             "    return total")

WRONG = {
    1: [_ACCUM_OK.replace("* (len(x) / len(xb))", "/ parts"),  # equal weights
        "def accum_step(model, opt, loss_fn, xb, yb, parts=4):\n"
        "    for x, y in zip(xb.chunk(parts), yb.chunk(parts)):\n"
        "        train_step(model, opt, loss_fn, x, y)  # one update per slice\n"
        "    return loss_fn(model(xb), yb).detach()",
        _ACCUM_OK.replace("    opt.zero_grad(set_to_none=True)\n", ""),  # no zero_grad
        # one backward over the summed losses: the same update, no memory saved
        "def accum_step(model, opt, loss_fn, xb, yb, parts=4):\n"
        "    opt.zero_grad(set_to_none=True)\n"
        "    loss = sum(loss_fn(model(x), y) * (len(x) / len(xb))\n"
        "               for x, y in zip(xb.chunk(parts), yb.chunk(parts)))\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    return loss.detach()",
        _ACCUM_OK.replace("    return total", "    # forgets to return the loss"),
        _ACCUM_OK.replace("xb.chunk(parts), yb.chunk(parts)",
                          "xb.split(parts), yb.split(parts)"),  # slices of `parts` rows
        _ACCUM_OK.replace("xb.chunk(parts), yb.chunk(parts)",
                          "xb.chunk(4), yb.chunk(4)"),  # ignores `parts`
        _ACCUM_OK.replace("    opt.zero_grad(set_to_none=True)\n", "").replace(
            "        loss.backward()\n",
            "        opt.zero_grad()  # inside the loop: only the last slice counts\n"
            "        loss.backward()\n"),
        _ACCUM_OK.replace("        total += loss.detach()\n", "").replace(
            "    return total", "    return loss.detach()  # the last slice's share"),
        _ACCUM_OK.replace("        total += loss.detach()\n",  # keeps every graph
                          "        total = total + loss\n"),
        _ACCUM_OK.replace("    total = torch.zeros((), dtype=xb.dtype)\n",  # a float
                          "    total = 0.0\n").replace(
            "        total += loss.detach()\n", "        total += loss.item()\n"),
        ],
    2: ["def predict_bytes(m32, m64, batch):\n"
        "    return m64 * batch / 64  # proportional: no intercept",
        "def predict_bytes(m32, m64, batch):\n"
        "    return m32 * batch / 32  # proportional, from the other point",
        "def predict_bytes(m32, m64, batch):\n"
        "    return saved_bytes(cnn, batch)  # measured, not predicted",
        "def predict_bytes(m32, m64, batch):\n"
        "    return m32 + batch * (m64 - m32) / 32  # the line, shifted by 32 rows",
        "def predict_bytes(m32, m64, batch):\n"
        "    return m32 + (batch - 32) * (m64 - m32) / 64  # slope a factor 2 off",
        "def predict_bytes(m32, m64, batch):\n"
        "    return m32 + 968 * (m64 - m32) // 32  # right only at batch 1000"],
    3: ["def largest_batch(budget, lo=1, hi=4096):\n"
        "    b = hi\n"
        "    while saved_bytes(cnn, b) > budget:\n"
        "        b //= 2  # halving: a power of two\n"
        "    return b",
        "def largest_batch(budget, lo=1, hi=4096):\n"
        "    while hi - lo > 1:\n"
        "        mid = (lo + hi) // 2\n"
        "        lo, hi = (mid, hi) if saved_bytes(cnn, mid) <= budget else (lo, mid)\n"
        "    return hi  # off by one: the first batch that does not fit",
        "def largest_batch(budget, lo=1, hi=4096):\n"
        "    while hi - lo > 1:  # searches with the global BUDGET, not its argument\n"
        "        mid = (lo + hi) // 2\n"
        "        lo, hi = (mid, hi) if saved_bytes(cnn, mid) <= BUDGET else (lo, mid)\n"
        "    return lo",
        "def largest_batch(budget, lo=1, hi=4096):\n"
        "    per_row = saved_bytes(cnn, 2) - saved_bytes(cnn, 1)\n"
        "    return budget // per_row  # a line that forgets the fixed bytes"],
}
