// wave (variants `wave`, V = 16 bytes / sizeof(real) columns per thread, `wave2`, twice that, and
// `wave2a`, `wave2` with rows streamed in ahead by asynchronous copies, PF rows deep):
// K steps per launch (time tiling), bitwise equal to K single steps.
//
// Scheme: each warp owns a strip of 32 * V columns and a segment of `rows` output rows (a launch
// argument: the launcher fits it to the grid, cupy_kernels.default_block); it streams down
// the segment one input row per iteration and keeps, for each level L = 0 .. K-1, the last two rows
// of that level in registers. On input row i, level L (1 <= L <= K) computes its row i - L from level
// L-1's rows i-L-1, i-L and i-L+1 (a wavefront skewed by one row per level), so every level advances
// by one row per iteration and no row is recomputed in y except a K-row apron at each end of the
// segment. West and east neighbours come from the adjacent lanes by warp shuffles; the strip's two
// outer lanes have no neighbour across the warp, so their values go wrong by one column per level:
// the strip recomputes an apron of A = ceil(K / V) lanes at each side (overlapped tiling) and stores
// only lanes A .. 31 - A (WOUT columns). Warps are independent: no shared memory, no barrier.
//
// Regions: points of C = [r0, r1) x [c0, c1) are updated at every level; every other point keeps its
// value (at level L it is the level-0 value: the Dirichlet ghost layer, or anything else outside C);
// points of O = [o0, o1) x [p0, p1) (inside C) are stored. With O = C = the owned block this is K
// steps of `step(region)`. With C = the owned block grown by a ghost depth of K (rows and/or columns
// received from neighbours) and O = the owned block, it is one exchange of K-deep halos every K steps:
// the tile reads rows o0-K .. o1+K-1 and columns p0-K .. p1+K-1 (clipped to C's one-cell ring), so
// those must hold valid data. Only C's one-cell ring is ever read outside C; vectors lying wholly
// beyond it are not loaded (zeros are used instead).
// Warps whose strip and segment keep at least K rows/columns inside C take a path with no guards;
// those at C's edges select per point (in C: updated; outside: kept).
// Prefetch (PF > 0, `wave2a`): row i + PF is copied into a per-warp ring of PF + 1 rows in shared
// memory (cp.async, 16 bytes a lane and vector, zero-filled where the edge path loads nothing) while
// row i is computed, so the load's latency is hidden behind PF rows of arithmetic instead of stalling
// each row; every lane reads back only what it copied itself, so no barrier is needed.
// Residual: with `resid` non-null, the largest |level K - level K-1| over O (NaN -> +inf) is
// atomically maxed into *resid as an integer bit pattern (non-negative floats order like integers):
// the convergence / NaN check of the last step, without storing level K-1.
// Data (common.cu: SRC, FORM; the plain case compiles none of this): level L's row j = i - L reads row j's source
// and faces (east faces of its columns, the west face of a lane's first column by shuffle from the lane to the
// west, the north faces of rows j - 1 and j) straight from global memory at every level: level 1 brings each
// data row into the caches and levels 2 .. K find it there (16-byte loads, guarded as u's on the edge path),
// so the data add about one read of each field per launch to DRAM traffic, not one per step. The data row is
// clamped into C's rows: rows outside C are kept (edge path) or never reach a stored point (the garbage rows a
// segment computes before its levels fill), and the clamp keeps every read inside the fields. DPF > 0: each
// iteration also asks L2 to prefetch the data rows level 1 will read DPF iterations later.

constexpr int VW = 16 / (int)sizeof(real);  // elements per 16-byte vector
constexpr int NV = V / VW;                  // 16-byte vectors per thread and row
static_assert(V % VW == 0, "V must be a multiple of the 16-byte vector width");
constexpr int A = (K + V - 1) / V;  // apron lanes at each side of the strip
static_assert(K >= 1 && 2 * A < 32, "K too deep for this V: the apron would fill the warp");
constexpr int WOUT = (32 - 2 * A) * V;  // columns a strip stores
#ifndef PF
#define PF 0
#endif
#ifndef DPF
#define DPF 0
#endif
constexpr int SLOTS = PF + 1;  // rows in a warp's prefetch ring

template <typename T> struct vec16;
template <> struct vec16<float> { typedef float4 type; };
template <> struct vec16<double> { typedef double2 type; };
typedef vec16<real>::type vec;

union row_t {
    vec v[NV];
    real e[V];
};


