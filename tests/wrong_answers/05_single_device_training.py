"""Typical wrong answers to notebook 05's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def accum_step(model, opt, loss_fn, xb, yb, parts=4):\n"
        "    opt.zero_grad(set_to_none=True)\n"
        "    for x, y in zip(xb.chunk(parts), yb.chunk(parts)):\n"
        "        (loss_fn(model(x), y) / parts).backward()  # equal weights\n"
        "    opt.step()\n"
        "    return loss_fn(model(xb), yb).detach()",
        "def accum_step(model, opt, loss_fn, xb, yb, parts=4):\n"
        "    for x, y in zip(xb.chunk(parts), yb.chunk(parts)):\n"
        "        train_step(model, opt, loss_fn, x, y)  # one update per slice\n"
        "    return loss_fn(model(xb), yb).detach()",
        "def accum_step(model, opt, loss_fn, xb, yb, parts=4):\n"
        "    for x, y in zip(xb.chunk(parts), yb.chunk(parts)):  # no zero_grad\n"
        "        (loss_fn(model(x), y) * (len(x) / len(xb))).backward()\n"
        "    opt.step()\n"
        "    return loss_fn(model(xb), yb).detach()"],
    2: ["def predict_bytes(m32, m64, batch):\n"
        "    return m64 * batch / 64  # proportional: no intercept",
        "def predict_bytes(m32, m64, batch):\n"
        "    return saved_bytes(cnn, batch)  # measured, not predicted"],
    3: ["def largest_batch(budget, lo=1, hi=4096):\n"
        "    b = hi\n"
        "    while saved_bytes(cnn, b) > budget:\n"
        "        b //= 2  # halving: a power of two\n"
        "    return b",
        "def largest_batch(budget, lo=1, hi=4096):\n"
        "    while hi - lo > 1:\n"
        "        mid = (lo + hi) // 2\n"
        "        lo, hi = (mid, hi) if saved_bytes(cnn, mid) <= budget else (lo, mid)\n"
        "    return hi  # off by one: the first batch that does not fit"],
}
