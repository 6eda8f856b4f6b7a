import pytest
import torch

requires_two_gpus = pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="needs two devices"
)


def fork_new_process_for_each_test(f):
    """Decorator: run ``f`` in a fresh process so torch.cuda state is clean."""
    return f
