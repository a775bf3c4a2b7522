"""The compute ceiling: the floating-point rate a core (or a GPU) reaches with no memory traffic at all,
measured, for the roofline's compute roofs (solver.results.report) and the record's "of peak".

Kernel: CHAINS independent chains of x = x * b + c held in registers, run for many iterations; the
chains hide the instructions' latency, so the rate is the floating-point units' throughput. Two kinds:
- `fma`: each x * b + c one fused multiply-add (2 flops), the usual peak;
- `mul_add`: a multiply, then an add (2 flops in two instructions): the stencil's own kind of
  arithmetic, as it is compiled without FMA contraction (--fmad=false on the GPU, no fastmath in
  numba) so that every backend rounds alike. Its roof is the one the stencil could touch.
CPU: the loop is LLVM IR built here for the widest vector the host has (AVX-512: 8 doubles; AVX2: 4)
and compiled by llvmlite (numba's own compiler) for this CPU; it is called through ctypes, which
releases the GIL, from one Python thread per worker thread of the backend (started once; they meet at a
barrier before and after each call). GPU: the same loop as a
CuPy RawKernel, compiled with --fmad=true or false, on enough blocks to fill every SM.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

KINDS = ("fma", "mul_add")
CHAINS = 24  # independent chains per thread (CPU: vectors in registers; AVX-512 has 32)
CPU_ITERATIONS = 1_000_000  # per call and thread: 24 vector chains, about 5 ms at 3 GHz
GPU_ITERATIONS = 4096
GPU_CHAINS = 8
GPU_THREADS = 256
_COMPILED: dict = {}  # (dtype, kind, width) -> (engine, ctypes function)


def flops_per_call(kind: str, width: int, chains: int, iterations: int) -> int:
    """Both kinds do one multiply and one add per element per iteration."""
    assert kind in KINDS
    return 2 * width * chains * iterations


# CPU ------------------------------------------------------------------------------------------

def vector_width(dtype: str) -> int:
    """Elements per vector register of this CPU (AVX-512, AVX2/AVX, else SSE)."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    bits = 512 if features.get("avx512f") else 256 if features.get("avx") else 128
    return bits // (8 * np.dtype(dtype).itemsize)


