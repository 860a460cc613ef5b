"""Typical wrong answers to notebook 10's exercises: each check must say "not yet".

Written as an adversary would, one or more per class: the targeted misconception, a
factor off, right only at one size, the wrong thing left behind, half the inputs, a
wrong method that lands on the right number. No exercise here depends on a device.
"""

_COUNT = (  # the shared tail of exercise 1's answers: count `keep` of the share
    "    x, y = data[idx[keep]]\n"
    "    with torch.no_grad():\n"
    "        right = (model(x).argmax(1) == y).sum()\n"
    "    return torch.stack([right, keep.sum()])")


def _counts(keep: str) -> str:
    """Return a local_counts that keeps the share positions where `keep` holds."""
    return ("def local_counts(model, data, sampler):\n"
            "    idx = torch.tensor(list(sampler))\n"
            "    pos = torch.arange(len(idx))\n"
            "    rank, world = sampler.rank, sampler.num_replicas\n"
            f"    keep = {keep}\n" + _COUNT)


_BUCKET = ("def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):\n"
           "    grads = [p.grad for p in model.parameters()]\n"
           "    bucket = torch.cat([g.flatten() for g in grads])\n")
_BACK = ("    for g, part in zip(grads, bucket.split([g.numel() for g in grads])):\n"
         "        g.copy_(part.view_as(g))")

