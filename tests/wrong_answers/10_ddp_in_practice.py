"""Typical wrong answers to notebook 10's exercises: each check must say "not yet"."""

WRONG = {
    1: [  # a strided share of its own, ignoring the sampler's (shuffled) share
        "def local_counts(model, data, sampler):\n"
        "    idx = torch.arange(sampler.rank, len(data), sampler.num_replicas)\n"
        "    x, y = data[idx]\n"
        "    with torch.no_grad():\n"
        "        right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.stack([right, torch.tensor(len(y))])",
        # the whole padded share: the repeats are counted twice
        "def local_counts(model, data, sampler):\n"
        "    x, y = data[torch.tensor(list(sampler))]\n"
        "    with torch.no_grad():\n"
        "        right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.stack([right, torch.tensor(len(y))])",
        # repeats removed within the rank only: they repeat other ranks' samples
        "def local_counts(model, data, sampler):\n"
        "    x, y = data[torch.tensor(sorted(set(sampler)))]\n"
        "    with torch.no_grad():\n"
        "        right = (model(x).argmax(1) == y).sum()\n"
        "    return torch.stack([right, torch.tensor(len(y))])",
    ],
    2: [  # one all-reduce per tensor, as average_gradients does
        "def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):\n"
        "    for p in model.parameters():\n"
        "        all_reduce(p.grad)\n"
        "        p.grad /= world",
        # the bucket is averaged but never copied back into the gradients
        "def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):\n"
        "    bucket = torch.cat([p.grad.flatten() for p in model.parameters()])\n"
        "    all_reduce(bucket)\n"
        "    bucket /= world",
        # the sum, not the mean
        "def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):\n"
        "    grads = [p.grad for p in model.parameters()]\n"
        "    bucket = torch.cat([g.flatten() for g in grads])\n"
        "    all_reduce(bucket)\n"
        "    for g, part in zip(grads, bucket.split([g.numel() for g in grads])):\n"
        "        g.copy_(part.view_as(g))",
    ],
    3: ["answer = 2.0  # 1 + 1000 x 0.001",
        "answer = 1.99  # a little lost to rounding"],
}
