"""Typical wrong answers to notebook 01's exercises: each check must say "not yet"."""

_MADE = ("    made = {dt: [torch.randn(n, n, dtype=dt, device=device) for _ in 'xy']\n"
         "            for dt in DTYPES}\n")

# Timings that skip a synchronise are right on a CPU, which has no queue: the faked-GPU
# tests in tests/test_nb01_simulated_gpu.py give them to the check on a queueing one.
WRONG = {
    1: ["answer = 1000 * 1000  # counts the values, not their bytes",
        "answer = 8 * 1000 * 1000  # bytes of float64, not float32",
        "answer = 32 * 1000 * 1000  # bits, not bytes",
        "answer = 4 * 1024 * 1024  # 1024 × 1024 values: 4 MiB",
        "answer = 4_000_256  # what the allocator hands out, rounded up to 512 B",
        "answer = torch.empty(1000, 1000).element_size()  # one value's bytes",
        "answer = 4.0  # in MB, not bytes",
        "answer = round(4e6 / 2**20, 2)  # in MiB, not bytes",
        "answer = (1000, 1000)  # the shape, not the bytes",
        "import sys\n"
        "answer = sys.getsizeof(torch.empty(1000, 1000))  # the Python object"],
    2: ["def gflops_by_dtype(n):  # the dtype is never used: float32 twice\n"
        "    x, y = (torch.randn(n, n, device=device) for _ in 'xy')\n"
        "    return {dt: matmul_rate(x, y) for dt in DTYPES}",
        "def gflops_by_dtype(n):  # seconds per multiply, not GFLOP/s\n" + _MADE +
        "    return {dt: matmul_timing(x, y).median for dt, (x, y) in made.items()}",
        "def gflops_by_dtype(n):  # FLOP/s, not GFLOP/s\n" + _MADE +
        "    return {dt: matmul_rate(x, y) * 1e9 for dt, (x, y) in made.items()}",
        "def gflops_by_dtype(n):  # counts n³ FLOPs, not 2n³\n" + _MADE +
        "    return {dt: n**3 / matmul_timing(x, y).median / 1e9\n"
        "            for dt, (x, y) in made.items()}",
        "import time\n"
        "def gflops_by_dtype(n):  # one cold call, no warm-up\n" + _MADE +
        "    rates = {}\n"
        "    for dt, (x, y) in made.items():\n"
        "        t0 = time.perf_counter()\n"
        "        x @ y\n"
        "        rates[dt] = gflops(n, time.perf_counter() - t0)\n"
        "    return rates",
        "def gflops_by_dtype(n):  # synchronised, but the first (cold) call is timed\n"
        + _MADE +
        "    return {dt: gflops(n, benchmark(lambda: x @ y, device, warmup=0,\n"
        "                                    repeats=1).median)\n"
        "            for dt, (x, y) in made.items()}",
        "def gflops_by_dtype(n):  # times making the inputs too\n"
        "    def once(dt):\n"
        "        return (torch.randn(n, n, dtype=dt, device=device)\n"
        "                @ torch.randn(n, n, dtype=dt, device=device))\n"
        "    return {dt: gflops(n, benchmark(lambda: once(dt), device).median)\n"
        "            for dt in DTYPES}",
        "def gflops_by_dtype(n):  # always 512: right only at the size it was run at\n"
        "    made = {dt: [torch.randn(512, 512, dtype=dt, device=device)\n"
        "                 for _ in 'xy'] for dt in DTYPES}\n"
        "    return {dt: matmul_rate(x, y) for dt, (x, y) in made.items()}",
        "def gflops_by_dtype(n):  # a global default dtype, never put back\n"
        "    rates = {}\n"
        "    for dt in DTYPES:\n"
        "        torch.set_default_dtype(dt)\n"
        "        x, y = (torch.randn(n, n, device=device) for _ in 'xy')\n"
        "        rates[dt] = matmul_rate(x, y)\n"
        "    return rates",
        "def gflops_by_dtype(n):  # an elementwise product, not a matrix multiply\n"
        + _MADE +
        "    return {dt: gflops(n, benchmark(lambda: x * y, device).median)\n"
        "            for dt, (x, y) in made.items()}",
        "def gflops_by_dtype(n):  # benchmark's number= multiplied back in\n" + _MADE +
        "    return {dt: gflops(n, matmul_timing(x, y, number=10).median * 10)\n"
        "            for dt, (x, y) in made.items()}"],
    3: ["def pick_device(i=0):  # right on this machine only\n"
        "    return torch.device('cpu')",
        "def pick_device(i=0):  # never checks that device i exists\n"
        "    found = torch.accelerator.current_accelerator(check_available=True)\n"
        "    return torch.device(found.type, i) if found else torch.device('cpu')",
        "def pick_device(i=0):  # the build's accelerator, present or not\n"
        "    return torch.device(torch.accelerator.current_accelerator().type, i)",
        "def pick_device(i=0):  # CUDA only: misses every other accelerator\n"
        "    n = torch.cuda.device_count()\n"
        "    return torch.device('cuda', i) if i < n else torch.device('cpu')",
        "def pick_device(i=0):  # one past the last device still counts\n"
        "    found = torch.accelerator.current_accelerator(check_available=True)\n"
        "    if found is not None and i <= torch.accelerator.device_count():\n"
        "        return torch.device(found.type, i)\n"
        "    return torch.device('cpu')",
        "def pick_device(i=0):  # no index: the current device, not device i\n"
        "    found = torch.accelerator.current_accelerator(check_available=True)\n"
        "    if found is not None and i < torch.accelerator.device_count():\n"
        "        return torch.device(found.type)\n"
        "    return torch.device('cpu')",
        "def pick_device(i=0):  # the current index instead of i\n"
        "    found = torch.accelerator.current_accelerator(check_available=True)\n"
        "    if found is not None and i < torch.accelerator.device_count():\n"
        "        return torch.device(found.type,\n"
        "                            torch.accelerator.current_device_index())\n"
        "    return torch.device('cpu')",
        "def pick_device(i=0):  # a string, not a torch.device\n"
        "    return 'cpu'",
        "def pick_device(i=0):  # try_gpu asks torch.cuda: no MPS, no faked GPUs\n"
        "    return try_gpu(i, verbose=False)",
        "def pick_device(i=0):  # CUDA's kind only, though it asks torch.accelerator\n"
        "    found = torch.accelerator.current_accelerator(check_available=True)\n"
        "    if found is not None and found.type == 'cuda' and \\\n"
        "            i < torch.accelerator.device_count():\n"
        "        return torch.device('cuda', i)\n"
        "    return torch.device('cpu')"],
}
