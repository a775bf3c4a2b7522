// march (variants `rows`, V = 1, and `vec`, V = 16 bytes / sizeof(real)): a block of BX threads
// (a multiple of 32) covers BX groups of V adjacent columns and a band of BY rows. Each thread
// first loads the BY + 2 rows of its group that the band reads (one V-wide load per row: 16 bytes
// for `vec`; all loads issued before any is used, so many are in flight), then computes and stores
// its BY rows. West and east neighbours come from the adjacent lanes by warp shuffles; lanes 0 and 31
// also load the one column beyond their warp. Groups are aligned to column 1 (group g starts at
// column 1 + g*V), which the allocation aligns to 128 bytes, so vector accesses are aligned.
// Guards: groups that start past c1 load the group holding column c1 instead (valid memory, values
// unused; the allocation leaves >= 4 spare columns after column nx + 1); only points inside
// [r0, r1) x [c0, c1) are stored. A band cut short by r1 takes a plain loop (three loads a row).

template <typename T, int N> struct vec_of;
template <> struct vec_of<float, 1> { typedef float type; };
template <> struct vec_of<float, 2> { typedef float2 type; };
template <> struct vec_of<float, 4> { typedef float4 type; };
template <> struct vec_of<double, 1> { typedef double type; };
template <> struct vec_of<double, 2> { typedef double2 type; };
typedef vec_of<real, V>::type vec;

union pack {
    vec v;
    real e[V];
};

struct lane_ctx {
    int lane, j, c0, c1;
    bool full, east;
};

__device__ __forceinline__ vec ld(const real* a) { return *reinterpret_cast<const vec*>(a); }

__device__ __forceinline__ void emit(const pack& s, const pack& c, const pack& n, const real wl, const real el,
                                     real* q, const lane_ctx& x, const real wc, const real wx, const real wy)
{
    real w = __shfl_up_sync(0xffffffffu, c.e[V - 1], 1);
    real e = __shfl_down_sync(0xffffffffu, c.e[0], 1);
    if (x.lane == 0) w = wl;
    if (x.lane == 31) e = el;
    pack o;
#pragma unroll
    for (int m = 0; m < V; ++m) {
        const real wm = m == 0 ? w : c.e[m - 1];
        const real em = m == V - 1 ? e : c.e[m + 1];
        o.e[m] = update(c.e[m], wm, em, s.e[m], n.e[m], wc, wx, wy);
    }
    if (x.full) {
        *reinterpret_cast<vec*>(q) = o.v;
    } else {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (x.j + m >= x.c0 && x.j + m < x.c1) q[m] = o.e[m];
    }
}

__device__ __forceinline__ void band(const real* p, real* q, const idx pitch, const lane_ctx& x,
                                     const real wc, const real wx, const real wy)
{
    pack a[BY + 2];
    real wl[BY], el[BY];
#pragma unroll
    for (int k = 0; k < BY + 2; ++k) a[k].v = ld(p + (k - 1) * pitch);
#pragma unroll
    for (int k = 0; k < BY; ++k) {
        wl[k] = x.lane == 0 ? p[k * pitch - 1] : real(0);
        el[k] = x.east ? p[k * pitch + V] : real(0);
    }
#pragma unroll
    for (int k = 0; k < BY; ++k) emit(a[k], a[k + 1], a[k + 2], wl[k], el[k], q + k * pitch, x, wc, wx, wy);
}

__device__ __forceinline__ void short_band(const real* p, real* q, const idx pitch, const int rows,
                                           const lane_ctx& x, const real wc, const real wx, const real wy)
{
    for (int k = 0; k < rows; ++k) {
        pack s, c, n;
        s.v = ld(p + (k - 1) * pitch);
        c.v = ld(p + k * pitch);
        n.v = ld(p + (k + 1) * pitch);
        const real wl = x.lane == 0 ? p[k * pitch - 1] : real(0);
        const real el = x.east ? p[k * pitch + V] : real(0);
        emit(s, c, n, wl, el, q + k * pitch, x, wc, wx, wy);
    }
}

extern "C" __global__ void __launch_bounds__(BX)
march(real* __restrict__ out, const real* __restrict__ u, const idx pitch,
      const int r0, const int r1, const int c0, const int c1, const real wc, const real wx, const real wy)
{
    lane_ctx x;
    x.lane = threadIdx.x & 31;
    x.j = 1 + ((c0 - 1) / V + (int)(blockIdx.x * BX + threadIdx.x)) * V;
    x.c0 = c0;
    x.c1 = c1;
    x.full = x.j >= c0 && x.j + V <= c1;
    x.east = x.lane == 31 && x.j + V <= c1;
    const int jl = min(x.j, 1 + ((c1 - 1) / V) * V);
    const int tiles = (r1 - r0 + BY - 1) / BY;
    for (int t = blockIdx.y; t < tiles; t += gridDim.y) {
        const int i0 = r0 + t * BY;
        const int rows = min(BY, r1 - i0);
        const real* p = u + i0 * pitch + jl;
        real* q = out + i0 * pitch + x.j;
        if (rows == BY)
            band(p, q, pitch, x, wc, wx, wy);
        else
            short_band(p, q, pitch, rows, x, wc, wx, wy);
    }
}