struct wave_ctx {
    const real* u;
    real* out;
    idx pitch;
    int r0, r1;      // C rows
    int y0;          // first output row of this segment (rows y0 .. y1-1 are stored)
    int e;           // end of the input rows read (exclusive)
    int x;           // first column of this lane
    bool full;       // all V columns of this lane are stored
    bool st[V];      // column x + m is stored (lane inside the apron and column in [p0, p1))
    bool in[V];      // column x + m lies in C (edge path)
    bool ld[NV];     // vector q lies on C's ring or inside (edge path)
    real wc, wx, wy;
    vec* ring;       // this warp's prefetch ring (PF > 0): SLOTS rows of NV vectors per lane
    int rd, wr;      // ring slots of the row read next and of the row copied next
#if HAS_DATA
    const real* q;   // the data fields (u's pitch and alignment) and the diagonal's constant part
    const real* ax;
    const real* ay;
    const real* m;
    const real* cw;
    real sigma;
#endif
};

// The ring's vector q of slot `slot` for this lane: lanes adjacent within a vector (no bank conflict).
__device__ __forceinline__ vec* ring_at(const wave_ctx& c, const int slot, const int q)
{
    return c.ring + (slot * NV + q) * 32 + (threadIdx.x & 31);
}

// Copy row i into the ring slot c.wr (zeros where nothing is loaded), as one group of async copies.
template <bool EDGE>
__device__ __forceinline__ void fetch_row(const int i, wave_ctx& c)
{
    const real* p = c.u + (idx)i * c.pitch + c.x;
#pragma unroll
    for (int q = 0; q < NV; ++q) {
        const bool ok = i < c.e && (!EDGE || c.ld[q]);
        copy_async16(ring_at(c, c.wr, q), ok ? p + q * VW : c.u, ok);
    }
    copy_async_commit();
    c.wr = c.wr + 1 == SLOTS ? 0 : c.wr + 1;
}

// Row i from the ring (its copy group is complete once at most PF younger groups are pending).
__device__ __forceinline__ void ring_row(real (&n)[V], wave_ctx& c)
{
    copy_async_wait<PF>();
    row_t r;
#pragma unroll
    for (int q = 0; q < NV; ++q) r.v[q] = *ring_at(c, c.rd, q);
#pragma unroll
    for (int m = 0; m < V; ++m) n[m] = r.e[m];
    c.rd = c.rd + 1 == SLOTS ? 0 : c.rd + 1;
}

template <bool EDGE>
__device__ __forceinline__ void load_row(real (&n)[V], const int i, const wave_ctx& c)
{
    const real* p = c.u + (idx)i * c.pitch + c.x;
    row_t r;
#pragma unroll
    for (int q = 0; q < NV; ++q) {
        if (!EDGE || c.ld[q]) {
            r.v[q] = reinterpret_cast<const vec*>(p)[q];
        } else {
#pragma unroll
            for (int m = 0; m < VW; ++m) r.e[q * VW + m] = real(0);
        }
    }
#pragma unroll
    for (int m = 0; m < V; ++m) n[m] = r.e[m];
}

#if HAS_DATA
// One data row's values at this lane's columns from `base` + at (zeros where the edge path loads nothing).
template <bool EDGE>
__device__ __forceinline__ void load_data(real (&n)[V], const real* base, const idx at, const wave_ctx& c)
{
    const real* p = base + at;
    row_t r;
#pragma unroll
    for (int q = 0; q < NV; ++q) {
        if (!EDGE || c.ld[q]) {
            r.v[q] = reinterpret_cast<const vec*>(p)[q];
        } else {
#pragma unroll
            for (int m = 0; m < VW; ++m) r.e[q * VW + m] = real(0);
        }
    }
#pragma unroll
    for (int m = 0; m < V; ++m) n[m] = r.e[m];
}

// Row j's data at this lane's columns: source, east faces, south faces (row j - 1's north) and north faces.
struct row_data {
    real f[V], ae[V], as_[V], an[V], m[V], cw[V];
};

template <bool EDGE>
__device__ __forceinline__ void data_row(row_data& d, const int j, const wave_ctx& c)
{
    const idx at = (idx)min(max(j, c.r0), c.r1 - 1) * c.pitch + c.x;
#if SRC
    load_data<EDGE>(d.f, c.q, at, c);
#endif
#if FORM
    load_data<EDGE>(d.ae, c.ax, at, c);
    load_data<EDGE>(d.as_, c.ay, at - c.pitch, c);
    load_data<EDGE>(d.an, c.ay, at, c);
#endif
#if CAP & 1
    load_data<EDGE>(d.m, c.m, at, c);
#endif
#if CAP & 2
    load_data<EDGE>(d.cw, c.cw, at, c);
#endif
}

