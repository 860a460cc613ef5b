"""Typical wrong answers to notebook 15's exercises: each check must say "not yet".

Written as an adversary would, one or more of each class where the exercise has it:
the targeted misconception, a factor off, right only at the test's (or the notebook's)
sizes, a skipped point, the wrong thing left behind, half the inputs, and a wrong method
that lands near the right number. Exercises 1 and 2 are arithmetic on numbers given in
the question, with no device: "right only on a CPU" appears as reusing the notebook's
own CPU measurements or model. Exercise 3 runs on one process with a stand-in wrapper.
"""

_BIG = ("big = gpt.Config(vocab=50304, block=1024, layers=12, heads=12, dim=768)\n"
        "with torch.device('meta'):\n"
        "    n = gpt.count_params(gpt.GPT(big))\n")

_LOOP = ("def accumulate(model, x, y, accum):\n"
         "    pieces = zip(x.tensor_split(accum), y.tensor_split(accum))\n"
         "    for i, (xm, ym) in enumerate(pieces):\n"
         "        skip = model.no_sync() if {skip} else contextlib.nullcontext()\n")

_PER = "(6 * 1.3e9 + 12 * 24 * 4096 * 2048)"  # the model's FLOPs per token, exercise 2

WRONG = {
    1: [
        # the targeted misconceptions
        _BIG + "answer = 6 * n  # 6N alone: the attention term forgotten",
        _BIG + "answer = 6 * (n + 50304 * 768) + 12 * 12 * 1024 * 768  # head twice",
        # a factor off
        _BIG + "answer = 2 * n + 4 * 12 * 1024 * 768  # the forward only",
        _BIG + "answer = 6 * n + 6 * 12 * 1024 * 768  # half the scores: causal mask",
        _BIG + "answer = 8 * n + 16 * 12 * 1024 * 768  # a recomputed forward too",
        # a skipped point: the embedding 'does no arithmetic', yet it is the head
        _BIG + "answer = 6 * (n - 50304 * 768) + 12 * 12 * 1024 * 768",
        _BIG + "answer = 6 * (n - 25 * 768) + 12 * 12 * 1024 * 768  # norms dropped",
        # half the inputs: L or D left out of the attention term
        _BIG + "answer = 6 * n + 12 * 1024 * 768  # attention of one layer",
        _BIG + "answer = 6 * n + 12 * 12 * 1024 * 1024  # T x T, not T x D",
        # the wrong thing left behind / right only at the notebook's sizes
        "answer = fpt  # the notebook's own small model",
        _BIG + "answer = gpt.flops_per_token(big, n_params)  # the small model's N",
        _BIG + "answer = 6 * n + 12 * 12 * T * 768  # the notebook's context, 64",
        # a wrong method near the right number: every parameter slot, the tied twice
        _BIG + "with torch.device('meta'):\n"
        "    m = gpt.GPT(big)\n"
        "n = sum(p.numel() for _, p in m.named_parameters(remove_duplicate=False))\n"
        "answer = 6 * n + 12 * 12 * 1024 * 768",
        # the counter's figure under fused attention kernels, read in section 2
        _BIG + "answer = 6 * n + 14 * 12 * 1024 * 768  # backward's recompute counted",
        # half the inputs: the final norm left out, the head's width for the model's
        _BIG + "answer = 6 * (n - 768) + 12 * 12 * 1024 * 768",
        _BIG + "answer = 6 * n + 12 * 12 * 1024 * 64  # D per head, not the width",
        # right only at another config: GPT-2's own vocabulary, not the question's
        _BIG.replace("50304", "50257") + "answer = 6 * n + 12 * 12 * 1024 * 768",
        # a wrong method near the right number: the counter on the meta model
        _BIG + "with torch.device('meta'):\n"
        "    m, ids = gpt.GPT(big), torch.zeros(1, 1024, dtype=torch.long)\n"
        "with FlopCounterMode(display=False) as c:\n"
        "    gpt.loss_fn(m(ids), ids).backward()\n"
        "answer = c.get_total_flops() // 1024",
    ],
    2: [
        # the targeted misconceptions: a measured ceiling, and HFU
        f"answer = round(100 * 40_000 * {_PER} / 720e12, 1)  # the measured ceiling",
        "answer = round(100 * 40_000 * (8 * 1.3e9 + 16 * 24 * 4096 * 2048) / 989e12, 1)"
        "  # HFU: the recomputed forward counted",
        "answer = round(100 * 40_000 * (8 * 1.3e9 + 16 * 24 * 4096 * 2048) / 720e12, 1)"
        "  # HFU over the ceiling",
        # a skipped point
        "answer = round(100 * 40_000 * 6 * 1.3e9 / 989e12, 1)  # 6N alone",
        # a factor off
        f"answer = round(100 * 40_000 * {_PER} / 1979e12, 1)  # the sparse peak",
        "answer = round(100 * 40_000 * (2 * 1.3e9 + 4 * 24 * 4096 * 2048) / 989e12, 1)"
        "  # forward only",
        f"answer = round(40_000 * {_PER} / 989e12, 1)  # a fraction, not percent",
        f"answer = round(100 * 40_000 * {_PER} / (989 * 2**40), 1)  # tebi, not tera",
        "answer = round(100 * 40_000 * (6 * 1.3e9 + 6 * 24 * 4096 * 2048) / 989e12, 1)"
        "  # half the scores",
        # half the inputs
        "answer = round(100 * 40_000 * (6 * 1.3e9 + 12 * 4096 * 2048) / 989e12, 1)",
        "answer = round(100 * 40_000 * (6 * 1.3e9 + 12 * 24 * 4096**2) / 989e12, 1)",
        # a wrong method that lands near the right number
        f"answer = round(100 * 40_000 * {_PER} / 1000e12, 1)  # a round peak",
        f"answer = round(100 * 40_000 * {_PER} / 989e12)  # a whole number",
        # right only on this CPU: the notebook's own ceiling and model
        f"answer = round(100 * 40_000 * {_PER} / ceiling, 1)",
        "answer = round(100 * 40_000 * fpt / 989e12, 1)  # notebook 15's model",
        # the fused kernels' 14·L·T·D; HFU's recomputed weights without attention's
        "answer = round(100 * 4e4 * (6 * 1.3e9 + 14 * 24 * 4096 * 2048) / 989e12, 1)",
        "answer = round(100 * 4e4 * (8 * 1.3e9 + 12 * 24 * 4096 * 2048) / 989e12, 1)",
        # the width read as the context: lands on the same number as half the scores
        "answer = round(100 * 4e4 * (6 * 1.3e9 + 12 * 24 * 2048 * 2048) / 989e12, 1)",
        # right value, not rounded as asked (gets its own hint)
        f"answer = 100 * 40_000 * {_PER} / 989e12",
        f"answer = round(100 * 40_000 * {_PER} / 989e12, 2)",
        # a peak the question did not name; per GPU of a pair
        f"answer = round(100 * 40_000 * {_PER} / 756e12, 1)  # H100 PCIe",
        f"answer = round(100 * 40_000 * {_PER} / 989e12 / 2, 1)",
    ],
    3: [
        # the targeted misconception: / accum, as if the pieces were equal
        _LOOP.format(skip="i < accum - 1")
        + "        with skip:\n"
        "            (gpt.loss_fn(model(xm), ym) / accum).backward()",
        # a factor off: not weighted at all, or weighted twice
        _LOOP.format(skip="i < accum - 1")
        + "        with skip:\n"
        "            gpt.loss_fn(model(xm), ym).backward()  # not weighted at all",
        _LOOP.format(skip="i < accum - 1")
        + "        with skip:\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x) / accum)"
        ".backward()",
        # right only at the first test's sizes
        "def accumulate(model, x, y, accum):  # chunk, not tensor_split\n"
        "    pieces = list(zip(x.chunk(accum), y.chunk(accum)))\n"
        "    for i, (xm, ym) in enumerate(pieces):\n"
        "        last = i == len(pieces) - 1\n"
        "        with contextlib.nullcontext() if last else model.no_sync():\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        _LOOP.format(skip="i < accum - 1")
        + "        with skip:  # the shares of 10 rows in 4, hard-coded\n"
        "            (gpt.loss_fn(model(xm), ym) * [3, 3, 2, 2][i] / 10).backward()",
        # a skipped point: syncs every time, or forward-all-then-backward-all
        "def accumulate(model, x, y, accum):\n"
        "    for xm, ym in zip(x.tensor_split(accum), y.tensor_split(accum)):\n"
        "        (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()  # syncs",
        _LOOP.format(skip="i < accum - 1")
        + "        loss = gpt.loss_fn(model(xm), ym) * len(xm) / len(x)  # outside\n"
        "        with skip:\n"
        "            loss.backward()",
        _LOOP.format(skip="i == 0")  # skips the first, syncs the rest
        + "        with skip:\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        "def accumulate(model, x, y, accum):  # every activation alive at once\n"
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
        "    (sum(losses) + gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        # the wrong thing left behind: no_sync entered once and never left
        "def accumulate(model, x, y, accum):\n"
        "    model.no_sync().__enter__()\n"
        "    for xm, ym in zip(x.tensor_split(accum), y.tensor_split(accum)):\n"
        "        (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        # ... the inner module called, so the wrapper (DDP) never sees a forward
        _LOOP.format(skip="i < accum - 1")
        + "        with skip:\n"
        "            (gpt.loss_fn(model.module(xm), ym) * len(xm) / len(x)).backward()",
        # ... the gradients zeroed at the end, as a training loop would
        _LOOP.format(skip="i < accum - 1")
        + "        with skip:\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()\n"
        "    model.zero_grad(set_to_none=True)",
        # half the inputs: the last micro-batch forgotten
        "def accumulate(model, x, y, accum):\n"
        "    pieces = list(zip(x.tensor_split(accum), y.tensor_split(accum)))\n"
        "    with model.no_sync():\n"
        "        for xm, ym in pieces[:-1]:\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        # a wrong method that lands on the right gradient: the whole batch at the end
        _LOOP.format(skip="i < accum - 1")
        + "        with skip:\n"
        "            if i < accum - 1:\n"
        "                (gpt.loss_fn(model(xm), ym) * 0).backward()\n"
        "            else:\n"
        "                gpt.loss_fn(model(x), y).backward()",
        # zero_grad inside the loop: only the last micro-batch's gradient is left
        _LOOP.format(skip="i < accum - 1")
        + "        model.zero_grad()\n"
        "        with skip:\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        # no_sync() called, never entered: every backward syncs
        _LOOP.format(skip="False")
        + "        if i < accum - 1:\n"
        "            model.no_sync()\n"
        "        (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        # split(accum): pieces of accum rows, not accum pieces
        "def accumulate(model, x, y, accum):\n"
        "    pieces = list(zip(x.split(accum), y.split(accum)))\n"
        "    for i, (xm, ym) in enumerate(pieces):\n"
        "        last = i == len(pieces) - 1\n"
        "        with contextlib.nullcontext() if last else model.no_sync():\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        # split along the sequence, not the batch
        "def accumulate(model, x, y, accum):\n"
        "    pieces = zip(x.tensor_split(accum, 1), y.tensor_split(accum, 1))\n"
        "    for i, (xm, ym) in enumerate(pieces):\n"
        "        with model.no_sync() if i < accum - 1 else contextlib.nullcontext():\n"
        "            (gpt.loss_fn(model(xm), ym) / accum).backward()",
        # the sync on the first micro-batch processed: the others come after it
        "def accumulate(model, x, y, accum):\n"
        "    pieces = list(zip(x.tensor_split(accum), y.tensor_split(accum)))[::-1]\n"
        "    for i, (xm, ym) in enumerate(pieces):\n"
        "        with model.no_sync() if i > 0 else contextlib.nullcontext():\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
        # a nested no_sync() restores False, as DDP's does: nothing syncs
        "def accumulate(model, x, y, accum):\n"
        "    pieces = list(zip(x.tensor_split(accum), y.tensor_split(accum)))\n"
        "    with model.no_sync():\n"
        "        for i, (xm, ym) in enumerate(pieces):\n"
        "            if i == accum - 1:\n"
        "                with model.no_sync():\n"
        "                    pass\n"
        "            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()",
    ],
}
