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

// Physics as data (solver/core/physics.py: Weights' fields, their forms and term order), compiled in by defines, so
// that a plain case compiles exactly the code above: SRC 1 adds a source term q (last; in the Jacobi form, to the
// neighbours' weighted sum before the division); FORM 0 keeps the constant weights wc, wx, wy, FORM 1 is the flux
// form (face coefficients ax on east faces, ay on north faces; the centre weighted by wc), FORM 2 the Jacobi form
// (faces, and sigma, the diagonal's constant part). CAP (flux form, materials of different heat capacity): bit 1
// multiplies the fluxes by a field m (1 / c), bit 2 weights the centre by a field cw instead of wc; in the Jacobi
// form bit 2 reads the diagonal's part beside the faces as a field (Weights.sg: shapes' held points and rims) from
// the same pointer instead of sigma. The fields share
// u's pitch and alignment (CupyBackend.coefficient allocates them as u). A kernel with data takes DATA_PARAMS after
// its weights: q, ax, ay, m, cw (null where not read) and sigma.
#ifndef SRC
#define SRC 0
#endif
#ifndef FORM
#define FORM 0
#endif
#ifndef CAP
#define CAP 0
#endif
#define HAS_DATA (SRC || FORM)
#if HAS_DATA
#define DATA_PARAMS , const real* __restrict__ q, const real* __restrict__ ax, const real* __restrict__ ay, \
    const real* __restrict__ cap_m, const real* __restrict__ cap_w, const real sigma

// A point's data: its source f, its west (ax[i, j-1]), east (ax[i, j]), south (ay[i-1, j]) and north (ay[i, j]) faces,
// its capacity's multiplier m and centre weight cw (CAP).
struct pdata {
    real f, aw, ae, as_, an, m, cw;
};

// The data of point k (an index into fields of one pitch); what the defines do not read stays zero.
__device__ __forceinline__ pdata data_at(const idx k, const idx pitch, const real* __restrict__ q,
                                         const real* __restrict__ ax, const real* __restrict__ ay,
                                         const real* __restrict__ m, const real* __restrict__ cw)
{
    pdata d = {real(0), real(0), real(0), real(0), real(0), real(0), real(0)};
#if SRC
    d.f = q[k];
#endif
#if FORM
    d.aw = ax[k - 1];
    d.ae = ax[k];
    d.as_ = ay[k - pitch];
    d.an = ay[k];
#endif
#if CAP & 1
    d.m = m[k];
#endif
#if CAP & 2
    d.cw = cw[k];
#endif
    return d;
}

// One point's update with its data, in solver/core/physics.py's term order (mg_ops.vsmooth with om = 1 for FORM 2).
__device__ __forceinline__ real update_data(const real c, const real w, const real e, const real s, const real n,
                                            const real wc, const real wx, const real wy, const pdata& d, const real sigma)
{
#if FORM == 2
    real v = (d.aw * w + d.ae * e) + (d.as_ * s + d.an * n);
#if SRC
    v = v + d.f;
#endif
#if CAP & 2
    return wc * c + v / (d.cw + ((d.aw + d.ae) + (d.as_ + d.an)));
#else
    return wc * c + v / (sigma + ((d.aw + d.ae) + (d.as_ + d.an)));
#endif
#else
#if FORM == 1
#if CAP & 1
    const real f = d.m * ((d.ae * (e - c) - d.aw * (c - w)) + (d.an * (n - c) - d.as_ * (c - s)));
#else
    const real f = (d.ae * (e - c) - d.aw * (c - w)) + (d.an * (n - c) - d.as_ * (c - s));
#endif
#if CAP & 2
    const real v = d.cw * c + f;
#else
    const real v = wc * c + f;
#endif
#else
    const real v = update(c, w, e, s, n, wc, wx, wy);
#endif
#if SRC
    return v + d.f;
#else
    return v;
#endif
#endif
}
#else
#define DATA_PARAMS
#endif