// L2 prefetch of the data rows at row j (DPF > 0; nothing without a GPU).
__device__ __forceinline__ void prefetch_data(const int j, const wave_ctx& c)
{
#ifdef __CUDA_ARCH__
    const idx at = (idx)min(max(j, c.r0), c.r1 - 1) * c.pitch + c.x;
#if SRC
    asm volatile("prefetch.global.L2 [%0];" ::"l"(c.q + at));
#endif
#if FORM
    asm volatile("prefetch.global.L2 [%0];" ::"l"(c.ax + at));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(c.ay + at));
#endif
#if CAP & 1
    asm volatile("prefetch.global.L2 [%0];" ::"l"(c.m + at));
#endif
#if CAP & 2
    asm volatile("prefetch.global.L2 [%0];" ::"l"(c.cw + at));
#endif
#endif
}
#define LEVEL_DATA , const row_data& d
#else
#define LEVEL_DATA
#endif

// One level of one row: o = update of the centre row c with rows s (above) and n (below) (and the row's data).
__device__ __forceinline__ void level(real (&o)[V], const real (&s)[V], const real (&c)[V], const real (&n)[V],
                                      const wave_ctx& x LEVEL_DATA)
{
    const real w0 = __shfl_up_sync(FULL, c[V - 1], 1);
    const real e0 = __shfl_down_sync(FULL, c[0], 1);
#if FORM
    const real aw0 = __shfl_up_sync(FULL, d.ae[V - 1], 1);  // lane 0's is wrong: it lies in the apron, as its w0
#endif
#pragma unroll
    for (int m = 0; m < V; ++m) {
        const real wm = m == 0 ? w0 : c[m - 1];
        const real em = m == V - 1 ? e0 : c[m + 1];
#if HAS_DATA
        pdata pd = {real(0), real(0), real(0), real(0), real(0), real(0), real(0)};
#if SRC
        pd.f = d.f[m];
#endif
#if CAP & 1
        pd.m = d.m[m];
#endif
#if CAP & 2
        pd.cw = d.cw[m];
#endif
#if FORM
        pd.aw = m == 0 ? aw0 : d.ae[m - 1];
        pd.ae = d.ae[m];
        pd.as_ = d.as_[m];
        pd.an = d.an[m];
#endif
        o[m] = update_data(c[m], wm, em, s[m], n[m], x.wc, x.wx, x.wy, pd, x.sigma);
#else
        o[m] = update(c[m], wm, em, s[m], n[m], x.wc, x.wx, x.wy);
#endif
    }
}

template <bool RES>
__device__ __forceinline__ void store_row(const real (&o)[V], const real (&prev)[V], const int j, const wave_ctx& c,
                                          real& rmax)
{
    real* q = c.out + (idx)j * c.pitch + c.x;
    if (c.full) {
        row_t r;
#pragma unroll
        for (int m = 0; m < V; ++m) r.e[m] = o[m];
#pragma unroll
        for (int v = 0; v < NV; ++v) reinterpret_cast<vec*>(q)[v] = r.v[v];
    } else {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (c.st[m]) q[m] = o[m];
    }
    if (RES) {
#pragma unroll
        for (int m = 0; m < V; ++m) {
            if (c.st[m]) rmax = max_abs_diff(rmax, o[m], prev[m]);
        }
    }
}

// One input row i: level 0 gets row i (into N[0]); level L computes row i - L from P, C, N of level L-1.
// P, C, N rotate (the caller passes them permuted), so no row is ever copied between registers.
template <bool EDGE, bool RES>
__device__ __forceinline__ void wave_row(real (&P)[K][V], real (&C)[K][V], real (&N)[K][V], const int i,
                                         wave_ctx& c, real& rmax)
{
    if (PF > 0) {
        fetch_row<EDGE>(i + PF, c);
        ring_row(N[0], c);  // rows past c.e were zero-filled and are never used
    } else if (i < c.e) {
        load_row<EDGE>(N[0], i, c);
    }
#if HAS_DATA && DPF > 0
    prefetch_data(i - 1 + DPF, c);
#endif
#pragma unroll
    for (int L = 1; L <= K; ++L) {
        const int j = i - L;
        real o[V];
#if HAS_DATA
        row_data d;
        data_row<EDGE>(d, j, c);
        level(o, P[L - 1], C[L - 1], N[L - 1], c, d);
#else
        level(o, P[L - 1], C[L - 1], N[L - 1], c);
#endif
        if (EDGE) {
            const bool row_in = j >= c.r0 && j < c.r1;
#pragma unroll
            for (int m = 0; m < V; ++m)
                if (!(row_in && c.in[m])) o[m] = C[L - 1][m];
        }
        if (L < K) {
#pragma unroll
            for (int m = 0; m < V; ++m) N[L][m] = o[m];
        } else if (j >= c.y0) {
            store_row<RES>(o, C[K - 1], j, c, rmax);
        }
    }
}

