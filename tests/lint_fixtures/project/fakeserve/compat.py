try:
    import torch
except ImportError:  # CPU-only tooling may run without torch
    torch = None


def empty_cache() -> None:
    if torch is not None:
        torch.cuda.empty_cache()


def device_count() -> int:
    return 0 if torch is None else torch.cuda.device_count()
