"""Typical wrong answers to notebook 11's exercises: each check must say "not yet"."""

WRONG = {
    1: ["answer = 200  # 2S: a reduce and a broadcast of everything",
        "answer = 87.5  # (N-1)/N S: only the reduce-scatter half",
        "answer = 1400  # 2(N-1) S: every step sends the whole tensor"],
    2: ["def busbw(algbw, n):\n    return algbw  # busbw is algbw",
        "def busbw(algbw, n):\n    return algbw * (n - 1) / n  # all-gather's factor",
        "def busbw(algbw, n):\n    return 2 * algbw  # the 2 without (n-1)/n"],
    3: [  # total bytes over the cap, rounded up
        "import math\n"
        "def count_buckets(param_bytes, cap):\n"
        "    return math.ceil(sum(param_bytes) / cap)",
        # filled in the model's order, not in reverse
        "def count_buckets(param_bytes, cap):\n"
        "    buckets, filled = 0, 0\n"
        "    for size in param_bytes:\n"
        "        filled += size\n"
        "        if filled >= cap:\n"
        "            buckets, filled = buckets + 1, 0\n"
        "    return buckets + (filled > 0)",
        # closes a bucket before it would exceed the cap
        "def count_buckets(param_bytes, cap):\n"
        "    buckets, filled = 0, 0\n"
        "    for size in reversed(param_bytes):\n"
        "        if filled and filled + size > cap:\n"
        "            buckets, filled = buckets + 1, 0\n"
        "        filled += size\n"
        "    return buckets + (filled > 0)",
        # closes a bucket only once it is past the cap, not at it
        "def count_buckets(param_bytes, cap):\n"
        "    buckets, filled = 0, 0\n"
        "    for size in reversed(param_bytes):\n"
        "        filled += size\n"
        "        if filled > cap:\n"
        "            buckets, filled = buckets + 1, 0\n"
        "    return buckets + (filled > 0)"],
}