template <bool EDGE, bool RES>
__device__ __forceinline__ void wave_segment(const int s, const int last, wave_ctx& c, real& rmax)
{
    real b0[K][V], b1[K][V], b2[K][V];
#pragma unroll
    for (int L = 0; L < K; ++L) {
#pragma unroll
        for (int m = 0; m < V; ++m) b0[L][m] = b1[L][m] = b2[L][m] = real(0);
    }
    if (PF > 0) {  // the first PF rows in flight before the first is needed
        c.rd = c.wr = 0;
        for (int d = 0; d < PF; ++d) fetch_row<EDGE>(s + d, c);
    }
    int i = s;
    while (true) {
        if (i > last) break;
        wave_row<EDGE, RES>(b0, b1, b2, i++, c, rmax);
        if (i > last) break;
        wave_row<EDGE, RES>(b1, b2, b0, i++, c, rmax);
        if (i > last) break;
        wave_row<EDGE, RES>(b2, b0, b1, i++, c, rmax);
    }
    if (PF > 0) copy_async_wait<0>();  // no copy may land in the ring after the next segment reuses it
}

extern "C" __global__ void __launch_bounds__(BX)
wave(real* __restrict__ out, const real* __restrict__ u, const idx pitch,
     const int r0, const int r1, const int c0, const int c1,
     const int o0, const int o1, const int p0, const int p1, const int rows,
     rbits* __restrict__ resid, const real wc, const real wx, const real wy DATA_PARAMS)
{
#if PF > 0
    __shared__ vec ring[BX / 32 * SLOTS * NV * 32];
#endif
    const int lane = threadIdx.x & 31;
    const int strip = blockIdx.x * (BX / 32) + (threadIdx.x >> 5);
    const int xb = 1 + ((p0 - 1) / VW) * VW - A * V;  // first column of strip 0 (16-byte aligned; p0 >= 1)
    const int xs = xb + strip * WOUT;
    if (xs + A * V >= p1) return;  // the whole warp: its strip stores nothing
    wave_ctx c;
    c.u = u;
    c.out = out;
    c.pitch = pitch;
    c.r0 = r0;
    c.r1 = r1;
    c.wc = wc;
    c.wx = wx;
    c.wy = wy;
#if HAS_DATA
    c.q = q;
    c.ax = ax;
    c.ay = ay;
    c.m = cap_m;
    c.cw = cap_w;
    c.sigma = sigma;
#endif
#if PF > 0
    c.ring = ring + (threadIdx.x >> 5) * (SLOTS * NV * 32);
#else
    c.ring = nullptr;
#endif
    c.x = xs + lane * V;
    const bool stores = lane >= A && lane < 32 - A;
    c.full = stores && c.x >= p0 && c.x + V <= p1;
#pragma unroll
    for (int m = 0; m < V; ++m) {
        c.st[m] = stores && c.x + m >= p0 && c.x + m < p1;
        c.in[m] = c.x + m >= c0 && c.x + m < c1;
    }
#pragma unroll
    for (int q = 0; q < NV; ++q) {
        const int xv = c.x + q * VW;
        c.ld[q] = xv + VW - 1 >= c0 - 1 && xv <= c1;
    }
    const bool cols_inside = xs >= c0 && xs + 32 * V <= c1;
    real rmax = real(0);
    const int segments = (o1 - o0 + rows - 1) / rows;
    for (int g = blockIdx.y; g < segments; g += gridDim.y) {
        const int y0 = o0 + g * rows;
        const int y1 = min(y0 + rows, o1);
        const int s = max(y0 - K, r0 - 1);  // first input row read
        c.e = min(y1 + K, r1 + 1);
        c.y0 = y0;
        const int last = y1 - 1 + K;  // the iteration that computes level K of row y1 - 1
        const bool inside = cols_inside && y0 - K >= r0 && y1 + K <= r1;
        if (resid) {
            if (inside) wave_segment<false, true>(s, last, c, rmax);
            else wave_segment<true, true>(s, last, c, rmax);
        } else {
            if (inside) wave_segment<false, false>(s, last, c, rmax);
            else wave_segment<true, false>(s, last, c, rmax);
        }
    }
    if (resid) warp_max_to(resid, rmax);
}
