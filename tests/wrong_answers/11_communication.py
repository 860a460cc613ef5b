"""Typical wrong answers to notebook 11's exercises: each check must say "not yet".

Every exercise gets one of each class: the targeted misconception, a factor off, right
only at the check's sizes, right only on this machine (a CPU with N = 4), a skipped
point, the wrong thing left behind, half the inputs, and a wrong method that lands on
the right number somewhere.
"""

_FILL = ("def count_buckets(param_bytes, cap):\n"
         "    buckets, filled = 0, 0\n"
         "    for size in {order}:\n"
         "        {before}filled += size\n"
         "        if filled {cmp} cap:\n"
         "            buckets, filled = buckets + 1, 0\n"
         "    return buckets{tail}")


def _fill(order="reversed(param_bytes)", cmp=">=", tail=" + (filled > 0)", before=""):
    return _FILL.format(order=order, cmp=cmp, tail=tail, before=before)


WRONG = {
    1: ["answer = 200  # targeted: 2S, a reduce and a broadcast of everything",
        "answer = 87.5  # (N-1)/N S: only the reduce-scatter half",
        "answer = 1400  # a factor off: 2(N-1) S, every step sends the whole tensor",
        "answer = 2 * (4 - 1) / 4 * 100  # this notebook's 4 CPU ranks, not 8",
        "answer = 350  # counts what is received as well as what is sent",
        "answer = 2 * (8 - 1) / 8  # the fraction, not MB: half the question",
        "answer = 175e6  # bytes: the unit skipped",
        "answer = 2 * (8 - 1) / 8 * 100 / 1.048576  # MB read as MiB",
        "answer = 12.5  # one chunk, S/N: the steps left out",
        "answer = '200'  # a string of a wrong number",
        "answer = 8 * 2 * (8 - 1) / 8 * 100  # every rank's bytes together",
        "answer = 2 * (8 - 1) / 8 * 100 / 1000  # GB, not MB"],
    2: ["def busbw(algbw, n):\n    return algbw  # targeted: busbw is algbw",
        "def busbw(algbw, n):\n    return algbw * (n - 1) / n  # all-gather's factor",
        "def busbw(algbw, n):\n    return 2 * algbw  # a factor off: the 2 alone",
        # right only at the table's size: N = 4 gives 1.5
        "def busbw(algbw, n):\n    return algbw * 1.5",
        # right only on this machine: the notebook's N, not the argument
        "def busbw(algbw, n):\n    return algbw * 2 * (N - 1) / N",
        # a wrong method landing on the right number at N = 4 (6/4 = 1.5)
        "def busbw(algbw, n):\n    return algbw * (n + 2) / n",
        # half the inputs: the factor without algbw
        "def busbw(algbw, n):\n    return 2 * (n - 1) / n",
        # integer division: right at n = 2 only
        "def busbw(algbw, n):\n    return algbw * (2 * (n - 1) // n)",
        # the skipped point: busbw per rank as algbw shared out
        "def busbw(algbw, n):\n    return algbw / n",
        # the wrong thing left behind: the table's own numbers looked up
        "def busbw(algbw, n):\n"
        "    return next(r.busbw for r in bw.sweeps['gloo']\n"
        "                if r.algbw == algbw)",
        # the fraction upside down
        "def busbw(algbw, n):\n    return algbw * n / (n - 1)",
        # rounded: right to three digits only
        "def busbw(algbw, n):\n    return round(algbw * 2 * (n - 1) / n, 3)"],
    3: [  # a wrong method: total bytes over the cap, rounded up
        "import math\n"
        "def count_buckets(param_bytes, cap):\n"
        "    return math.ceil(sum(param_bytes) / cap)",
        # right only at the check's DDP sizes: 8.03 -> 8, 2.01 -> 2, 0.08 -> 1
        "def count_buckets(param_bytes, cap):\n"
        "    return max(1, round(sum(param_bytes) / cap))",
        _fill(order="param_bytes"),  # targeted: filled in the model's order
        # a wrong method that lands on §4's counts: smallest gradients first
        _fill(order="sorted(param_bytes)"),
        # closes a bucket before it would exceed the cap
        "def count_buckets(param_bytes, cap):\n"
        "    buckets, filled = 0, 0\n"
        "    for size in reversed(param_bytes):\n"
        "        if filled and filled + size > cap:\n"
        "            buckets, filled = buckets + 1, 0\n"
        "        filled += size\n"
        "    return buckets + (filled > 0)",
        _fill(cmp=">"),  # closes only once past the cap, not at it
        _fill(tail=""),  # the skipped point: the last, partly filled bucket
        # the first bucket at 1 MiB, though bucket_cap_mb was given
        "def count_buckets(param_bytes, cap):\n"
        "    buckets, filled, limit = 0, 0, min(cap, 2**20)\n"
        "    for size in reversed(param_bytes):\n"
        "        filled += size\n"
        "        if filled >= limit:\n"
        "            buckets, filled, limit = buckets + 1, 0, cap\n"
        "    return buckets + (filled > 0)",
        # a factor off: the cap read as MiB
        "def count_buckets(param_bytes, cap):\n"
        "    buckets, filled = 0, 0\n"
        "    for size in reversed(param_bytes):\n"
        "        filled += size\n"
        "        if filled >= cap * 2**20:\n"
        "            buckets, filled = buckets + 1, 0\n"
        "    return buckets + (filled > 0)",
        # half the inputs: the weights only, every other parameter
        _fill(order="reversed(param_bytes[::2])"),
        # the wrong thing left behind: this machine's buckets, not the arguments
        "def count_buckets(param_bytes, cap):\n"
        "    return len(info.buckets[f'{cap / 2**20:g}'])",
        # a wrong method: one bucket per gradient at least as large as the cap
        "def count_buckets(param_bytes, cap):\n"
        "    return max(1, sum(size >= cap for size in param_bytes))"],
}
