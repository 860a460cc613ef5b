"""Typical wrong answers to notebook 13's exercises: each check must say "not yet"."""

WRONG = {
    1: ["answer = 4  # one micro-batch per stage",
        "answer = 36  # 9p instead of 9(p-1)",
        "answer = 26  # one short: the bubble is then just over 10%"],
    2: [  # seconds, not milliseconds
        "def ms_per_image(events, stage):\n"
        "    return sum(e[4] - e[3] for e in events if e[0] == stage) / BATCH",
        # every stage's bars, not this stage's
        "def ms_per_image(events, stage):\n"
        "    return sum(e[4] - e[3] for e in events) * 1e3 / BATCH",
        # the forwards only
        "def ms_per_image(events, stage):\n"
        "    return sum(e[4] - e[3] for e in events\n"
        "               if e[0] == stage and e[1] == 'F') * 1e3 / BATCH",
    ],
    3: [  # GPipe's order: all forwards, then all backwards
        "def one_f_one_b(m):\n"
        "    return [f'F{i}' for i in range(m)] + [f'B{i}' for i in range(m)]",
        # alternating, but each backward right after its own forward (last in, first
        # out): the first micro-batch's gradient comes back last
        "def one_f_one_b(m):\n"
        "    order = ['F0']\n"
        "    for i in range(1, m):\n"
        "        order += [f'F{i}', f'B{i}']\n"
        "    return order + ['B0']",
        # stage 2's order, with no warm-up forward
        "def one_f_one_b(m):\n"
        "    return [f'{k}{i}' for i in range(m) for k in 'FB']",
    ],
}
