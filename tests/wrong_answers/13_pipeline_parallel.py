"""Typical wrong answers to notebook 13's exercises: each check must say "not yet".

Each exercise has one of every class that applies: the targeted misconception, a
factor off, right only at the check's sizes, a skipped point, half the inputs, and a
wrong method that lands near the right number."""

WRONG = {
    1: ["answer = 4  # one micro-batch per stage",
        "answer = 36  # 9p instead of 9(p-1)",
        "answer = 26  # one short: the bubble is then just over 10%",
        "answer = 28  # works, but is not the smallest",
        "answer = 9  # the answer for p = 2 stages",
        "answer = 30  # 10 micro-batches per extra stage",
        "answer = 0.1  # the bubble, not m",
        "answer = 27.5  # solved (p-1)/(m+p-1) = 0.1 with p - 1 = 3 and a slip",
        "answer = '27'  # a string",
        "answer = 40  # 10 per stage",
        "answer = 31  # (p - 1) / m <= 0.1, rounded up once more"],
    2: [  # seconds, not milliseconds
        "def ms_per_image(events, stage, batch):\n"
        "    return sum(e[4] - e[3] for e in events if e[0] == stage) / batch",
        # every stage's bars, not this stage's
        "def ms_per_image(events, stage, batch):\n"
        "    return sum(e[4] - e[3] for e in events) * 1e3 / batch",
        # the forwards only
        "def ms_per_image(events, stage, batch):\n"
        "    return sum(e[4] - e[3] for e in events\n"
        "               if e[0] == stage and e[1] == 'F') * 1e3 / batch",
        # the micro-batch index read as the stage
        "def ms_per_image(events, stage, batch):\n"
        "    return sum(e[4] - e[3] for e in events if e[2] == stage) * 1e3 / batch",
        # first start to last end, idle time and all
        "def ms_per_image(events, stage, batch):\n"
        "    mine = [e for e in events if e[0] == stage]\n"
        "    span = max(e[4] for e in mine) - min(e[3] for e in mine)\n"
        "    return span * 1e3 / batch",
        # right only at the notebook's size: BATCH, not the argument
        "def ms_per_image(events, stage, batch):\n"
        "    return sum(e[4] - e[3] for e in events if e[0] == stage) * 1e3 / 32",
        # per micro-batch, not per image
        "def ms_per_image(events, stage, batch):\n"
        "    mine = [e for e in events if e[0] == stage]\n"
        "    return sum(e[4] - e[3] for e in mine) * 1e3 / (len(mine) // 2)",
        # half the inputs: the first event of the stage only
        "def ms_per_image(events, stage, batch):\n"
        "    e = next(e for e in events if e[0] == stage)\n"
        "    return (e[4] - e[3]) * 1e3 / batch",
        # a string with its unit, not a number
        "def ms_per_image(events, stage, batch):\n"
        "    ms = sum(e[4] - e[3] for e in events if e[0] == stage) * 1e3 / batch\n"
        "    return f'{ms:.2f} ms'",
        # the end times summed, not the durations
        "def ms_per_image(events, stage, batch):\n"
        "    return sum(e[4] for e in events if e[0] == stage) * 1e3 / batch",
        # the backwards only
        "def ms_per_image(events, stage, batch):\n"
        "    return sum(e[4] - e[3] for e in events\n"
        "               if e[0] == stage and e[1] == 'B') * 1e3 / batch",
        # per bar, not per image
        "def ms_per_image(events, stage, batch):\n"
        "    mine = [e for e in events if e[0] == stage]\n"
        "    return sum(e[4] - e[3] for e in mine) * 1e3 / len(mine)",
        # a tensor of the wrong value: another type does not make it right
        "import torch\n"
        "def ms_per_image(events, stage, batch):\n"
        "    return torch.tensor([e[4] - e[3] for e in events]).sum() * 1e3 / batch",
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
        # two warm-up forwards: p, not p - 1
        "def one_f_one_b(m):\n"
        "    order = ['F0', 'F1'][:m]\n"
        "    for i in range(2, m):\n"
        "        order += [f'F{i}', f'B{i - 2}']\n"
        "    return order + [f'B{i}' for i in range(max(m - 2, 0), m)]",
        # right only at the check's first sizes: written out for m = 3
        "def one_f_one_b(m):\n"
        "    return ['F0', 'F1', 'B0', 'F2', 'B1', 'B2']",
        # the last backward forgotten
        "def one_f_one_b(m):\n"
        "    order = ['F0']\n"
        "    for i in range(1, m):\n"
        "        order += [f'F{i}', f'B{i - 1}']\n"
        "    return order",
        # tuples, not strings
        "def one_f_one_b(m):\n"
        "    order = [('F', 0)]\n"
        "    for i in range(1, m):\n"
        "        order += [('F', i), ('B', i - 1)]\n"
        "    return order + [('B', m - 1)]",
        # backward before the forward of the step
        "def one_f_one_b(m):\n"
        "    order = ['F0']\n"
        "    for i in range(1, m):\n"
        "        order += [f'B{i - 1}', f'F{i}']\n"
        "    return order + [f'B{m - 1}']",
        # off by one in the micro-batch numbers
        "def one_f_one_b(m):\n"
        "    order = ['F1']\n"
        "    for i in range(2, m + 1):\n"
        "        order += [f'F{i}', f'B{i - 1}']\n"
        "    return order + [f'B{m}']",
    ],
}
