"""CuPy backend placeholder: registered so `stencil backends` can say why it is unavailable."""

from __future__ import annotations

from . import Backend, register


@register
class CupyBackend(Backend):
    name = "cupy"
    summary = "CuPy RawKernels on one NVIDIA GPU"
    on_gpu = True

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import cupy
        except ImportError:
            return "cupy is not installed; install it with `pip install -e .[gpu]` (cupy-cuda12x) on a machine with an NVIDIA GPU"
        try:
            n = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # noqa: BLE001 - any CUDA failure means no usable GPU
            return f"no usable CUDA GPU ({str(exc).splitlines()[0]})"
        return None if n > 0 else "no CUDA GPU found"
