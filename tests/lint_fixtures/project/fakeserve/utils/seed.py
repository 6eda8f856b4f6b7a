import random

import numpy as np
import torch


def set_random_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    t = torch
    t.manual_seed(seed)
    if t.cuda.is_available():
        t.cuda.manual_seed_all(seed)


def seeded(seed: int, torch=None):
    # A parameter named torch is not the torch module.
    torch.cuda.manual_seed(seed)
