"""Where nn.DataParallel puts the model, and checkpoints from it (notebook 08's prose).

The hand-built DataParallel lives in notebook 08, whose own asserts check it against a
full-batch step and against the real `nn.DataParallel` on two or more GPUs.
"""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from helpers import num_gpus
from helpers.models import MLP


@pytest.mark.skipif(num_gpus() > 0, reason="checks the no-GPU pass-through")
def test_data_parallel_without_a_gpu_is_a_pass_through():
    model = MLP()
    wrapped = nn.DataParallel(model)
    assert wrapped.device_ids == [] and wrapped.module is model
    assert next(model.parameters()).device.type == "cpu"


@pytest.mark.skipif(num_gpus() != 1, reason="needs exactly one GPU")
def test_data_parallel_on_one_gpu_moves_the_model_when_built():
    wrapped = nn.DataParallel(MLP())
    assert next(wrapped.module.parameters()).device == torch.device("cuda", 0)


@pytest.mark.skipif(num_gpus() < 1, reason="needs a GPU to save CUDA tensors")
def test_map_location_loads_a_gpu_checkpoint_on_the_cpu():
    buffer = io.BytesIO()
    torch.save(MLP().to("cuda").state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location="cpu", weights_only=True)
    assert {t.device.type for t in state.values()} == {"cpu"}
    MLP().load_state_dict(state)
