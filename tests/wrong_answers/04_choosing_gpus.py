"""Typical wrong answers to notebook 04's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def visible_count(value, physical):  # counts the entries, valid or not\n"
        "    return physical if value is None else len(value.split(','))",
        "def visible_count(value, physical):  # skips a bad index instead of stopping\n"
        "    if value is None:\n"
        "        return physical\n"
        "    return sum(v.isdigit() and int(v) < physical for v in value.split(','))",
        "def visible_count(value, physical):  # forgets that a repeat hides them all\n"
        "    if value is None:\n"
        "        return physical\n"
        "    n = 0\n"
        "    for item in value.split(','):\n"
        "        if not item.strip().isdigit() or int(item) >= physical:\n"
        "            break\n"
        "        n += 1\n"
        "    return n",
        "def visible_count(value, physical):  # right only on the 4-GPU machine\n"
        "    if value is None:\n"
        "        return physical\n"
        "    ids = []\n"
        "    for item in value.split(','):\n"
        "        if not item.isdigit() or int(item) >= 4 or int(item) in ids:\n"
        "            return 0 if item.isdigit() and int(item) in ids else len(ids)\n"
        "        ids.append(int(item))\n"
        "    return len(ids)",
        "def visible_count(value, physical):  # takes '' for unset (half the inputs)\n"
        "    if not value:\n"
        "        return physical\n"
        "    ids = []\n"
        "    for item in value.split(','):\n"
        "        if not item.isdigit() or int(item) >= physical or int(item) in ids:\n"
        "            return 0 if item.isdigit() and int(item) in ids else len(ids)\n"
        "        ids.append(int(item))\n"
        "    return len(ids)",
        "def visible_count(value, physical):  # a set: right for '1,7', not '7,1'\n"
        "    if value is None:\n"
        "        return physical\n"
        "    items = value.split(',')\n"
        "    if len(set(items)) < len(items):\n"
        "        return 0\n"
        "    return len(set(items) & {str(i) for i in range(physical)})",
        "def visible_count(value, physical):  # ends at a gap, misses a repeat\n"
        "    if value is None:\n"
        "        return physical\n"
        "    ids = []\n"
        "    for item in value.split(','):\n"
        "        if not item.strip().isdigit() or int(item) >= physical:\n"
        "            break\n"
        "        if int(item) in ids:\n"
        "            return 0\n"
        "        ids.append(int(item))\n"
        "    return len(ids)"],
    2: ['STARTUP = """\n'
        "import time\n"
        "import torch\n"
        "t0 = time.perf_counter()\n"
        "import torch  # already imported: this times nothing\n"
        "t1 = time.perf_counter()\n"
        'print(f"{t1 - t0:.3f} {time.perf_counter() - t1:.3f}")\n'
        '"""',
        'STARTUP = """\n'
        "import time\n"
        "t0 = time.perf_counter()\n"
        "import torch\n"
        "t1 = time.perf_counter()\n"
        'print(f"{(t1 - t0) * 1e3:.1f} {(time.perf_counter() - t1) * 1e3:.1f}")  # ms\n'
        '"""',
        'STARTUP = """\n'  # times is_available() only: no context, right only on a CPU
        "import time\n"
        "t0 = time.perf_counter()\n"
        "import torch\n"
        "t1 = time.perf_counter()\n"
        "torch.cuda.is_available()\n"
        'print(f"{t1 - t0:.3f} {time.perf_counter() - t1:.3f}")\n'
        '"""',
        'STARTUP = """\n'  # a first CUDA tensor, but no synchronise
        "import time\n"
        "t0 = time.perf_counter()\n"
        "import torch\n"
        "t1 = time.perf_counter()\n"
        "if torch.cuda.is_available():\n"
        "    x = torch.ones(1000).cuda() * 2\n"
        'print(f"{t1 - t0:.3f} {time.perf_counter() - t1:.3f}")\n'
        '"""',
        'STARTUP = """\n'  # synchronises before the work it should wait for
        "import time\n"
        "t0 = time.perf_counter()\n"
        "import torch\n"
        "t1 = time.perf_counter()\n"
        "if torch.cuda.is_available():\n"
        "    torch.cuda.synchronize()\n"
        '    torch.zeros(1, device="cuda")\n'
        'print(f"{t1 - t0:.3f} {time.perf_counter() - t1:.3f}")\n'
        '"""',
        'STARTUP = """\n'  # CPU time: a GPU's wait and a context's set-up are missed
        "import time\n"
        "t0 = time.process_time()\n"
        "import torch\n"
        "t1 = time.process_time()\n"
        "if torch.cuda.is_available():\n"
        '    torch.zeros(1, device="cuda")\n'
        "    torch.cuda.synchronize()\n"
        'print(f"{t1 - t0:.3f} {time.process_time() - t1:.3f}")\n'
        '"""',
        'STARTUP = """\n'  # the second clock runs from before the import
        "import time\n"
        "t0 = time.perf_counter()\n"
        "import torch\n"
        "t1 = time.perf_counter()\n"
        "if torch.cuda.is_available():\n"
        '    torch.zeros(1, device="cuda")\n'
        "    torch.cuda.synchronize()\n"
        'print(f"{t1 - t0:.3f} {time.perf_counter() - t0:.3f}")\n'
        '"""',
        'STARTUP = """\n'  # init() and a synchronise, but no CUDA tensor: no context
        "import time\n"
        "t0 = time.perf_counter()\n"
        "import torch\n"
        "t1 = time.perf_counter()\n"
        "if torch.cuda.is_available():\n"
        "    torch.cuda.init()\n"
        "    torch.cuda.synchronize()\n"
        'print(f"{t1 - t0:.3f} {time.perf_counter() - t1:.3f}")\n'
        '"""'],
    3: ["def device_for_rank(rank):  # leaves LOCAL_RANK set\n"
        "    os.environ['LOCAL_RANK'] = str(rank)\n"
        "    return device_for_this_process()",
        "def device_for_rank(rank):  # resets LOCAL_RANK to 0 instead of unsetting it\n"
        "    os.environ['LOCAL_RANK'] = str(rank)\n"
        "    try:\n"
        "        return device_for_this_process()\n"
        "    finally:\n"
        "        os.environ['LOCAL_RANK'] = '0'",
        "def device_for_rank(rank):  # deletes a LOCAL_RANK a launcher had set\n"
        "    current = torch.cuda.current_device() if num_gpus() else None\n"
        "    os.environ['LOCAL_RANK'] = str(rank)\n"
        "    try:\n"
        "        return device_for_this_process()\n"
        "    finally:\n"
        "        del os.environ['LOCAL_RANK']\n"
        "        if current is not None:\n"
        "            torch.cuda.set_device(current)",
        "def device_for_rank(rank):  # right only on a CPU\n"
        "    return torch.device('cpu')",
        "def device_for_rank(rank):  # skips the lesson: no LOCAL_RANK, no set_device\n"
        "    return try_gpu(rank)",
        "def device_for_rank(rank):  # set_device by hand, LOCAL_RANK never set\n"
        "    current = torch.cuda.current_device() if num_gpus() else None\n"
        "    dev = try_gpu(rank)\n"
        "    if dev.type == 'cuda':\n"
        "        torch.cuda.set_device(dev)\n"
        "        torch.cuda.set_device(current)\n"
        "    return dev",
        "def device_for_rank(rank):  # leaves the current GPU where set_device put it\n"
        "    before = os.environ.get('LOCAL_RANK')\n"
        "    os.environ['LOCAL_RANK'] = str(rank)\n"
        "    try:\n"
        "        return device_for_this_process()\n"
        "    finally:\n"
        "        os.environ.pop('LOCAL_RANK')\n"
        "        if before is not None:\n"
        "            os.environ['LOCAL_RANK'] = before",
        "def device_for_rank(rank):  # puts cuda:0 back, not the GPU that was current\n"
        "    before = os.environ.get('LOCAL_RANK')\n"
        "    os.environ['LOCAL_RANK'] = str(rank)\n"
        "    try:\n"
        "        return device_for_this_process()\n"
        "    finally:\n"
        "        os.environ.pop('LOCAL_RANK')\n"
        "        if before is not None:\n"
        "            os.environ['LOCAL_RANK'] = before\n"
        "        if num_gpus():\n"
        "            torch.cuda.set_device(0)",
        "def device_for_rank(rank):  # puts back cuda:2, the test's GPU, hard-coded\n"
        "    before = os.environ.get('LOCAL_RANK')\n"
        "    os.environ['LOCAL_RANK'] = str(rank)\n"
        "    try:\n"
        "        return device_for_this_process()\n"
        "    finally:\n"
        "        os.environ.pop('LOCAL_RANK')\n"
        "        if before is not None:\n"
        "            os.environ['LOCAL_RANK'] = before\n"
        "        if num_gpus():\n"
        "            torch.cuda.set_device(2)"],
}