WRONG = {
    1: [  # a skipped point: no torch.no_grad(), so autograd records the evaluation
        "def local_counts(model, data, sampler):\n"
        "    idx = torch.tensor(list(sampler))\n"
        "    real = sampler.rank + sampler.num_replicas * torch.arange(len(idx)) "
        "< len(data)\n"
        "    x, y = data[idx[real]]\n"
        "    right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.stack([right, real.sum()])",
        # a strided share of its own, ignoring the sampler's (shuffled) share
        "def local_counts(model, data, sampler):\n"
        "    idx = torch.arange(sampler.rank, len(data), sampler.num_replicas)\n"
        "    x, y = data[idx]\n"
        "    with torch.no_grad():\n"
        "        right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.stack([right, torch.tensor(len(y))])",
        # the whole padded share: the repeats are counted twice (the misconception)
        _counts("pos >= 0"),
        # repeats removed within the rank only: they repeat other ranks' samples
        "def local_counts(model, data, sampler):\n"
        "    x, y = data[torch.tensor(sorted(set(sampler)))]\n"
        "    with torch.no_grad():\n"
        "        right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.stack([right, torch.tensor(len(y))])",
        # right only when one sample pads: the last rank drops its last position
        _counts("~((rank == world - 1) & (pos == len(idx) - 1))"),
        # right only at 3 ranks (2 repeats): ranks 1 and up drop their last position
        _counts("~((rank >= 1) & (pos == len(idx) - 1))"),
        # a factor off: every rank drops its last position when the data do not divide
        _counts("pos < len(idx) - (len(data) % world != 0)"),
        # the wrong thing left behind: right counts, but gradients stay off afterwards
        "def local_counts(model, data, sampler):\n"
        "    torch.set_grad_enabled(False)\n"
        "    idx = torch.tensor(list(sampler))\n"
        "    keep = sampler.rank + sampler.num_replicas * torch.arange(len(idx)) "
        "< len(data)\n"
        "    x, y = data[idx[keep]]\n"
        "    right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.stack([right, keep.sum()])",
        # half the inputs: right answers over the whole share, samples without repeats
        "def local_counts(model, data, sampler):\n"
        "    idx = torch.tensor(list(sampler))\n"
        "    keep = sampler.rank + sampler.num_replicas * torch.arange(len(idx)) "
        "< len(data)\n"
        "    x, y = data[idx]\n"
        "    with torch.no_grad():\n"
        "        right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.stack([right, keep.sum()])",
        # a wrong method that lands on the right total: len(data) / world per rank
        "def local_counts(model, data, sampler):\n"
        "    idx = torch.tensor(list(sampler))\n"
        "    keep = sampler.rank + sampler.num_replicas * torch.arange(len(idx)) "
        "< len(data)\n"
        "    x, y = data[idx[keep]]\n"
        "    with torch.no_grad():\n"
        "        right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.tensor([right.item(), len(data) / sampler.num_replicas])",
        # the right number of samples, but the last ones kept: a repeat in, a sample out
        "def local_counts(model, data, sampler):\n"
        "    idx = torch.tensor(list(sampler))\n"
        "    real = int((sampler.rank + sampler.num_replicas * torch.arange(len(idx)) "
        "< len(data)).sum())\n"
        "    x, y = data[idx[len(idx) - real:]]\n"
        "    with torch.no_grad():\n"
        "        right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.tensor([right, real])",
        # the sample's index tested, not its position: every index is below len(data)
        _counts("idx < len(data)"),
    ],
    2: [  # one all-reduce per tensor, as average_gradients does (the misconception)
        "def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):\n"
        "    for p in model.parameters():\n"
        "        all_reduce(p.grad)\n"
        "        p.grad /= world",
        # the bucket is averaged but never copied back into the gradients
        _BUCKET + "    all_reduce(bucket)\n    bucket /= world",
        # the sum, not the mean
        _BUCKET + "    all_reduce(bucket)\n" + _BACK,
        # right only at the size it was tried at: 2 ranks hard-coded
        _BUCKET + "    all_reduce(bucket)\n    bucket /= 2\n" + _BACK,
        # a factor off: divided before the all-reduce, as DDP does, and after it too
        _BUCKET + "    bucket /= world\n    all_reduce(bucket)\n    bucket /= world\n"
        + _BACK,
        # half the inputs: the weights' gradients only, the biases' left alone
        "def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):\n"
        "    grads = [p.grad for p in model.parameters() if p.dim() > 1]\n"
        "    bucket = torch.cat([g.flatten() for g in grads])\n"
        "    all_reduce(bucket)\n    bucket /= world\n" + _BACK,
        # the wrong thing changed: the means go into the weights, not the gradients
        "def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):\n"
        "    params = list(model.parameters())\n"
        "    bucket = torch.cat([p.grad.flatten() for p in params])\n"
        "    all_reduce(bucket)\n    bucket /= world\n"
        "    for p, part in zip(params, bucket.split([p.numel() for p in params])):\n"
        "        p.data.copy_(part.view_as(p))",
        # the process group's all_reduce instead of the one it was given
        _BUCKET + "    dist.all_reduce(bucket)\n    bucket /= world\n" + _BACK,
        # a wrong method: one all_reduce, but every gradient takes the bucket's start
        _BUCKET + "    all_reduce(bucket)\n    bucket /= world\n"
        "    for g in grads:\n        g.copy_(bucket[:g.numel()].view_as(g))",
        # the point skipped: no all_reduce at all, each rank divides its own
        "def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):\n"
        "    for p in model.parameters():\n"
        "        p.grad /= world",
        # ReduceOp.AVG already divides: dividing again halves it twice
        _BUCKET + "    all_reduce(bucket, op=dist.ReduceOp.AVG)\n    bucket /= world\n"
        + _BACK,
        # the means copied back in the opposite order to the one they were packed in
        _BUCKET + "    all_reduce(bucket)\n    bucket /= world\n"
        "    for g, part in zip(grads[::-1], bucket.split([g.numel() for g in "
        "grads[::-1]])):\n"
        "        g.copy_(part.view_as(g))",
    ],
    3: ["answer = 2.0  # 1 + 1000 x 0.001",
        "answer = 1.99  # a little lost to rounding",
        "answer = 1.999",
        "answer = 1.0078125  # one bfloat16 step up",
        "answer = 1.001  # only the first addition counts",
        "answer = 1.992  # rounded to bfloat16 once, at the end",
        "answer = 0.001",
        "answer = 8.8  # every addition rounds up a whole step",
        "answer = 1.977  # float16's rounding, not bfloat16's"],
}
