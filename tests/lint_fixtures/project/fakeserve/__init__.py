"""fakeserve: a stand-in for an inference engine.

Shared code must not call torch.cuda.synchronize() or torch.cuda.Event()
directly; go through the platform layer instead.
"""

__version__ = "0.0.0"
