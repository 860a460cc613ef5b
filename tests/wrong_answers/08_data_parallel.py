"""Typical wrong answers to notebook 08's exercises: each check must say "not yet"."""

WRONG = {
    1: ["answer = ([3, 3, 2, 2], [2, 2, 1, 1])  # spread as evenly as possible",
        "answer = ([3, 3, 3, 1], [2, 2, 2, 0])  # an empty chunk for the idle GPU",
        "answer = ([3, 3, 3, 1], [2, 2, 1])  # the 5-row split of section 2",
        "answer = ([2, 2, 2, 2, 2], [1, 1, 1, 1, 1, 1])  # rows per chunk rounded down",
        "answer = ([4, 4, 2], [2, 2, 2])  # ceil(10 / 3): one GPU too few"],
    2: ["def broadcast_replicas(net, n):\n"
        "    return [net] * n  # no replica at all",
        "def broadcast_replicas(net, n):\n"
        "    return [copy.deepcopy(net) for _ in range(n)]  # untraced copies",
        # one shell shared by the threads: functional_call swaps tensors into it
        "def broadcast_replicas(net, n):\n"
        "    shell = copy.deepcopy(net)\n"
        "    def make():\n"
        "        params = {k: p.clone() for k, p in net.named_parameters()}\n"
        "        return lambda xb: torch.func.functional_call(shell, params, (xb,))\n"
        "    return [make() for _ in range(n)]",
        # net's own tensors: the gradients land in net directly, no Broadcast
        "def broadcast_replicas(net, n):\n"
        "    def make():\n"
        "        shell, params = copy.deepcopy(net), dict(net.named_parameters())\n"
        "        return lambda xb: torch.func.functional_call(shell, params, (xb,))\n"
        "    return [make() for _ in range(n)]",
        # detached clones: copies autograd cannot trace back to net
        "def broadcast_replicas(net, n):\n"
        "    def make():\n"
        "        shell = copy.deepcopy(net)\n"
        "        params = {k: p.detach().clone() for k, p in net.named_parameters()}\n"
        "        return lambda xb: torch.func.functional_call(shell, params, (xb,))\n"
        "    return [make() for _ in range(n)]",
        # one set of clones shared by every replica: not a copy per GPU
        "def broadcast_replicas(net, n):\n"
        "    params = {k: p.clone() for k, p in net.named_parameters()}\n"
        "    def make():\n"
        "        shell = copy.deepcopy(net)\n"
        "        return lambda xb: torch.func.functional_call(shell, params, (xb,))\n"
        "    return [make() for _ in range(n)]",
        # one replica too few: half the inputs
        "def broadcast_replicas(net, n):\n"
        "    def make():\n"
        "        shell = copy.deepcopy(net)\n"
        "        params = {k: p.clone() for k, p in net.named_parameters()}\n"
        "        return lambda xb: torch.func.functional_call(shell, params, (xb,))\n"
        "    return [make() for _ in range(max(1, n - 1))]"],
    3: ["def chunk_weight(rows, batch, n_chunks):\n"
        "    return 1 / n_chunks  # the trap: right for equal chunks only",
        "def chunk_weight(rows, batch, n_chunks):\n"
        "    return 1.0  # a plain sum of the chunks' means",
        "def chunk_weight(rows, batch, n_chunks):\n"
        "    return rows / 128  # right only at the seed article's batch",
        "def chunk_weight(rows, batch, n_chunks):\n"
        "    return 1 / math.ceil(batch / rows)  # how many such chunks would fit",
        "def chunk_weight(rows, batch, n_chunks):\n"
        "    return rows * n_chunks / batch  # a factor n_chunks off"],
}
