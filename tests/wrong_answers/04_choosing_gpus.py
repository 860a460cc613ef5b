"""Typical wrong answers to notebook 04's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def visible_count(value, physical):  # counts the entries, valid or not\n"
        "    return physical if value is None else len(value.split(','))",
        "def visible_count(value, physical):  # skips a bad index instead of stopping\n"
        "    if value is None:\n"
        "        return physical\n"
        "    return sum(v.isdigit() and int(v) < physical for v in value.split(','))"],
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
        '"""'],
    3: ["def device_for_rank(rank):  # leaves LOCAL_RANK set\n"
        "    os.environ['LOCAL_RANK'] = str(rank)\n"
        "    return device_for_this_process()",
        "def device_for_rank(rank):  # resets LOCAL_RANK to 0 instead of unsetting it\n"
        "    os.environ['LOCAL_RANK'] = str(rank)\n"
        "    try:\n"
        "        return device_for_this_process()\n"
        "    finally:\n"
        "        os.environ['LOCAL_RANK'] = '0'"],
}
