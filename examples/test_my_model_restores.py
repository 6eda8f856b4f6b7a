"""Property-based test of a user's own decorated model class.

``Model`` hard-codes ``backend.Event`` (think ``torch.cuda.Event``) and is
decorated so that, while its ``__init__`` runs, that name gives a host event
instead. ``check_restores`` constructs models and runs the redirect on its
own too, nested, out of order, in two threads and with exceptions raised
inside, and checks after every schedule that ``backend`` is exactly as it was.

Run it with ``pytest examples/test_my_model_restores.py`` or as a script.
"""

import types

import patchscope
from patchscope.testing import check_restores

# Stands in for a library module the model's code reaches into.
backend = types.ModuleType("backend")


class CudaEvent:
    def __init__(self) -> None:
        raise RuntimeError("no CUDA device here")


class HostEvent:
    pass


backend.Event = CudaEvent

host_events = patchscope.redirect_attr(backend, "Event", HostEvent, scope="context")


@host_events
class Model:
    def __init__(self) -> None:
        self.event = backend.Event()


def test_model_construction_restores_the_backend() -> None:
    """Constructing models while the redirect is used every other way leaves backend as it was."""

    def build() -> None:
        assert isinstance(Model().event, HostEvent)

    check_restores(lambda: [host_events, build], watch=[backend], threads=2, max_examples=50)
    assert backend.Event is CudaEvent


if __name__ == "__main__":
    test_model_construction_restores_the_backend()
    print("check_restores passed: backend restored after every schedule")
