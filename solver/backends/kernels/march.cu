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
// With data (common.cu: SRC, FORM), a band also loads, one V-wide load a row each, its rows of the source, of the
// east faces (the west face of a group's first column: the lane to the west's last east face by shuffle, lane 0
// loads it) and of the north faces, plus the north faces of the row above (the first row's south faces): the data
// fields share u's pitch and alignment, so these accesses are aligned as u's are.

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

#if HAS_DATA
// The data fields at a band's first point (u's offset), and the diagonal's constant part.
struct data_ptrs {
    const real* q;
    const real* ax;
    const real* ay;
    const real* m;
    const real* cw;
    real sigma;
};

// One row's data of a lane's group: source, east faces, south and north faces, and (lane 0) the west face of its
// first column.
struct row_data {
    pack f, ae, as_, an, m, cw;
    real aw0;
};

__device__ __forceinline__ void load_data(row_data& d, const data_ptrs& p, const idx at, const idx pitch, const lane_ctx& x)
{
#if SRC
    d.f.v = ld(p.q + at);
#endif
#if FORM
    d.ae.v = ld(p.ax + at);
    d.as_.v = ld(p.ay + at - pitch);
    d.an.v = ld(p.ay + at);
    d.aw0 = x.lane == 0 ? p.ax[at - 1] : real(0);
#endif
#if CAP & 1
    d.m.v = ld(p.m + at);
#endif
#if CAP & 2
    d.cw.v = ld(p.cw + at);
#endif
}
#endif

#if HAS_DATA
#define EMIT_DATA , const row_data& d, const real sigma
#else
#define EMIT_DATA
#endif

__device__ __forceinline__ void emit(const pack& s, const pack& c, const pack& n, const real wl, const real el,
                                     real* q, const lane_ctx& x, const real wc, const real wx, const real wy EMIT_DATA)
{
    real w = __shfl_up_sync(0xffffffffu, c.e[V - 1], 1);
    real e = __shfl_down_sync(0xffffffffu, c.e[0], 1);
    if (x.lane == 0) w = wl;
    if (x.lane == 31) e = el;
#if FORM
    real aw0 = __shfl_up_sync(0xffffffffu, d.ae.e[V - 1], 1);
    if (x.lane == 0) aw0 = d.aw0;
#endif
    pack o;
#pragma unroll
    for (int m = 0; m < V; ++m) {
        const real wm = m == 0 ? w : c.e[m - 1];
        const real em = m == V - 1 ? e : c.e[m + 1];
#if HAS_DATA
        pdata pd = {real(0), real(0), real(0), real(0), real(0), real(0), real(0)};
#if SRC
        pd.f = d.f.e[m];
#endif
#if CAP & 1
        pd.m = d.m.e[m];
#endif
#if CAP & 2
        pd.cw = d.cw.e[m];
#endif
#if FORM
        pd.aw = m == 0 ? aw0 : d.ae.e[m - 1];
        pd.ae = d.ae.e[m];
        pd.as_ = d.as_.e[m];
        pd.an = d.an.e[m];
#endif
        o.e[m] = update_data(c.e[m], wm, em, s.e[m], n.e[m], wc, wx, wy, pd, sigma);
#else
        o.e[m] = update(c.e[m], wm, em, s.e[m], n.e[m], wc, wx, wy);
#endif
    }
    if (x.full) {
        *reinterpret_cast<vec*>(q) = o.v;
    } else {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (x.j + m >= x.c0 && x.j + m < x.c1) q[m] = o.e[m];
    }
}

#if HAS_DATA
#define BAND_DATA , const data_ptrs& dp, const idx at
#define ROW_DATA(k) , d[k], dp.sigma
#else
#define BAND_DATA
#define ROW_DATA(k)
#endif

// A band of BY rows from p (u at the band's first point; `at`: that point's offset, for the data fields).
__device__ __forceinline__ void band(const real* p, real* q, const idx pitch, const lane_ctx& x,
                                     const real wc, const real wx, const real wy BAND_DATA)
{
    pack a[BY + 2];
    real wl[BY], el[BY];
#pragma unroll
    for (int k = 0; k < BY + 2; ++k) a[k].v = ld(p + (k - 1) * pitch);
#if HAS_DATA
    row_data d[BY];
#pragma unroll
    for (int k = 0; k < BY; ++k) load_data(d[k], dp, at + k * pitch, pitch, x);
#endif
#pragma unroll
    for (int k = 0; k < BY; ++k) {
        wl[k] = x.lane == 0 ? p[k * pitch - 1] : real(0);
        el[k] = x.east ? p[k * pitch + V] : real(0);
    }
#pragma unroll
    for (int k = 0; k < BY; ++k) emit(a[k], a[k + 1], a[k + 2], wl[k], el[k], q + k * pitch, x, wc, wx, wy ROW_DATA(k));
}

__device__ __forceinline__ void short_band(const real* p, real* q, const idx pitch, const int rows,
                                           const lane_ctx& x, const real wc, const real wx, const real wy BAND_DATA)
{
    for (int k = 0; k < rows; ++k) {
        pack s, c, n;
        s.v = ld(p + (k - 1) * pitch);
        c.v = ld(p + k * pitch);
        n.v = ld(p + (k + 1) * pitch);
        const real wl = x.lane == 0 ? p[k * pitch - 1] : real(0);
        const real el = x.east ? p[k * pitch + V] : real(0);
#if HAS_DATA
        row_data d[1];
        load_data(d[0], dp, at + k * pitch, pitch, x);
#endif
        emit(s, c, n, wl, el, q + k * pitch, x, wc, wx, wy ROW_DATA(0));
    }
}

extern "C" __global__ void __launch_bounds__(BX)
march(real* __restrict__ out, const real* __restrict__ u, const idx pitch,
      const int r0, const int r1, const int c0, const int c1, const real wc, const real wx, const real wy DATA_PARAMS)
{
#if HAS_DATA
    const data_ptrs dp = {q, ax, ay, cap_m, cap_w, sigma};
#define CALL_DATA , dp, i0 * pitch + jl
#else
#define CALL_DATA
#endif
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
        real* o = out + i0 * pitch + x.j;
        if (rows == BY)
            band(p, o, pitch, x, wc, wx, wy CALL_DATA);
        else
            short_band(p, o, pitch, rows, x, wc, wx, wy CALL_DATA);
    }
}