def loop_ir(dtype: str, kind: str, width: int, chains: int = CHAINS) -> str:
    """LLVM IR of `peak(i64 n, T b, T c) -> T`: `chains` vector chains of x = x*b + c for n iterations."""
    ty = {"float64": "double", "float32": "float"}[dtype]
    v, suffix = f"<{width} x {ty}>", f"v{width}{'f64' if ty == 'double' else 'f32'}"
    splat = [line for n in "bc" for line in (f"  %{n}0 = insertelement {v} undef, {ty} %{n}, i32 0",
             f"  %{n}v = shufflevector {v} %{n}0, {v} undef, <{width} x i32> zeroinitializer")]
    lines = [f"declare {v} @llvm.fma.{suffix}({v}, {v}, {v})", ""] if kind == "fma" else []
    lines += [f"define {ty} @peak(i64 %n, {ty} %b, {ty} %c) {{", "entry:", *splat, "  br label %loop", "loop:",
             "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    lines += [f"  %x{j} = phi {v} [{start(ty, width, j)}, %entry], [%y{j}, %loop]" for j in range(chains)]
    for j in range(chains):
        if kind == "fma":
            lines.append(f"  %y{j} = call {v} @llvm.fma.{suffix}({v} %x{j}, {v} %bv, {v} %cv)")
        else:
            lines += [f"  %m{j} = fmul {v} %x{j}, %bv", f"  %y{j} = fadd {v} %m{j}, %cv"]
    lines += ["  %i1 = add i64 %i, 1", "  %done = icmp sge i64 %i1, %n", "  br i1 %done, label %exit, label %loop",
              "exit:"]
    acc = "%y0"
    for j in range(1, chains):  # the chains' sum is returned, so none of them is dead code
        lines.append(f"  %s{j} = fadd {v} {acc}, %y{j}")
        acc = f"%s{j}"
    lines += [f"  %r = extractelement {v} {acc}, i32 0", f"  ret {ty} %r", "}"]
    return "\n".join(lines)


def start(ty: str, width: int, j: int) -> str:
    """Chain j's first value, (j + 1) / 1024 in every lane: distinct chains, so none can be merged."""
    return "<" + ", ".join([f"{ty} {(j + 1) / 1024!r}"] * width) + ">"


def cpu_function(dtype: str, kind: str):
    """The compiled loop for this CPU, as a ctypes function (compiled once per process)."""
    width = vector_width(dtype)
    key = (dtype, kind, width)
    if key not in _COMPILED:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
        module = llvm.parse_assembly(loop_ir(dtype, kind, width))
        module.verify()
        engine = llvm.create_mcjit_compiler(module, tm)
        engine.finalize_object()
        ct = ctypes.c_double if dtype == "float64" else ctypes.c_float
        fn = ctypes.CFUNCTYPE(ct, ctypes.c_int64, ct, ct)(engine.get_function_address("peak"))
        _COMPILED[key] = (engine, fn, width)  # the engine owns the code: keep it alive
    return _COMPILED[key][1:]


class CpuPeak:
    """One call = every worker thread runs the loop once, at the same time (threads: the backend's). The
    threads are started once and meet at two barriers per call, so no thread start is timed."""

    def __init__(self, dtype: str, kind: str, threads: int, iterations: int = CPU_ITERATIONS):
        self.fn, width = cpu_function(dtype, kind)
        self.threads, self.iterations = threads, iterations
        self.flops = threads * flops_per_call(kind, width, CHAINS, iterations)
        self.b, self.c = 0.999999, 1e-7  # |b| < 1: the chains converge to c / (1 - b), no overflow
        self.go, self.done = threading.Barrier(threads), threading.Barrier(threads)
        self.closing = False
        self.workers = [threading.Thread(target=self._work, daemon=True) for _ in range(threads - 1)]
        for w in self.workers:
            w.start()

    def _work(self) -> None:
        while True:
            self.go.wait()
            if self.closing:
                return
            self.fn(self.iterations, self.b, self.c)
            self.done.wait()

    def __call__(self) -> None:
        self.go.wait()
        self.fn(self.iterations, self.b, self.c)
        self.done.wait()

    def synchronize(self) -> None:
        pass

    def close(self) -> None:
        self.closing = True
        self.go.wait()
        for w in self.workers:
            w.join()


# GPU ------------------------------------------------------------------------------------------

GPU_SOURCE = r"""
extern "C" __global__ void peak(real* out, const int n, const real b, const real c)
{
    real x[CHAINS];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) x[j] = (real)(threadIdx.x + j + 1) / (real)1024;  /* distinct chains */
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) x[j] = x[j] * b + c;
    }
    real s = 0;
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) s += x[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;  /* one store per thread: keeps the chains live */
}
"""


class GpuPeak:
    """One call = one launch of the loop on enough blocks to fill every SM several times."""

    def __init__(self, backend, dtype: str, kind: str, iterations: int = GPU_ITERATIONS):
        cp = backend.cp
        real = "double" if dtype == "float64" else "float"
        module = cp.RawModule(code=GPU_SOURCE, options=(f"-Dreal={real}", f"-DCHAINS={GPU_CHAINS}",
                                                        f"--fmad={'true' if kind == 'fma' else 'false'}"))
        self.kernel, self.cp = module.get_function("peak"), cp
        sms = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())["multiProcessorCount"]
        self.blocks, self.iterations = sms * 16, iterations
        self.t = np.float64 if dtype == "float64" else np.float32
        self.out = cp.zeros(self.blocks * GPU_THREADS, dtype=self.t)
        self.stream = backend.main
        self.flops = self.blocks * GPU_THREADS * flops_per_call(kind, 1, GPU_CHAINS, iterations)

    def __call__(self) -> None:
        self.kernel((self.blocks,), (GPU_THREADS,), (self.out, np.int32(self.iterations), self.t(0.999999),
                                                      self.t(1e-7)), stream=self.stream)

    def synchronize(self) -> None:
        self.stream.synchronize()


def measure(backend, comm, dtype: str, kind: str, repeats: int = 5) -> dict:
    """GFLOP/s of every rank's loop run at once (collective): {'gflops', 'per_rank_gflops', 'spread_gflops', ...}."""
    from .stream import concurrent_rate

    p = GpuPeak(backend, dtype, kind) if backend.on_gpu else CpuPeak(dtype, kind, backend.threads)
    try:
        r = concurrent_rate(comm, p, p.synchronize, p.flops, repeats)  # "bytes" are flops here
    finally:
        getattr(p, "close", lambda: None)()
    return {"gflops": r["gbs"], "per_rank_gflops": r["per_rank_gbs"], "spread_gflops": r["spread_gbs"],
            "seconds": r["seconds"], "inner": r["inner"], "repeats": repeats,
            "method": f"{CHAINS if not backend.on_gpu else GPU_CHAINS} register chains of x = x*b + c per thread"}
