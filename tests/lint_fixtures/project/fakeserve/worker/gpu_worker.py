import gc

import torch

from fakeserve.utils.timing import Timer


class Worker:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.device = torch.device(f"cuda:{rank}")
        torch.cuda.set_device(self.device)

    def determine_available_memory(self) -> int:
        gc.collect()
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        peak = torch.cuda.max_memory_allocated()
        return free - peak

    def profile(self) -> float:
        with Timer() as timer:
            self.execute_model()
            torch.cuda.synchronize()  # patchscope: ignore[PS001]
        return timer.elapsed

    def execute_model(self) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError("no device")
