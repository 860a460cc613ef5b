"""Typical wrong answers to notebook 12's exercises: each check must say "not yet"."""

WRONG = {
    1: [  # the forward alone, with no backward
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp), warmup=1, repeats=3)\n"
        "    return sum(p.numel() for p in stage.parameters()), t.median",
        # parameter tensors counted, not parameters
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(), warmup=1, repeats=3)\n"
        "    return len(list(stage.parameters())), t.median",
        # a plausible time, not a measured one
        "def stage_profile(stage, inp):\n"
        "    return sum(p.numel() for p in stage.parameters()), 0.01",
    ],
    2: [  # our cut after layer1, not after layer2
        "def split_after_layer2(model):\n"
        "    return split_stages(model)",
        # the children's order without the Flatten that forward() does
        "def split_after_layer2(model):\n"
        "    m = model\n"
        "    s1 = nn.Sequential(*list(m.children())[:6])  # conv1 ... layer2\n"
        "    return s1, nn.Sequential(m.layer3, m.avgpool, m.fc)",
        # a fresh model with the same weights: not the model's own modules
        "def split_after_layer2(model):\n"
        "    m = make_resnet().eval()\n"
        "    s1 = nn.Sequential(*list(m.children())[:6])  # conv1 ... layer2\n"
        "    return s1, nn.Sequential(model.layer3, m.avgpool, nn.Flatten(1), m.fc)",
    ],
    3: [
        "answer = 13  # rounded down: the state does not fit on 13",
        "answer = 4  # bf16 weights and gradients only",
        "answer = 10  # no float32 master copy of the weights",
    ],
    4: [  # elements, not bytes
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    a = torch.randn(batch, *stages.cut_shape(IMAGE), device=dev0)\n"
        "    buf = torch.empty_like(a, device=dev1)\n"
        "    t = timer(lambda: (buf.copy_(a), synchronize(dev1)), device=dev0)\n"
        "    return a.numel() / 2**30 / t.median",
        # GB (1e9 bytes), not GiB
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    a = torch.randn(batch, *stages.cut_shape(IMAGE), device=dev0)\n"
        "    buf = torch.empty_like(a, device=dev1)\n"
        "    t = timer(lambda: (buf.copy_(a), synchronize(dev1)), device=dev0)\n"
        "    return a.numel() * a.element_size() / 1e9 / t.median",
        # a plausible bandwidth, not a measured one
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    return 10.0",
    ],
}
