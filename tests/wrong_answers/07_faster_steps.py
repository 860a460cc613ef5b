"""Typical wrong answers to notebook 07's exercises: each check must say "not yet"."""

_LOSS = "    loss = nn.functional.mse_loss(model(x), y)\n"
WRONG = {
    1: ["def clipped_loss_one_graph(model, x, y):\n" + _LOSS
        + "    return loss * torch.clamp(1.0 / loss, max=1.0)  # not detached",
        "def clipped_loss_one_graph(model, x, y):\n"
        "    return torch.clamp(nn.functional.mse_loss(model(x), y), max=1.0)",
        "clipped_loss_one_graph = clipped_loss  # still two graphs",
        # clamped from the wrong side: losses below 1 are scaled up
        "def clipped_loss_one_graph(model, x, y):\n" + _LOSS
        + "    return loss * torch.clamp(1.0 / loss.detach(), min=1.0)",
        # right values, gradients through the divisor
        "def clipped_loss_one_graph(model, x, y):\n" + _LOSS
        + "    return loss / torch.clamp(loss, min=1.0)",
        # the scale read once, at the first call: right only for losses above 1
        "def clipped_loss_one_graph(model, x, y):\n" + _LOSS
        + "    return loss / loss.detach()"],
    2: ["def feed(static, new):\n    static = new  # rebinds the name only",
        "def feed(static, new):\n    return new.clone()",
        "def feed(static, new):\n    static.data = new  # new memory, old name",
        "def feed(static, new):\n    static.set_(new)  # points elsewhere now",
        "def feed(static, new):\n    new.copy_(static)  # copied the wrong way",
        "def feed(static, new):\n    static[:2] = new[:2]  # half the batch"],
}
WRONG[3] = [
    "def workers_needed(load_ms, compute_ms):\n"
    "    return load_ms // compute_ms  # rounds down: the step still waits",
    "def workers_needed(load_ms, compute_ms):\n"
    "    return os.cpu_count()  # one per core, whatever the timings",
    "def workers_needed(load_ms, compute_ms):\n"
    "    return round(load_ms / compute_ms + 0.5)  # round() halves to even",
    "def workers_needed(load_ms, compute_ms):\n"
    "    return load_ms // compute_ms + 1  # one too many when it divides",
    "def workers_needed(load_ms, compute_ms):\n"
    "    return math.ceil(load_ms / compute_ms) + 1  # a spare worker",
    "def workers_needed(load_ms, compute_ms):\n"
    "    return max(1, math.ceil(load_ms / compute_ms))  # at least one",
    "def workers_needed(load_ms, compute_ms):\n"
    "    return round(load_ms / compute_ms)  # rounds to the nearest",
    "def workers_needed(load_ms, compute_ms):\n"
    "    return math.ceil(compute_ms / load_ms) if load_ms else 0  # upside down",
    # right only at whole milliseconds: the integer ceiling idiom
    "def workers_needed(load_ms, compute_ms):\n"
    "    return int((load_ms + compute_ms - 1) // compute_ms)",
    # the right number as a float, which num_workers refuses
    "def workers_needed(load_ms, compute_ms):\n"
    "    return float(math.ceil(load_ms / compute_ms))",
]
WRONG[2] += [
    # adds to the last batch: right only while the captured tensor holds zeros
    "def feed(static, new):\n    static += new",
    "def feed(static, new):\n    static.copy_(static + new)",
]
WRONG[3] += [
    # a fraction of a worker: k * compute >= load holds, but no DataLoader takes 3.2
    "def workers_needed(load_ms, compute_ms):\n    return load_ms / compute_ms",
    "def workers_needed(load_ms, compute_ms):\n    return load_ms / compute_ms + 0.5",
]
