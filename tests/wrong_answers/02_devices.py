"""Typical wrong answers to notebook 02's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def check_same_device(*tensors):  # trusts the first tensor\n"
        "    return tensors[0].device",
        "def check_same_device(*tensors):  # PyTorch's error, not ValueError\n"
        "    if len({t.device for t in tensors}) > 1:\n"
        "        raise RuntimeError('Expected all tensors to be on the same device')\n"
        "    return tensors[0].device",
        "def check_same_device(*tensors):  # compares only the first and the last\n"
        "    first, last = tensors[0].device, tensors[-1].device\n"
        "    if first != last:\n"
        "        raise ValueError(f'tensors are on {first} and {last}')\n"
        "    return first",
        "def check_same_device(*tensors):  # compares types: cuda:0 == cuda:1 here\n"
        "    found = {t.device.type for t in tensors}\n"
        "    if len(found) != 1:\n"
        "        raise ValueError(f'tensors are on {sorted(found)}')\n"
        "    return tensors[0].device",
        "def check_same_device(*tensors):  # names only one of the devices\n"
        "    for t in tensors[1:]:\n"
        "        if t.device != tensors[0].device:\n"
        "            raise ValueError(f'a tensor is not on {tensors[0].device}')\n"
        "    return tensors[0].device",
        "def check_same_device(*tensors):  # the cpu whatever the tensors say\n"
        "    if len({t.device for t in tensors}) != 1:\n"
        "        raise ValueError(str(sorted(str(t.device) for t in tensors)))\n"
        "    return torch.device('cpu')",
        "def check_same_device(a, b):  # two tensors only\n"
        "    if a.device != b.device:\n"
        "        raise ValueError(f'tensors are on {a.device} and {b.device}')\n"
        "    return a.device",
        "def check_same_device(*tensors):  # compares only the first two\n"
        "    if tensors[0].device != tensors[1].device:\n"
        "        raise ValueError(str(sorted({str(t.device) for t in tensors})))\n"
        "    return tensors[0].device",
        "def check_same_device(*tensors):  # compares only the last two\n"
        "    if tensors[-2].device != tensors[-1].device:\n"
        "        raise ValueError(str(sorted({str(t.device) for t in tensors})))\n"
        "    return tensors[-1].device",
        "def check_same_device(*tensors):  # returns None instead of raising\n"
        "    found = {t.device for t in tensors}\n"
        "    return found.pop() if len(found) == 1 else None"],
    2: ["def build_on_meta():  # real memory behind every parameter\n"
        "    return build()",
        "def build_on_meta():  # allocates and fills on the cpu first, then moves\n"
        "    return build().to('meta')",
        "def build_on_meta():  # a global default, never restored\n"
        "    torch.set_default_device('meta')\n"
        "    return build()",
        "def build_on_meta():  # real first, then to_empty: the cost is paid\n"
        "    return build().to_empty(device='meta')",
        "def build_on_meta():  # three layers, not build()'s four\n"
        "    with torch.device('meta'):\n"
        "        return nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(3)])",
        "def build_on_meta():  # one wide layer: build()'s count, another model\n"
        "    with torch.device('meta'):\n"
        "        return nn.Linear(2048, 4 * 2048 + 4, bias=False)",
        "def build_on_meta():  # the function itself, not the model\n"
        "    with torch.device('meta'):\n"
        "        return build",
        "def build_on_meta():  # built on meta, then given real memory\n"
        "    with torch.device('meta'):\n"
        "        model = build()\n"
        "    return model.to_empty(device='cpu')"],
    3: ["def full_device(d):  # leaves 'cuda' without an index\n"
        "    return torch.device(d)",
        "def full_device(d):  # assumes GPU 0 is always the current one\n"
        "    d = torch.device(d)\n"
        "    return torch.device(d.type, 0) if d.index is None else d",
        "def full_device(d):  # index 0 reads as missing: cuda:0 becomes cuda:1\n"
        "    d = torch.device(d)\n"
        "    if d.type != 'cuda':\n"
        "        return d\n"
        "    return torch.device('cuda', d.index or torch.cuda.current_device())",
        "def full_device(d):  # the string 'cuda' only, not torch.device('cuda')\n"
        "    if d == 'cuda':\n"
        "        return torch.device('cuda', torch.cuda.current_device())\n"
        "    return torch.device(d)",
        "def full_device(d):  # asks the GPU for every input\n"
        "    current = torch.cuda.current_device()\n"
        "    d = torch.device(d)\n"
        "    return torch.device('cuda', current) if d == torch.device('cuda') else d",
        "def full_device(d):  # a string, not a torch.device\n"
        "    d = torch.device(d)\n"
        "    if d.type == 'cuda' and d.index is None:\n"
        "        return f'cuda:{torch.cuda.current_device()}'\n"
        "    return str(d)",
        "def full_device(d):  # every index-less device gets the current index\n"
        "    d = torch.device(d)\n"
        "    if d.index is None and d.type != 'cpu':\n"
        "        index = torch.accelerator.current_device_index()\n"
        "        return torch.device(d.type, index)\n"
        "    return d",
        "def full_device(d):  # GPU 1 hard-coded: right at the check's first setting\n"
        "    d = torch.device(d)\n"
        "    return torch.device('cuda', 1) if d == torch.device('cuda') else d"],
    4: ["def gather_sum(devices):  # every shard on the cpu\n"
        "    return sum(torch.full((2,), float(i)) for i in range(len(devices)))",
        "def gather_sum(devices):  # shards never moved to devices[0]\n"
        "    return sum(torch.full((2,), float(i), device=d)\n"
        "               for i, d in enumerate(devices))",
        "def gather_sum(devices):  # every shard made on devices[0] directly\n"
        "    return sum(torch.full((2,), float(i), device=devices[0])\n"
        "               for i in range(len(devices)))",
        "def gather_sum(devices):  # the right total, with no shards at all\n"
        "    k = len(devices)\n"
        "    return torch.full((2,), k * (k - 1) / 2, device=devices[0])",
        "def gather_sum(devices):  # shards made, then a full of the total instead\n"
        "    shards = [torch.full((2,), float(i), device=d)\n"
        "              for i, d in enumerate(devices)]\n"
        "    k = len(shards)\n"
        "    return torch.full((2,), k * (k - 1) / 2, device=devices[0])",
        "def gather_sum(devices):  # made on the cpu, then copied over\n"
        "    shards = [torch.full((2,), float(i)).to(d)\n"
        "              for i, d in enumerate(devices)]\n"
        "    return sum(s.to(devices[0]) for s in shards)",
        "def gather_sum(devices):  # the first two devices only\n"
        "    shards = [torch.full((2,), float(i), device=d)\n"
        "              for i, d in enumerate(devices[:2])]\n"
        "    return sum(s.to(devices[0]) for s in shards)",
        "def gather_sum(devices):  # summed on the last device\n"
        "    shards = [torch.full((2,), float(i), device=d)\n"
        "              for i, d in enumerate(devices)]\n"
        "    return sum(s.to(devices[-1]) for s in shards)",
        "def gather_sum(devices):  # one stacked sum of every element\n"
        "    shards = [torch.full((2,), float(i), device=d).to(devices[0])\n"
        "              for i, d in enumerate(devices)]\n"
        "    return torch.stack(shards).sum().reshape(1)"],
}
