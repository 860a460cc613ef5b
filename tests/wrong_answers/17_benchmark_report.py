"""Typical wrong answers to notebook 17's exercises: each check must say "not yet"."""

WRONG = {
    1: ["def serial_fraction(eff, n=2):\n"
        "    return 1 / eff - 1  # right for two devices only",
        "def serial_fraction(eff, n=2):\n"
        "    return 1 - eff  # the lost efficiency is not the serial part"],
    2: ["def speedups(report):  # trusts the stored field\n"
        "    return {r['run']: r['speedup'] for r in report['rows']\n"
        "            if r['speedup'] is not None}",
        "def speedups(report):  # assumes the CPU row comes first\n"
        "    cpu = report['rows'][0]['ms_per_step']\n"
        "    return {r['run']: cpu / r['ms_per_step'] for r in report['rows']\n"
        "            if r['ms_per_step'] is not None}",
        "def speedups(report):  # upside down: time over the CPU's time\n"
        "    cpu = next(r['ms_per_step'] for r in report['rows']\n"
        "               if r['run'].startswith('CPU'))\n"
        "    return {r['run']: r['ms_per_step'] / cpu for r in report['rows']\n"
        "            if r['ms_per_step'] is not None}"],
    3: ["work_per_gradient_ratio = 2  # the image side doubles",
        "work_per_gradient_ratio = 16  # 4x the pixels times 4x the weights",
        "work_per_gradient_ratio = 8  # and twice the samples"],
    4: ["answer_fixes = dict.fromkeys('ABCD', 'data')  # more workers, the usual guess",
        "answer_fixes = {'A': 'data', 'B': 'comm', 'C': 'comm', 'D': 'comm'}"
        "  # a host sync read as communication; a scaling step 'fixed'",
        "answer_fixes = {'A': 'data', 'B': 'comm', 'C': 'sync', 'D': 'comm'}"
        "  # D's largest overhead, though D is mostly compute"],
}
