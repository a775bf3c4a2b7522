// Shared by every stencil kernel (solver/backends/cupy_kernels.py prepends this file to each variant).
//
// Defines injected at compile time: REAL (float | double), BX, BY (block shape), V (columns per thread).
// Layout: `u` and `out` point at element (0, 0) of a padded (ny + 2) x (nx + 2) field whose rows lie
// `pitch` elements apart (solver/core/decomp.py documents the index convention); a region is the local
// index range [r0, r1) x [c0, c1). The allocation (solver/backends/cupy_backend.py) aligns column 1
// of every row to 128 bytes and leaves at least 4 spare columns after column nx + 1.
//
// The update and its term order are those of solver/core/physics.py. Modules are compiled with
// --fmad=false, so no multiply-add is contracted and each point is rounded exactly as numpy rounds it.

typedef REAL real;
typedef long long idx;

__device__ __forceinline__ real update(real c, real w, real e, real s, real n, real wc, real wx, real wy)
{
    return wc * c + wx * (w + e) + wy * (s + n);
}

// Largest |a - b| (the convergence / NaN check): NaN counts as +inf; the result goes to memory as the
// bits of a non-negative float, which order like unsigned integers, so atomicMax combines blocks.
constexpr unsigned FULL = 0xffffffffu;
template <typename T> struct bits_of;
template <> struct bits_of<float> { typedef unsigned int type; };
template <> struct bits_of<double> { typedef unsigned long long type; };
typedef bits_of<real>::type rbits;

__device__ __forceinline__ float inf_of(float) { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double inf_of(double) { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ rbits as_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ rbits as_bits(double x) { return (rbits)__double_as_longlong(x); }

__device__ __forceinline__ real max_abs_diff(const real m, const real a, const real b)
{
    real d = a > b ? a - b : b - a;
    if (d != d) d = inf_of(d);
    return d > m ? d : m;
}

// Every lane of the warp must call this; lane 0 folds the warp's largest value into *to.
__device__ __forceinline__ void warp_max_to(rbits* to, real m)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        const real other = __shfl_xor_sync(FULL, m, d);
        if (other > m) m = other;
    }
    if ((threadIdx.x & 31) == 0 && m > real(0)) atomicMax(to, as_bits(m));
}

// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80 and later), in groups:
// copy_async16 queues one (zeros instead where !ok), copy_async_commit closes a group, and
// copy_async_wait<N> waits until at most N of this thread's groups are pending. Without a GPU
// (tests/cuda_emu) the copy happens at once.
template <typename T>
__device__ __forceinline__ void copy_async16(T* dst, const void* src, const bool ok)
{
#ifdef __CUDA_ARCH__
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(ok ? 16 : 0) : "memory");
#else
    if (ok) memcpy(dst, src, 16);
    else memset(dst, 0, 16);
#endif
}

__device__ __forceinline__ void copy_async_commit()
{
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void copy_async_wait()
{
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
