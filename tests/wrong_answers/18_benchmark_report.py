"""Typical wrong answers to notebook 18's exercises: each check must say "not yet".

Every exercise gets one of each class: the targeted misconception, a factor off, right
only at the check's sizes, right only on this machine (a CPU), a skipped point, the
wrong thing left behind, half the inputs, and a wrong method that lands on the right
number somewhere.
"""

_CPU_FIRST = ("    cpu = next(r['ms_per_step'] for r in report['rows']\n"
              "               if r['run'].startswith('CPU'))\n")

WRONG = {
    1: ["def serial_fraction(eff, n=2):\n"
        "    return 1 / eff - 1  # targeted: right for two devices only",
        "def serial_fraction(eff, n=2):\n"
        "    return 1 - eff  # the lost efficiency is not the serial part",
        "def serial_fraction(eff, n=2):\n"
        "    return (1 / eff - 1) / n  # a factor off: n, not n - 1",
        # right only at the check's old sizes (n = 2, 4, 8): log2 n = n - 1 at n = 2
        "import math\n"
        "def serial_fraction(eff, n=2):\n"
        "    return (1 / eff - 1) / math.log2(n) if n > 2 else 1 / eff - 1",
        # right only on this machine: the devices here (none on a CPU: 2 assumed)
        "def serial_fraction(eff, n=2):\n"
        "    n = max(num_gpus(), 2)\n"
        "    return (1 / eff - 1) / (n - 1)",
        # the wrong thing left behind: the article's efficiency, not the argument
        "def serial_fraction(eff, n=2):\n"
        "    eff = ARTICLE['1 GPU'] / (2 * ARTICLE['DDP, 2 GPUs'])\n"
        "    return (1 / eff - 1) / (n - 1)",
        # half the inputs: right below 100 %, None at a perfect 1.0
        "def serial_fraction(eff, n=2):\n"
        "    return (1 / eff - 1) / (n - 1) if eff < 1 else None",
        # a wrong method landing on the right number at E = 0.5 and 1.0, n = 2:
        # Gustafson's law read backwards
        "def serial_fraction(eff, n=2):\n"
        "    return n * (1 - eff) / (n - 1)",
        # the skipped point: rounded, so E does not come back
        "def serial_fraction(eff, n=2):\n"
        "    return round((1 / eff - 1) / (n - 1), 2)",
        # a factor off: the fraction in percent
        "def serial_fraction(eff, n=2):\n"
        "    return 100 * (1 / eff - 1) / (n - 1)"],
    2: ["def speedups(report):  # targeted: trusts the stored field\n"
        "    return {r['run']: r['speedup'] for r in report['rows']\n"
        "            if r['speedup'] is not None}",
        "def speedups(report):  # assumes the CPU row comes first\n"
        "    cpu = report['rows'][0]['ms_per_step']\n"
        "    return {r['run']: cpu / r['ms_per_step'] for r in report['rows']\n"
        "            if r['ms_per_step'] is not None}",
        "def speedups(report):  # upside down: time over the CPU's\n" + _CPU_FIRST +
        "    return {r['run']: r['ms_per_step'] / cpu for r in report['rows']\n"
        "            if r['ms_per_step'] is not None}",
        "def speedups(report):  # a factor off: percent\n" + _CPU_FIRST +
        "    return {r['run']: 100 * cpu / r['ms_per_step'] for r in report['rows']\n"
        "            if r['ms_per_step'] is not None}",
        "def speedups(report):  # a gain, not a ratio\n" + _CPU_FIRST +
        "    return {r['run']: cpu / r['ms_per_step'] - 1 for r in report['rows']\n"
        "            if r['ms_per_step'] is not None}",
        # right only on a CPU machine: the CPU and DDP rows only
        "def speedups(report):\n" + _CPU_FIRST +
        "    return {r['run']: cpu / r['ms_per_step'] for r in report['rows']\n"
        "            if r['run'].startswith(('CPU', 'DDP'))}",
        # the wrong thing left behind: this notebook's CPU time, not the report's
        "def speedups(report):\n"
        "    return {r['run']: cpu_ms / r['ms_per_step'] for r in report['rows']\n"
        "            if r['ms_per_step'] is not None}",
        # half the inputs: the CPU row itself left out
        "def speedups(report):\n" + _CPU_FIRST +
        "    return {r['run']: cpu / r['ms_per_step'] for r in report['rows']\n"
        "            if r['ms_per_step'] is not None and r['run'] != 'CPU, 1 process'}",
        # a wrong method landing on the right number where the CPU is the slowest
        "def speedups(report):\n"
        "    ms = [r['ms_per_step'] for r in report['rows'] if r['ms_per_step']]\n"
        "    return {r['run']: max(ms) / r['ms_per_step'] for r in report['rows']\n"
        "            if r['ms_per_step'] is not None}",
        # the skipped point: runs that were not measured kept as None
        "def speedups(report):\n" + _CPU_FIRST +
        "    return {r['run']: r['ms_per_step'] and cpu / r['ms_per_step']\n"
        "            for r in report['rows']}",
        # rounded as the table prints them
        "def speedups(report):\n" + _CPU_FIRST +
        "    return {r['run']: round(cpu / r['ms_per_step'], 2)\n"
        "            for r in report['rows'] if r['ms_per_step'] is not None}",
        # over the single device, not the CPU
        "def speedups(report):\n"
        "    one = next(r['ms_per_step'] for r in report['rows']\n"
        "               if r['run'].startswith('1 ') and r['ms_per_step'])\n"
        "    return {r['run']: one / r['ms_per_step'] for r in report['rows']\n"
        "            if r['ms_per_step'] is not None}",
        # half the inputs: rows picked by the stored speedup, not by ms_per_step
        "def speedups(report):\n" + _CPU_FIRST +
        "    return {r['run']: cpu / r['ms_per_step'] for r in report['rows']\n"
        "            if r['speedup'] is not None}"],
    3: ["work_per_gradient_ratio = 3  # targeted: the image side",
        "work_per_gradient_ratio = (40 / 16) ** 2  # the weights' ratio, not pixels'",
        "work_per_gradient_ratio = 9 * (40 / 16) ** 2  # a factor off: work, not per "
        "gradient",
        "work_per_gradient_ratio = 40 / 16  # the width",
        # the wrong thing left behind: "medium" against "small", from SIZES
        "work_per_gradient_ratio = (SIZES['medium']['image_size']\n"
        "                           / SIZES['small']['image_size']) ** 2",
        "work_per_gradient_ratio = (32 / 96) ** 2  # upside down",
        # half the inputs: one side of the image
        "work_per_gradient_ratio = WIDE['image_size'] / SIZES['small']['image_size']",
        # right only for a square of side 1: the pixels of one row, times the width
        "work_per_gradient_ratio = 96 / 32 * 40 / 16 * 2",
        # a wrong method: the parameters' ratio, counted, instead of the work's
        "work_per_gradient_ratio = (sum(p.numel() for p in Net(40).parameters())\n"
        "                           / sum(p.numel() for p in Net(16).parameters()))"],
    4: ["answer_fixes = dict.fromkeys('ABCD', 'data')  # more workers, the usual guess",
        # right only on a CPU, where .item() costs nothing: C's sync read as comm
        "answer_fixes = {'A': 'data', 'B': 'comm', 'C': 'comm', 'D': None}",
        # the skipped point: D's largest overhead, though D is mostly compute
        "answer_fixes = {'A': 'data', 'B': 'comm', 'C': 'sync', 'D': 'comm'}",
        # a factor off: 'mostly compute' from half the step, so A (52 %) passes
        "answer_fixes = {'A': None, 'B': 'comm', 'C': None, 'D': None}",
        # half the inputs: three cases of four
        "answer_fixes = {'A': 'data', 'B': 'comm', 'C': 'sync'}",
        # the wrong thing left behind: this machine's own runs, not CASES
        "answer_fixes = {run: max(('sync', 'data', 'comm', 'other'), key=b.parts.get)\n"
        "                for run, b in breakdowns.items()}",
        # a wrong method: the largest part, compute included
        "answer_fixes = {c: max(p, key=p.get) for c, p in CASES.items()}",
        # right only at a 90 % band: D (87 %) would still be fixed
        "answer_fixes = {c: None if p['compute'] / sum(p.values()) > 0.9 else\n"
        "                max(('sync', 'data', 'comm', 'other'), key=p.get)\n"
        "                for c, p in CASES.items()}",
        # targeted: the host sync filed under other (Python, launches)
        "answer_fixes = {'A': 'data', 'B': 'comm', 'C': 'other', 'D': None}",
        # B's tiny step read as mostly compute
        "answer_fixes = {'A': 'data', 'B': None, 'C': 'sync', 'D': None}",
        # a string for None
        "answer_fixes = {'A': 'data', 'B': 'comm', 'C': 'sync', 'D': 'none'}"],
}
