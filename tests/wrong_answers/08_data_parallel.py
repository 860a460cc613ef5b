"""Typical wrong answers to notebook 08's exercises: each check must say "not yet"."""

WRONG = {
    1: ["answer = ([3, 3, 2, 2], [2, 2, 1, 1])  # spread as evenly as possible",
        "answer = ([3, 3, 3, 1], [2, 2, 2, 0])  # an empty chunk for the idle GPU",
        "answer = ([3, 3, 3, 1], [2, 2, 1])  # the 5-row split of section 2"],
    2: ["def broadcast_replicas(net, n):\n"
        "    return [net] * n  # no replica at all",
        "def broadcast_replicas(net, n):\n"
        "    return [copy.deepcopy(net) for _ in range(n)]  # untraced copies"],
    3: ["def chunk_weight(rows, batch, n_chunks):\n"
        "    return 1 / n_chunks  # the trap: right for equal chunks only",
        "def chunk_weight(rows, batch, n_chunks):\n"
        "    return 1.0  # a plain sum of the chunks' means"],
}
