"""Typical wrong answers to notebook 06's exercises: each check must say "not yet"."""

_STEP = ("def labelled_step(model, opt, x, y):\n"
         "    with record_function('forward'):\n"
         "        out = model(x)\n"
         "{loss}"
         "    with record_function('backward'):\n"
         "{backward}"
         "    with record_function('optimizer'):\n"
         "{optimizer}"
         "    return loss.detach()")
_LOSS = ("    with record_function('loss'):\n"
         "        loss = nn.functional.mse_loss(out, y)\n")
_BACKWARD = "        opt.zero_grad(set_to_none=True)\n        loss.backward()\n"
_STEP_ONLY = "        opt.step()\n"


def _step(loss=_LOSS, backward=_BACKWARD, optimizer=_STEP_ONLY):
    return _STEP.format(loss=loss, backward=backward, optimizer=optimizer)


WRONG = {
    1: [
        # the targeted misconception: the loss nested inside forward
        _step(loss="        with record_function('loss'):  # nested inside forward\n"
                   "            loss = nn.functional.mse_loss(out, y)\n"),
        "labelled_step = train_step  # three labels: the loss hides inside forward",
        # an empty label: the loss still runs under forward
        _step(loss="        loss = nn.functional.mse_loss(out, y)\n"
                   "    with record_function('loss'):\n"
                   "        pass  # the label, with nothing in it\n"),
        # skipped points: no zero_grad, no backward, no step, zero_grad after backward
        _step(backward="        loss.backward()  # gradients pile up\n"),
        _step(backward="        opt.zero_grad(set_to_none=True)  # no backward\n"),
        _step(optimizer="        pass  # no step\n"),
        _step(backward="        loss.backward()\n"
                       "        opt.zero_grad(set_to_none=True)\n"),
        # the labels in another order: backward's work under "optimizer"
        _step(backward="        opt.zero_grad(set_to_none=True)\n",
              optimizer="        loss.backward()\n        opt.step()\n"),
    ],
    2: ["answer = 2 * 4 * 91_009  # the two moments, but no step counts",
        "answer = 4 * 91_009  # one moment per parameter",
        "answer = 2 * 4 * (64 * 128 + 5 * 128 * 128 + 128)  # weights without biases",
        "answer = 2 * 4 * 91_009 + 8 * 14  # 8-byte step counts",
        "answer = 2 * 4 * 91_009 + 4  # one step count for the whole optimizer",
        "answer = 3 * 4 * 91_009 + 4 * 14  # the gradients counted as Adam's too",
        "answer = 2 * 4 * 91_009 + 4 * 7  # one step count per layer"],
    3: ["answer = ('segments', 'segments', 'segments')  # the message's own advice",
        "answer = ('batch', 'batch', 'batch')  # always halve the batch",
        "answer = ('batch', 'process', 'segments')",
        "answer = ('segments', 'batch', 'process')  # 2 and 3 swapped",
        "answer = ('segments', 'process')  # two of three"],
}

_REST = "    err = (out - y).square().squeeze(-1)\n"
WRONG[4] = [
    "masked_loss_no_sync = masked_loss  # the mask index still syncs",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / keep.sum().item()  # .item() syncs",
    "def masked_loss_no_sync(out, y, keep):\n"
    "    return ((out - y).square().squeeze(-1) * keep).mean()  # all rows' mean",
    # host reads that reach no operator on a CPU
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / sum(keep.tolist())",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / int(keep.numpy().sum())",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / keep.cpu().sum()",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / len(keep.nonzero())",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    if torch.equal(keep, torch.ones_like(keep)):  # all kept: the plain mean\n"
    "        return err.mean()\n"
    "    return (err * keep).sum() / keep.sum()",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return err.repeat_interleave(keep.long()).mean()  # the kept rows, once",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return torch.masked_select(err, keep).mean()",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    if keep.any():  # a guard: Python needs the value\n"
    "        return (err * keep).sum() / keep.sum()\n"
    "    return err.sum() * 0",
    # right only at the test's first mask: its count written in
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / 45",
    # a factor off: the count of dropped rows
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / (~keep).sum()",
    # half the inputs: the mask ignored
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return err.sum() / keep.sum()",
]
WRONG[4] += [
    # copies back to the host that no CPU operator shows: .to("cpu"), numpy's functions
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / keep.to('cpu').sum()",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / keep.long().sum().to('cpu', non_blocking=True)",
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    import numpy as np\n"
    "    return (err * keep).sum() / np.count_nonzero(keep)",
    # bincount sizes its output by the largest value: a sync on a GPU
    "def masked_loss_no_sync(out, y, keep):\n" + _REST
    + "    return (err * keep).sum() / torch.bincount(keep.long(), minlength=2)[1]",
    # the (rows, 1) error times the (rows,) mask broadcasts to (rows, rows)
    "def masked_loss_no_sync(out, y, keep):\n"
    "    return ((out - y).square() * keep).sum() / keep.sum()",
]
WRONG[1] += [
    # a float returned: .item() reads the loss back every step
    _step().replace("return loss.detach()", "return loss.item()"),
    _step().replace("return loss.detach()", "return None"),
]
