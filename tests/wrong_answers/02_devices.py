"""Typical wrong answers to notebook 02's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def check_same_device(*tensors):  # trusts the first tensor\n"
        "    return tensors[0].device",
        "def check_same_device(*tensors):  # PyTorch's error, not ValueError\n"
        "    if len({t.device for t in tensors}) > 1:\n"
        "        raise RuntimeError('Expected all tensors to be on the same device')\n"
        "    return tensors[0].device"],
    2: ["def build_on_meta():  # real memory behind every parameter\n"
        "    return build()",
        "def build_on_meta():  # allocates and fills on the cpu first, then moves\n"
        "    return build().to('meta')"],
    3: ["def full_device(d):  # leaves 'cuda' without an index\n"
        "    return torch.device(d)",
        "def full_device(d):  # assumes GPU 0 is always the current one\n"
        "    d = torch.device(d)\n"
        "    return torch.device(d.type, 0) if d.index is None else d"],
    4: ["def gather_sum(devices):  # every shard on the cpu\n"
        "    return sum(torch.full((2,), float(i)) for i in range(len(devices)))",
        "def gather_sum(devices):  # shards never moved to devices[0]\n"
        "    return sum(torch.full((2,), float(i), device=d)\n"
        "               for i, d in enumerate(devices))"],
}
