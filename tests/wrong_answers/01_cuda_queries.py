"""Typical wrong answers to notebook 01's exercises: each check must say "not yet"."""

WRONG = {
    1: ["answer = 1000 * 1000  # counts the values, not their bytes",
        "answer = 8 * 1000 * 1000  # bytes of float64, not float32"],
    2: ["def gflops_by_dtype(n):  # the dtype is never used: float32 twice\n"
        "    x, y = (torch.randn(n, n, device=device) for _ in 'xy')\n"
        "    return {dt: matmul_rate(x, y) for dt in DTYPES}",
        "def gflops_by_dtype(n):  # seconds per multiply, not GFLOP/s\n"
        "    made = {dt: [torch.randn(n, n, dtype=dt, device=device) for _ in 'xy']\n"
        "            for dt in DTYPES}\n"
        "    return {dt: matmul_timing(x, y).median for dt, (x, y) in made.items()}",
        "def gflops_by_dtype(n):  # FLOP/s, not GFLOP/s\n"
        "    made = {dt: [torch.randn(n, n, dtype=dt, device=device) for _ in 'xy']\n"
        "            for dt in DTYPES}\n"
        "    return {dt: matmul_rate(x, y) * 1e9 for dt, (x, y) in made.items()}"],
    3: ["def pick_device(i=0):  # right on this machine only\n"
        "    return torch.device('cpu')",
        "def pick_device(i=0):  # never checks that device i exists\n"
        "    found = torch.accelerator.current_accelerator(check_available=True)\n"
        "    return torch.device(found.type, i) if found else torch.device('cpu')",
        "def pick_device(i=0):  # the build's accelerator, present or not\n"
        "    return torch.device(torch.accelerator.current_accelerator().type, i)"],
}
