"""Typical wrong answers to notebook 12's exercises: each check must say "not yet".

Each exercise has one of every class: the targeted misconception, a factor off, right
only at the check's sizes, a skipped point, the wrong thing left behind, half the
inputs, and a wrong method that lands near the right number."""

_S1 = ("    s1 = nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1,\n"
       "                       m.layer2)\n")
_TIMED = ("    t = timer(lambda: (buf.copy_(a), synchronize(dev1)),\n"
          "              device=dev0)\n")
_COPY = ("def copy_bandwidth(batch, timer=benchmark):\n"
         "    a = torch.randn(batch, *pipe_stages.cut_shape(IMAGE), device=dev0)\n"
         "    buf = torch.empty_like(a, device=dev1)\n")

WRONG = {
    1: [  # the forward alone, with no backward
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp), device=inp.device, warmup=1,\n"
        "                  repeats=3)\n"
        "    return sum(p.numel() for p in stage.parameters()), t.median",
        # parameter tensors counted, not parameters
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(),\n"
        "                  device=inp.device, warmup=1, repeats=3)\n"
        "    return len(list(stage.parameters())), t.median",
        # half the inputs: the weights counted, the bias forgotten
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(),\n"
        "                  device=inp.device, warmup=1, repeats=3)\n"
        "    return stage.weight.numel(), t.median",
        # a plausible time, not a measured one
        "def stage_profile(stage, inp):\n"
        "    return sum(p.numel() for p in stage.parameters()), 0.02",
        # one timed run
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(),\n"
        "                  device=inp.device, warmup=1, repeats=1)\n"
        "    return sum(p.numel() for p in stage.parameters()), t.median",
        # no warm-up: the first, slow call is timed
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(),\n"
        "                  device=inp.device, warmup=0, repeats=3)\n"
        "    return sum(p.numel() for p in stage.parameters()), t.median",
        # one call on the CPU's clock
        "import time\n"
        "def stage_profile(stage, inp):\n"
        "    start = time.perf_counter()\n"
        "    stage(inp).sum().backward()\n"
        "    return (sum(p.numel() for p in stage.parameters()),\n"
        "            time.perf_counter() - start)",
        # the mean of several runs, which the slow ones pull up
        "import statistics, time\n"
        "def stage_profile(stage, inp):\n"
        "    stage(inp).sum().backward()\n"
        "    runs = []\n"
        "    for _ in range(6):\n"
        "        start = time.perf_counter()\n"
        "        stage(inp).sum().backward()\n"
        "        runs.append(time.perf_counter() - start)\n"
        "    return sum(p.numel() for p in stage.parameters()), statistics.mean(runs)",
        # milliseconds, not seconds (a factor off)
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(),\n"
        "                  device=inp.device, warmup=1, repeats=5)\n"
        "    return sum(p.numel() for p in stage.parameters()), t.median * 1e3",
        # the slowest run
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(),\n"
        "                  device=inp.device, warmup=1, repeats=5)\n"
        "    return sum(p.numel() for p in stage.parameters()), t.max",
        # right only on a CPU: the timer is not told the device, so on a GPU it
        # times the queueing of the work
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(), warmup=1, repeats=5)\n"
        "    return sum(p.numel() for p in stage.parameters()), t.median",
        # the forward timed twice: once alone, once inside forward + backward
        "def stage_profile(stage, inp):\n"
        "    f = benchmark(lambda: stage(inp), device=inp.device, warmup=1,\n"
        "                  repeats=5)\n"
        "    b = benchmark(lambda: stage(inp).sum().backward(), device=inp.device,\n"
        "                  warmup=1, repeats=5)\n"
        "    return sum(p.numel() for p in stage.parameters()), f.median + b.median",
        # right only for one Linear: its weight and bias, not a stage's parameters
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(), device=inp.device,\n"
        "                  warmup=1, repeats=5)\n"
        "    return stage.weight.numel() + stage.bias.numel(), t.median",
        # right only on a CPU: the CPU's clock, whatever device the stage is on
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(), device='cpu',\n"
        "                  warmup=1, repeats=5)\n"
        "    return sum(p.numel() for p in stage.parameters()), t.median",
        # right only for stage 1: dev0, not the device of stage 2 (dev1)
        "def stage_profile(stage, inp):\n"
        "    t = benchmark(lambda: stage(inp).sum().backward(), device=dev0,\n"
        "                  warmup=1, repeats=5)\n"
        "    return sum(p.numel() for p in stage.parameters()), t.median",
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
        # a deep copy: the same numbers, other modules
        "import copy\n"
        "def split_after_layer2(model):\n"
        "    m = copy.deepcopy(model)\n"
        + _S1 +
        "    return s1, nn.Sequential(m.layer3, m.avgpool, nn.Flatten(1), m.fc)",
        # the ReLU after the first BatchNorm left out
        "def split_after_layer2(model):\n"
        "    m = model\n"
        "    s1 = nn.Sequential(m.conv1, m.bn1, m.maxpool, m.layer1, m.layer2)\n"
        "    return s1, nn.Sequential(m.layer3, m.avgpool, nn.Flatten(1), m.fc)",
        # half the model: the pooling left out, flattened 256 x 2 x 2
        "def split_after_layer2(model):\n"
        "    m = model\n"
        + _S1 +
        "    return s1, nn.Sequential(m.layer3, nn.Flatten(1), m.fc)",
        # a new head in place of the model's fc
        "def split_after_layer2(model):\n"
        "    m = model\n"
        + _S1 +
        "    return s1, nn.Sequential(m.layer3, m.avgpool, nn.Flatten(1),\n"
        "                             nn.Linear(256, 10))",
        # layer2 in both stages
        "def split_after_layer2(model):\n"
        "    m = model\n"
        + _S1 +
        "    return s1, nn.Sequential(m.layer2, m.layer3, m.avgpool, nn.Flatten(1),\n"
        "                             m.fc)",
    ],
    3: [
        "answer = 43  # rounded down: the state does not fit on 43",
        "answer = 47  # 24 GB as 24e9 bytes",
        "answer = 46  # 24 GB as 24e9 bytes, rounded down",
        "answer = 11  # bf16 weights and gradients only",
        "answer = 33  # no float32 master copy of the weights",
        "answer = 22  # no Adam moments",
        "answer = 39  # 14 bytes: the bf16 gradients forgotten",
        "answer = 28  # 10 bytes: one moment and no master copy",
        "answer = 49  # gradients in float32 as well as bf16",
        "answer = 55  # the master copy counted twice",
        "answer = 43.46  # not rounded at all",
        "answer = 14  # the 80 GiB count of another question",
    ],
    4: [  # elements, not bytes
        _COPY + _TIMED +
        "    return a.numel() / 2**30 / t.median",
        # GB (1e9 bytes), not GiB
        _COPY + _TIMED +
        "    return a.numel() * a.element_size() / 1e9 / t.median",
        # MiB/s: a factor of 1024 off
        _COPY + _TIMED +
        "    return a.numel() * a.element_size() / 2**20 / t.median",
        # a plausible bandwidth, not a measured one
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    return 10.0",
        # copying within dev0
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    a = torch.randn(batch, *pipe_stages.cut_shape(IMAGE), device=dev0)\n"
        "    buf = torch.empty_like(a)\n"
        "    t = timer(lambda: (buf.copy_(a), synchronize(dev0)), device=dev0)\n"
        "    return a.numel() * a.element_size() / 2**30 / t.median",
        # the CPU's clock only: no timer, no synchronize
        "import time\n"
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    a = torch.randn(batch, *pipe_stages.cut_shape(IMAGE), device=dev0)\n"
        "    buf = torch.empty_like(a, device=dev1)\n"
        "    start = time.perf_counter()\n"
        "    buf.copy_(a)\n"
        "    seconds = time.perf_counter() - start\n"
        "    return a.numel() * a.element_size() / 2**30 / seconds",
        # the timer on the CPU's clock: no device, no synchronize
        _COPY + "    t = timer(lambda: buf.copy_(a))\n"
        "    return a.numel() * a.element_size() / 2**30 / t.median",
        # right only at the check's first size: 8 images, whatever `batch` says
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    a = torch.randn(8, *pipe_stages.cut_shape(IMAGE), device=dev0)\n"
        "    buf = torch.empty_like(a, device=dev1)\n"
        "    t = timer(lambda: (buf.copy_(a), synchronize(dev1)), device=dev0)\n"
        "    return a.numel() * a.element_size() / 2**30 / t.median",
        # half the inputs: one image's activation
        _COPY + "    t = timer(lambda: (buf[0].copy_(a[0]), synchronize(dev1)), "
        "device=dev0)\n"
        "    return a.numel() * a.element_size() / 2**30 / t.median",
        # the wrong thing left behind: the default device
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    torch.set_default_device(dev1)\n"
        "    buf = torch.empty(batch, *pipe_stages.cut_shape(IMAGE))\n"
        "    a = torch.randn(batch, *pipe_stages.cut_shape(IMAGE), device=dev0)\n"
        "    t = timer(lambda: (buf.copy_(a), synchronize(dev1)), device=dev0)\n"
        "    return a.numel() * a.element_size() / 2**30 / t.median",
        # milliseconds taken for seconds
        _COPY + _TIMED +
        "    return a.numel() * a.element_size() / 2**30 / (t.median * 1e3)",
        # right only on a CPU: the activation made on the default device, not dev0
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    a = torch.randn(batch, *pipe_stages.cut_shape(IMAGE))\n"
        "    buf = torch.empty_like(a, device=dev1)\n" + _TIMED +
        "    return a.numel() * a.element_size() / 2**30 / t.median",
        # random numbers made inside the timed code: their cost counted as copying
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    shape = (batch, *pipe_stages.cut_shape(IMAGE))\n"
        "    t = timer(lambda: (torch.randn(shape, device=dev0).to(dev1),\n"
        "                       synchronize(dev1)), device=dev0)\n"
        "    return batch * math.prod(shape[1:]) * 4 / 2**30 / t.median",
        # two copies per timing, one copy's bytes: half the bandwidth
        _COPY + "    t = timer(lambda: (buf.copy_(a), buf.copy_(a),\n"
        "                       synchronize(dev1)),\n"
        "              device=dev0)\n"
        "    return a.numel() * a.element_size() / 2**30 / t.median",
        # there and back in one timing, counted as one way
        _COPY + "    t = timer(lambda: (a.to(dev1).to(dev0), synchronize(dev1)),\n"
        "              device=dev0)\n"
        "    return a.numel() * a.element_size() / 2**30 / t.median",
        # right only at the notebook's IMAGE: the cut shape (64, 8, 8) hard-coded
        "def copy_bandwidth(batch, timer=benchmark):\n"
        "    a = torch.randn(batch, 64, 8, 8, device=dev0)\n"
        "    buf = torch.empty_like(a, device=dev1)\n" + _TIMED +
        "    return batch * 64 * 8 * 8 * 4 / 2**30 / t.median",
    ],
}
