// mg: the multigrid verbs (solver/backends/mg_ops.py is the reference; solver/backends/cupy_mg.py launches them).
//
// Defines injected at compile time (cupy_mg.options): REAL (common.cu), MG_BX x MG_BY threads per block of the
// point kernels (one thread per point: x over columns, y over rows, blocks striding over rows when the grid's
// y extent is capped), MG_THREADS per block of the one-dimensional ones (solve, max_abs; a multiple of 32),
// MG_TX x MG_TY points per tile of mg_sweeps (MG_BX x MG_BY threads).
// Fields are padded 2-D arrays whose rows lie `pitch` elements apart (every field has its own pitch); regions
// are local index ranges [r0, r1) x [c0, c1). Tables: index tables are int64 (idx), weight tables REAL and
// row-major with `width` entries a row.
//
// Every expression keeps the terms and order of mg_ops.py, sums start from zero and add in index order, and the
// module is compiled with --fmad=false: each product and sum is rounded as numpy rounds it (bit for bit). The
// explicit `zero +` terms are part of that: 0 + (-0) is +0, as numpy's zero-initialised accumulators give.

#if !defined(MG_BX) || !defined(MG_BY) || !defined(MG_THREADS)
#error "mg.cu needs MG_BX, MG_BY and MG_THREADS (solver/backends/cupy_mg.py passes them)"
#endif

#define MG_POINT_BOUNDS __launch_bounds__(MG_BX * MG_BY)

// The column of this thread, or -1 past the region; rows: for (int i = first_row(r0); i < r1; i += row_step()).
__device__ __forceinline__ int column_of(const int c0, const int c1)
{
    const int j = c0 + (int)(blockIdx.x * MG_BX + threadIdx.x);
    return j < c1 ? j : -1;
}
__device__ __forceinline__ int first_row(const int r0) { return r0 + (int)(blockIdx.y * MG_BY + threadIdx.y); }
__device__ __forceinline__ int row_step() { return (int)(gridDim.y * MG_BY); }

// The verbs' values at one point (the kernels below and mg_tail compute them so): no __restrict__ here, so that
// mg_tail, which reads what its earlier steps wrote, never takes the read-only path for them.
__device__ __forceinline__ real smooth_at(const real* u, const real* g, const idx pitch_u, const idx pitch_g,
                                          const int i, const int j, const real wc, const real wx, const real wy,
                                          const real om)
{
    const real* p = u + i * pitch_u + j;
    real v = update(p[0], p[-1], p[1], p[-pitch_u], p[pitch_u], wc, wx, wy);
    if (g) v = v + om * g[i * pitch_g + j];
    return v;
}

__device__ __forceinline__ real residual_at(const real* u, const real* g, const idx pitch_u, const idx pitch_g,
                                            const int i, const int j, const real wx, const real wy)
{
    const real* p = u + i * pitch_u + j;
    real v = wx * (p[-1] + p[1]) + wy * (p[-pitch_u] + p[pitch_u]);
    if (g) v = v + g[i * pitch_g + j];
    return v - p[0];
}

// out = wc*u + wx*(W + E) + wy*(S + N) [+ om*g]   (g null: no right-hand side)
extern "C" __global__ void MG_POINT_BOUNDS
mg_smooth(real* __restrict__ out, const real* __restrict__ u, const real* __restrict__ g, const idx pitch_out,
          const idx pitch_u, const idx pitch_g, const int r0, const int r1, const int c0, const int c1, const real wc,
          const real wx, const real wy, const real om)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    for (int i = first_row(r0); i < r1; i += row_step()) out[i * pitch_out + j] = smooth_at(u, g, pitch_u, pitch_g, i, j, wc, wx, wy, om);
}

// r = (wx*(W + E) + wy*(S + N) [+ g]) - u
extern "C" __global__ void MG_POINT_BOUNDS
mg_residual(real* __restrict__ r, const real* __restrict__ u, const real* __restrict__ g, const idx pitch_r,
            const idx pitch_u, const idx pitch_g, const int r0, const int r1, const int c0, const int c1,
            const real wx, const real wy)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    for (int i = first_row(r0); i < r1; i += row_step()) r[i * pitch_r + j] = residual_at(u, g, pitch_u, pitch_g, i, j, wx, wy);
}

// A coarse column's taps in mg_restrict: the first fine column x0, the count nb and the weights wq (three: nb == 3,
// whose weights are w0, w1, w2, read at once).
struct RestrictColumn {
    idx x0, nb;
    const real* wq;
    bool three;
    real w0, w1, w2;
};
__device__ __forceinline__ RestrictColumn restrict_column(const idx* xs, const idx* xc, const real* xw, const idx width,
                                                          const int q)
{
    RestrictColumn c;
    c.x0 = xs[q];
    c.nb = xc[q];
    c.wq = xw + (idx)q * width;
    c.three = c.nb == 3;
    const real zero = real(0);
    c.w0 = c.three ? c.wq[0] : zero;
    c.w1 = c.three ? c.wq[1] : zero;
    c.w2 = c.three ? c.wq[2] : zero;
    return c;
}

// mg_restrict's sum at one coarse point: its row's taps (ys_k, yc_k, weights wk) and its column's.
__device__ __forceinline__ real restrict_at(const real* r, const idx pitch_r, const idx ys_k, const idx yc_k,
                                            const real* wk, const RestrictColumn& col)
{
    const idx x0 = col.x0, nb = col.nb;
    const real *wq = col.wq, w0 = col.w0, w1 = col.w1, w2 = col.w2;
    const real zero = real(0);
    real acc = real(0);
    if (col.three && yc_k == 3) {  // full weighting's 3 x 3 windows: the same sums unrolled (their loads all at once)
        const real* s0 = r + ys_k * pitch_r + x0;
        const real* s1 = s0 + pitch_r;
        const real* s2 = s1 + pitch_r;
        const real a0 = s0[0], a1 = s0[1], a2 = s0[2], b0 = s1[0], b1 = s1[1], b2 = s1[2], d0 = s2[0], d1 = s2[1],
                   d2 = s2[2];
        const real row0 = ((zero + w0 * a0) + w1 * a1) + w2 * a2;
        const real row1 = ((zero + w0 * b0) + w1 * b1) + w2 * b2;
        const real row2 = ((zero + w0 * d0) + w1 * d1) + w2 * d2;
        return ((acc + wk[0] * row0) + wk[1] * row1) + wk[2] * row2;
    }
    for (idx a = 0; a < yc_k; ++a) {
        const real* src = r + (ys_k + a) * pitch_r + x0;
        real row = real(0);
        for (idx b = 0; b < nb; ++b) row = row + wq[b] * src[b];
        acc = acc + wk[a] * row;
    }
    return acc;
}

// gc[I, J] = scale * sum_{a < yc[k]} yw[k, a] * (sum_{b < xc[q]} xw[q, b] * r[ys[k] + a, xs[q] + b]),
// k = I - r0, q = J - c0 (per coarse point: its own tap counts).
extern "C" __global__ void MG_POINT_BOUNDS
mg_restrict(real* __restrict__ gc, const real* __restrict__ r, const idx pitch_gc, const idx pitch_r, const int r0,
            const int r1, const int c0, const int c1, const idx* __restrict__ ys, const idx* __restrict__ yc,
            const real* __restrict__ yw, const int yw_width, const idx* __restrict__ xs, const idx* __restrict__ xc,
            const real* __restrict__ xw, const int xw_width, const real scale)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    const int q = j - c0;
    const RestrictColumn col = restrict_column(xs, xc, xw, xw_width, q);
    for (int i = first_row(r0); i < r1; i += row_step()) {
        const int k = i - r0;
        gc[i * pitch_gc + j] = scale * restrict_at(r, pitch_r, ys[k], yc[k], yw + (idx)k * yw_width, col);
    }
}

// mg_prolong's correction at one point: from e's rows ys_k, ys_k + 1 and columns s, s + 1 (weights x0, x1; y0, y1).
__device__ __forceinline__ real prolong_at(const real* e, const idx pitch_e, const idx ys_k, const idx s, const real x0,
                                           const real x1, const real y0, const real y1)
{
    const real zero = real(0);
    const real* lo = e + ys_k * pitch_e + s;
    const real* hi = lo + pitch_e;
    const real row0 = (zero + x0 * lo[0]) + x1 * lo[1];
    const real row1 = (zero + x0 * hi[0]) + x1 * hi[1];
    return (zero + y0 * row0) + y1 * row1;
}

// u[i, j] = u + ((0 + yw0*row0) + yw1*row1), row_a = (0 + xw0*e[ys+a, xs]) + xw1*e[ys+a, xs+1]
extern "C" __global__ void MG_POINT_BOUNDS
mg_prolong(real* __restrict__ u, const real* __restrict__ e, const idx pitch_u, const idx pitch_e, const int r0,
           const int r1, const int c0, const int c1, const idx* __restrict__ ys, const real* __restrict__ yw,
           const int yw_width, const idx* __restrict__ xs, const real* __restrict__ xw, const int xw_width)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    const int q = j - c0;
    const idx s = xs[q];
    const real x0 = xw[(idx)q * xw_width], x1 = xw[(idx)q * xw_width + 1];
    for (int i = first_row(r0); i < r1; i += row_step()) {
        const int k = i - r0;
        real* o = u + i * pitch_u + j;
        *o = *o + prolong_at(e, pitch_e, ys[k], s, x0, x1, yw[(idx)k * yw_width], yw[(idx)k * yw_width + 1]);
    }
}

// mg_solve's sum for one point: its row m of the inverse times r over the region, k ascending, from zero.
__device__ __forceinline__ real solve_at(const real* r, const real* m, const idx pitch_r, const int r0, const int r1,
                                         const int c0, const int nx)
{
    real acc = real(0);
    for (int i = r0; i < r1; ++i) {
        const real* src = r + i * pitch_r + c0;
#pragma unroll 8
        for (int c = 0; c < nx; ++c) acc = acc + m[c] * src[c];  // (unrolled: the loads issued together)
        m += nx;
    }
    return acc;
}

// e = e + M r over the region's n points in row-major order: point p sums minv[p, k] * r_k over k ascending,
// from zero (minv: n x n, row-major). One thread per point; the coarsest level has at most a few thousand.
extern "C" __global__ void __launch_bounds__(MG_THREADS)
mg_solve(real* __restrict__ e, const real* __restrict__ r, const real* __restrict__ minv, const idx pitch_e,
         const idx pitch_r, const int r0, const int r1, const int c0, const int c1)
{
    const int nx = c1 - c0;
    const idx n = (idx)(r1 - r0) * nx;
    const idx p = blockIdx.x * (idx)MG_THREADS + threadIdx.x;
    if (p >= n) return;
    real* o = e + (r0 + p / nx) * pitch_e + c0 + p % nx;
    *o = *o + solve_at(r, minv + p * n, pitch_r, r0, r1, c0, nx);
}

// *out = max(*out, largest |a| over the region) as the bits of a non-negative REAL (NaN counts as +inf; zero
// *out first). Blocks of MG_THREADS stride over rows (y) and columns (x), as maxdiff.cu.
extern "C" __global__ void __launch_bounds__(MG_THREADS)
mg_max_abs(rbits* __restrict__ out, const real* __restrict__ a, const idx pitch_a, const int r0, const int r1,
           const int c0, const int c1)
{
    real m = real(0);
    for (int i = r0 + blockIdx.y; i < r1; i += gridDim.y) {
        const real* pa = a + i * pitch_a;
        for (int j = c0 + blockIdx.x * MG_THREADS + threadIdx.x; j < c1; j += gridDim.x * MG_THREADS) {
            real d = pa[j] < real(0) ? -pa[j] : pa[j];
            if (d != d) d = inf_of(d);
            if (d > m) m = d;
        }
    }
    warp_max_to(out, m);
}

// A point's four face coefficients for the coefficient-field kernels (mg_vsmooth, mg_vresidual, mg_vresidual_max): read
// from ax and ay at offset k (the point's; pitch_a their row pitch), or, where ax is null, the numbers ux along x and
// uy along y (faces that hold one value each: Weights.uniform, two fields fewer to read; the same values, so the
// same bits).
__device__ __forceinline__ void faces_at(real& aw, real& ae, real& as_, real& an, const real* __restrict__ ax,
                                         const real* __restrict__ ay, const idx k, const idx pitch_a, const real ux,
                                         const real uy)
{
    if (ax) {
        aw = ax[k - 1];
        ae = ax[k];
        as_ = ay[k - pitch_a];
        an = ay[k];
    } else {
        aw = ae = ux;
        as_ = an = uy;
    }
}

// The stop test's one pass (issue 35): v = g - A u as mg_residual computes it (mg_vresidual with coefficient fields),
// stored in r where r is not null, and *out = max(*out, largest |v| over the region) as mg_max_abs folds it (NaN
// counts as +inf; zero *out first): the same value as mg_residual followed by mg_max_abs, without reading r back
// (nor writing it, where nothing reads it). Blocks of MG_THREADS stride over rows (y) and columns (x), as mg_max_abs.
__device__ __forceinline__ real fold_abs(real m, const real v)
{
    real d = v < real(0) ? -v : v;
    if (d != d) d = inf_of(d);
    return d > m ? d : m;
}

extern "C" __global__ void __launch_bounds__(MG_THREADS)
mg_residual_max(rbits* __restrict__ out, real* __restrict__ r, const real* __restrict__ u, const real* __restrict__ g,
                const idx pitch_r, const idx pitch_u, const idx pitch_g, const int r0, const int r1, const int c0,
                const int c1, const real wx, const real wy)
{
    real m = real(0);
    for (int i = r0 + blockIdx.y; i < r1; i += gridDim.y) {
        for (int j = c0 + blockIdx.x * MG_THREADS + threadIdx.x; j < c1; j += gridDim.x * MG_THREADS) {
            const real* p = u + i * pitch_u + j;
            real v = wx * (p[-1] + p[1]) + wy * (p[-pitch_u] + p[pitch_u]);
            if (g) v = v + g[i * pitch_g + j];
            v = v - p[0];
            if (r) r[i * pitch_r + j] = v;
            m = fold_abs(m, v);
        }
    }
    warp_max_to(out, m);
}

extern "C" __global__ void __launch_bounds__(MG_THREADS)
mg_vresidual_max(rbits* __restrict__ out, real* __restrict__ r, const real* __restrict__ u, const real* __restrict__ g,
                 const real* __restrict__ ax, const real* __restrict__ ay, const idx pitch_r, const idx pitch_u,
                 const idx pitch_g, const idx pitch_a, const int r0, const int r1, const int c0, const int c1,
                 const real sigma, const real* __restrict__ sg, const real ux, const real uy)
{
    real m = real(0);
    for (int i = r0 + blockIdx.y; i < r1; i += gridDim.y) {
        for (int j = c0 + blockIdx.x * MG_THREADS + threadIdx.x; j < c1; j += gridDim.x * MG_THREADS) {
            const real* p = u + i * pitch_u + j;
            real aw, ae, as_, an;
            faces_at(aw, ae, as_, an, ax, ay, i * pitch_a + j, pitch_a, ux, uy);
            real v = (aw * p[-1] + ae * p[1]) + (as_ * p[-pitch_u] + an * p[pitch_u]);
            if (g) v = v + g[i * pitch_g + j];
            v = v - ((sg ? sg[i * pitch_a + j] : sigma) + ((aw + ae) + (as_ + an))) * p[0];
            if (r) r[i * pitch_r + j] = v;
            m = fold_abs(m, v);
        }
    }
    warp_max_to(out, m);
}

// mg_sweeps (issue 35): one or two sweeps of mg_smooth over the region in one pass over memory, and optionally the
// residual of their result (mg_residual's terms: kept in r where r is not null, its max |.| folded into *word as
// mg_residual_max folds it where word is not null). Each block owns a tile of MG_TX x MG_TY points and holds it with
// MG_HALO layers around in shared memory. Each thread owns the same MG_PY x MG_PX places of that array at every
// stage (MG_PY consecutive rows from threadIdx.y MG_PY, columns threadIdx.x + m MG_BX) and keeps their values in
// registers: its loads of u and g are all issued at once at the start (g then stays in registers); a stage reads
// only the left and right neighbours and the rows just above and below its strip from shared memory, then writes its
// places back. Loads are clamped to the region and its one ghost layer (nothing further is read). A stage computes
// every place but the array's outermost ring from the stage before (a place outside the region keeps u's value: the
// ghost rules are constant, so the other buffer's ghosts are the same): after stage s the places at least s from the
// array's edge are exact, which covers the tile and the layer around it that the residual reads. Only the last
// field (and the residual) reach memory: out must not be u. Where e is not null, the first sweep starts from u
// corrected by mg_prolong (e the coarse level's correction, the tables mg_prolong's over the same region), computed
// as the tile is loaded; u itself is not corrected. A null u stands for a field of zeros (a coarse level's first
// pass: nothing read, nothing cleared). The terms and their order are mg_prolong's, mg_smooth's and mg_residual's:
// the bits are those of the separate verbs.
#if !defined(MG_TX) || !defined(MG_TY)
#error "mg.cu needs MG_TX and MG_TY (solver/backends/cupy_mg.py passes them)"
#endif
#define MG_HALO 3
#define MG_SW (MG_TX + 2 * MG_HALO)
#define MG_SH (MG_TY + 2 * MG_HALO)
#define MG_PX ((MG_SW + MG_BX - 1) / MG_BX)
#define MG_PY ((MG_SH + MG_BY - 1) / MG_BY)
static_assert(MG_PX * MG_PY <= 32, "mg_sweeps: a thread's places are the bits of one word");

__device__ __forceinline__ bool has(const unsigned inside, const int k, const int m)
{
    return (inside >> (k * MG_PX + m)) & 1u;
}

// This thread's places of the array from cur, then a barrier: `a` holds every thread's values.
__device__ __forceinline__ void tile_store(real (*a)[MG_SW], const real (&cur)[MG_PY][MG_PX])
{
    const int y0 = (int)threadIdx.y * MG_PY;
#pragma unroll
    for (int k = 0; k < MG_PY; ++k) {
#pragma unroll
        for (int m = 0; m < MG_PX; ++m) {
            const int y = y0 + k, x = (int)threadIdx.x + m * MG_BX;
            if (y < MG_SH && x < MG_SW) a[y][x] = cur[k][m];
        }
    }
    __syncthreads();
}

// One stage: cur = S(cur) at this thread's places inside the region and off the array's outer ring (their
// neighbours from `a`, which holds every thread's cur before the stage), then `a` holds the new values.
__device__ __forceinline__ void tile_stage(real (*a)[MG_SW], real (&cur)[MG_PY][MG_PX], const real (&gv)[MG_PY][MG_PX],
                                           const unsigned inside, const bool with_g, const real wc, const real wx,
                                           const real wy, const real om)
{
    const int y0 = (int)threadIdx.y * MG_PY;
#pragma unroll
    for (int m = 0; m < MG_PX; ++m) {
        const int x = (int)threadIdx.x + m * MG_BX;
        const bool col = x > 0 && x < MG_SW - 1;
        real above = col && y0 > 0 && y0 <= MG_SH ? a[y0 - 1][x] : real(0);  // the row above's value before the stage
        const real bottom = col && y0 + MG_PY < MG_SH ? a[y0 + MG_PY][x] : real(0);
#pragma unroll
        for (int k = 0; k < MG_PY; ++k) {
            const int y = y0 + k;
            const real c = cur[k][m];
            if (col && has(inside, k, m) && y > 0 && y < MG_SH - 1) {
                const real down = k == MG_PY - 1 ? bottom : cur[k + 1][m];
                real v = update(c, a[y][x - 1], a[y][x + 1], above, down, wc, wx, wy);
                if (with_g) v = v + om * gv[k][m];
                cur[k][m] = v;
            }
            above = c;
        }
    }
    __syncthreads();  // (every thread has read the stage before)
    tile_store(a, cur);
}

#ifndef MG_MIN_BLOCKS
#define MG_MIN_BLOCKS 4
#endif
extern "C" __global__ void __launch_bounds__(MG_BX * MG_BY, MG_MIN_BLOCKS)
mg_sweeps(real* __restrict__ out, real* __restrict__ r, rbits* __restrict__ word, const real* __restrict__ u,
          const real* __restrict__ g, const idx pitch_out, const idx pitch_r, const idx pitch_u, const idx pitch_g,
          const int r0, const int r1, const int c0, const int c1, const int sweeps, const real wc1, const real wx1,
          const real wy1, const real om1, const real wc2, const real wx2, const real wy2, const real om2,
          const real rwx, const real rwy, const real* __restrict__ e, const idx pitch_e, const idx* __restrict__ ys,
          const real* __restrict__ yw, const int yw_width, const idx* __restrict__ xs, const real* __restrict__ xw,
          const int xw_width)
{
    __shared__ real tile[MG_SH][MG_SW];
    __shared__ real folded[MG_BX * MG_BY / 32];
    const int i0 = r0 + (int)blockIdx.y * MG_TY - MG_HALO, j0 = c0 + (int)blockIdx.x * MG_TX - MG_HALO;
    const int y0 = (int)threadIdx.y * MG_PY;
    const bool with_g = g != nullptr;
    real cur[MG_PY][MG_PX], gv[MG_PY][MG_PX];
    unsigned inside = 0;  // bit k MG_PX + m: the place lies in the region
#pragma unroll
    for (int k = 0; k < MG_PY; ++k) {
        const int y = y0 + k, i = i0 + y;
#pragma unroll
        for (int m = 0; m < MG_PX; ++m) {
            const int x = (int)threadIdx.x + m * MG_BX, j = j0 + x;
            const bool here = y < MG_SH && x < MG_SW;
            const bool in = here && i >= r0 && i < r1 && j >= c0 && j < c1;
            const bool near = here && i >= r0 - 1 && i <= r1 && j >= c0 - 1 && j <= c1;
            real v = near && u ? u[i * pitch_u + j] : real(0);
            if (e && in) {  // mg_prolong's correction of this point, as it adds it
                const int kk = i - r0, q = j - c0;
                v = v + prolong_at(e, pitch_e, ys[kk], xs[q], xw[(idx)q * xw_width], xw[(idx)q * xw_width + 1],
                                   yw[(idx)kk * yw_width], yw[(idx)kk * yw_width + 1]);
            }
            cur[k][m] = v;
            gv[k][m] = in && with_g ? g[i * pitch_g + j] : real(0);
            inside |= (in ? 1u : 0u) << (k * MG_PX + m);
        }
    }
    tile_store(tile, cur);
    tile_stage(tile, cur, gv, inside, with_g, wc1, wx1, wy1, om1);
    if (sweeps == 2) tile_stage(tile, cur, gv, inside, with_g, wc2, wx2, wy2, om2);
    const bool res = r != nullptr || word != nullptr;
    real mx = real(0);
#pragma unroll
    for (int m = 0; m < MG_PX; ++m) {
        const int x = (int)threadIdx.x + m * MG_BX, j = j0 + x;
        if (x < MG_HALO || x >= MG_HALO + MG_TX) continue;
#pragma unroll
        for (int k = 0; k < MG_PY; ++k) {
            const int y = y0 + k, i = i0 + y;
            if (y < MG_HALO || y >= MG_HALO + MG_TY || !has(inside, k, m)) continue;
            const real c = cur[k][m];
            out[i * pitch_out + j] = c;
            if (res) {
                const real up = k == 0 ? tile[y - 1][x] : cur[k - 1][m];
                const real down = k == MG_PY - 1 ? tile[y + 1][x] : cur[k + 1][m];
                real v = rwx * (tile[y][x - 1] + tile[y][x + 1]) + rwy * (up + down);
                if (with_g) v = v + gv[k][m];
                v = v - c;
                if (r) r[i * pitch_r + j] = v;
                mx = fold_abs(mx, v);
            }
        }
    }
    if (word == nullptr) return;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {  // the block's largest value, then one atomic where it is larger than the word
        const real other = __shfl_xor_sync(FULL, mx, d);
        if (other > mx) mx = other;
    }
    const int t = (int)(threadIdx.y * MG_BX + threadIdx.x);
    if ((t & 31) == 0) folded[t >> 5] = mx;
    __syncthreads();
    if (t == 0) {
        for (int k = 1; k < MG_BX * MG_BY / 32; ++k) mx = folded[k] > mx ? folded[k] : mx;
        if (mx > real(0) && as_bits(mx) > *(volatile rbits*)word) atomicMax(word, as_bits(mx));
    }
}

// a = 0 on every point of a rows x cols field (ghost layers included).
extern "C" __global__ void MG_POINT_BOUNDS
mg_clear(real* __restrict__ a, const idx pitch_a, const int rows, const int cols)
{
    const int j = column_of(0, cols);
    if (j < 0) return;
    for (int i = first_row(0); i < rows; i += row_step()) a[i * pitch_a + j] = real(0);
}

// mg_tail (issue 35): the coarse levels' whole cycle in one block. `program` holds `ops` launches of mg_smooth,
// mg_residual, mg_restrict, mg_prolong, mg_solve and mg_clear, recorded from the cycle's own verbs
// (solver/multigrid/cycle.py `_tail`, cupy_mg.tail_program): MG_TAIL_WORDS words each, the first its verb (TAIL_*
// below) and then the kernel's own arguments in order, one word each (pointers and integers as they are, reals as
// the bits of a double: exact for either REAL). The block's threads share each launch's points (row-major, a
// thread every blockDim.x points) and meet at a barrier before the next, which reads what it wrote (the point
// functions take no __restrict__: no read-only path). The values are the point functions' above: the launches'
// own bits.
#ifndef MG_TAIL_THREADS
#error "mg.cu needs MG_TAIL_THREADS (solver/backends/cupy_mg.py passes it)"
#endif
#define MG_TAIL_WORDS 20
enum { TAIL_SMOOTH = 0, TAIL_RESIDUAL = 1, TAIL_RESTRICT = 2, TAIL_PROLONG = 3, TAIL_SOLVE = 4, TAIL_CLEAR = 5 };

__device__ __forceinline__ real word_real(const long long w) { return (real)__longlong_as_double(w); }
template <typename T> __device__ __forceinline__ T* word_ptr(const long long w) { return (T*)(size_t)w; }

// The launch's region (four words from a[at]): rows of points, columns, and this thread's first point.
struct TailRegion {
    int r0, c0, nc, n;
};
__device__ __forceinline__ TailRegion tail_region(const long long* a)
{
    const int r0 = (int)a[0], r1 = (int)a[1], c0 = (int)a[2], c1 = (int)a[3];
    TailRegion t = {r0, c0, c1 - c0, (r1 - r0) * (c1 - c0)};
    if (t.nc <= 0 || r1 <= r0) t.n = 0;
    return t;
}

__device__ void tail_step(const long long* a)
{
    const int verb = (int)a[0];
    ++a;
    if (verb == TAIL_SMOOTH) {  // (out, u, g, pitch_out, pitch_u, pitch_g, r0, r1, c0, c1, wc, wx, wy, om)
        real* out = word_ptr<real>(a[0]);
        const real *u = word_ptr<const real>(a[1]), *g = word_ptr<const real>(a[2]);
        const TailRegion t = tail_region(a + 6);
        const real wc = word_real(a[10]), wx = word_real(a[11]), wy = word_real(a[12]), om = word_real(a[13]);
        for (int p = (int)threadIdx.x; p < t.n; p += (int)blockDim.x) {
            const int i = t.r0 + p / t.nc, j = t.c0 + p % t.nc;
            out[i * a[3] + j] = smooth_at(u, g, a[4], a[5], i, j, wc, wx, wy, om);
        }
    } else if (verb == TAIL_RESIDUAL) {  // (r, u, g, pitch_r, pitch_u, pitch_g, r0, r1, c0, c1, wx, wy)
        real* r = word_ptr<real>(a[0]);
        const real *u = word_ptr<const real>(a[1]), *g = word_ptr<const real>(a[2]);
        const TailRegion t = tail_region(a + 6);
        const real wx = word_real(a[10]), wy = word_real(a[11]);
        for (int p = (int)threadIdx.x; p < t.n; p += (int)blockDim.x) {
            const int i = t.r0 + p / t.nc, j = t.c0 + p % t.nc;
            r[i * a[3] + j] = residual_at(u, g, a[4], a[5], i, j, wx, wy);
        }
    } else if (verb == TAIL_RESTRICT) {  // (gc, r, pitch_gc, pitch_r, r0, r1, c0, c1, ys, yc, yw, yw_width, xs, xc,
                                         //  xw, xw_width, scale)
        real* gc = word_ptr<real>(a[0]);
        const real* r = word_ptr<const real>(a[1]);
        const TailRegion t = tail_region(a + 4);
        const idx *ys = word_ptr<const idx>(a[8]), *yc = word_ptr<const idx>(a[9]), *xs = word_ptr<const idx>(a[12]),
                  *xc = word_ptr<const idx>(a[13]);
        const real *yw = word_ptr<const real>(a[10]), *xw = word_ptr<const real>(a[14]);
        const real scale = word_real(a[16]);
        for (int p = (int)threadIdx.x; p < t.n; p += (int)blockDim.x) {
            const int k = p / t.nc, q = p % t.nc;
            gc[(t.r0 + k) * a[2] + t.c0 + q] = scale * restrict_at(r, a[3], ys[k], yc[k], yw + (idx)k * a[11],
                                                                   restrict_column(xs, xc, xw, a[15], q));
        }
    } else if (verb == TAIL_PROLONG) {  // (u, e, pitch_u, pitch_e, r0, r1, c0, c1, ys, yw, yw_width, xs, xw, xw_width)
        real* u = word_ptr<real>(a[0]);
        const real* e = word_ptr<const real>(a[1]);
        const TailRegion t = tail_region(a + 4);
        const idx *ys = word_ptr<const idx>(a[8]), *xs = word_ptr<const idx>(a[11]);
        const real *yw = word_ptr<const real>(a[9]), *xw = word_ptr<const real>(a[12]);
        for (int p = (int)threadIdx.x; p < t.n; p += (int)blockDim.x) {
            const int k = p / t.nc, q = p % t.nc;
            real* o = u + (t.r0 + k) * a[2] + t.c0 + q;
            *o = *o + prolong_at(e, a[3], ys[k], xs[q], xw[(idx)q * a[13]], xw[(idx)q * a[13] + 1], yw[(idx)k * a[10]],
                                 yw[(idx)k * a[10] + 1]);
        }
    } else if (verb == TAIL_SOLVE) {  // (e, r, minv, pitch_e, pitch_r, r0, r1, c0, c1)
        real* e = word_ptr<real>(a[0]);
        const real *r = word_ptr<const real>(a[1]), *minv = word_ptr<const real>(a[2]);
        const TailRegion t = tail_region(a + 5);
        for (int p = (int)threadIdx.x; p < t.n; p += (int)blockDim.x) {
            real* o = e + (t.r0 + p / t.nc) * a[3] + t.c0 + p % t.nc;
            *o = *o + solve_at(r, minv + (idx)p * t.n, a[4], (int)a[5], (int)a[6], t.c0, t.nc);
        }
    } else if (verb == TAIL_CLEAR) {  // (a, pitch_a, rows, cols)
        real* f = word_ptr<real>(a[0]);
        const int cols = (int)a[3], n = (int)a[2] * cols;
        for (int p = (int)threadIdx.x; p < n; p += (int)blockDim.x) f[(p / cols) * a[1] + p % cols] = real(0);
    }
}

#define MG_TAIL_CHUNK 32  // launches whose words are read into shared memory at a time (one round trip for them all)

extern "C" __global__ void __launch_bounds__(MG_TAIL_THREADS)
mg_tail(const long long* __restrict__ program, const int ops)
{
    __shared__ long long words[MG_TAIL_CHUNK * MG_TAIL_WORDS];
    for (int k0 = 0; k0 < ops; k0 += MG_TAIL_CHUNK) {
        const int n = (ops - k0 < MG_TAIL_CHUNK ? ops - k0 : MG_TAIL_CHUNK);
        for (int w = (int)threadIdx.x; w < n * MG_TAIL_WORDS; w += (int)blockDim.x)
            words[w] = program[(idx)k0 * MG_TAIL_WORDS + w];
        __syncthreads();
        for (int k = 0; k < n; ++k) {
            tail_step(words + k * MG_TAIL_WORDS);
            __syncthreads();  // (before the next chunk's words too: every thread is done with these)
        }
    }
}

// With coefficient fields (alpha a field: ax east faces, ay north faces; both with one pitch, pitch_a), in the
// equation's own units: d = sigma + ((ax_W + ax_E) + (ay_S + ay_N)), sigma the field sg (pitch_a) where it is not null
// (an implicit step's heat capacity that varies), else the number,
// out = wc*u + om*((((ax_W*W + ax_E*E) + (ay_S*S + ay_N*N)) [+ g]) / d)        (g null: no right-hand side)
extern "C" __global__ void MG_POINT_BOUNDS
mg_vsmooth(real* __restrict__ out, const real* __restrict__ u, const real* __restrict__ g, const real* __restrict__ ax,
           const real* __restrict__ ay, const idx pitch_out, const idx pitch_u, const idx pitch_g, const idx pitch_a,
           const int r0, const int r1, const int c0, const int c1, const real wc, const real om, const real sigma,
           const real* __restrict__ sg, const real ux, const real uy)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    for (int i = first_row(r0); i < r1; i += row_step()) {
        const real* p = u + i * pitch_u + j;
        real aw, ae, as_, an;
        faces_at(aw, ae, as_, an, ax, ay, i * pitch_a + j, pitch_a, ux, uy);
        real v = (aw * p[-1] + ae * p[1]) + (as_ * p[-pitch_u] + an * p[pitch_u]);
        if (g) v = v + g[i * pitch_g + j];
        out[i * pitch_out + j] = wc * p[0] + om * (v / ((sg ? sg[i * pitch_a + j] : sigma) + ((aw + ae) + (as_ + an))));
    }
}

// r = (((ax_W*W + ax_E*E) + (ay_S*S + ay_N*N)) [+ g]) - d*u
extern "C" __global__ void MG_POINT_BOUNDS
mg_vresidual(real* __restrict__ r, const real* __restrict__ u, const real* __restrict__ g, const real* __restrict__ ax,
             const real* __restrict__ ay, const idx pitch_r, const idx pitch_u, const idx pitch_g, const idx pitch_a,
             const int r0, const int r1, const int c0, const int c1, const real sigma, const real* __restrict__ sg,
             const real ux, const real uy)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    for (int i = first_row(r0); i < r1; i += row_step()) {
        const real* p = u + i * pitch_u + j;
        real aw, ae, as_, an;
        faces_at(aw, ae, as_, an, ax, ay, i * pitch_a + j, pitch_a, ux, uy);
        real v = (aw * p[-1] + ae * p[1]) + (as_ * p[-pitch_u] + an * p[pitch_u]);
        if (g) v = v + g[i * pitch_g + j];
        r[i * pitch_r + j] = v - ((sg ? sg[i * pitch_a + j] : sigma) + ((aw + ae) + (as_ + an))) * p[0];
    }
}

// y = y + a*x (conjugate gradients)
extern "C" __global__ void MG_POINT_BOUNDS
mg_axpy(real* __restrict__ y, const real* __restrict__ x, const idx pitch_y, const idx pitch_x, const int r0,
        const int r1, const int c0, const int c1, const real a)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    for (int i = first_row(r0); i < r1; i += row_step()) y[i * pitch_y + j] = y[i * pitch_y + j] + a * x[i * pitch_x + j];
}

// y = (((y + a0*x0) + a1*x1) + a2*x2) + a3*x3 over the region, the first `count` terms (1 to 4): as many axpys in
// order, one pass (GMRES's update x += Z y)
extern "C" __global__ void MG_POINT_BOUNDS
mg_axpys(real* __restrict__ y, const real* __restrict__ x0, const real* __restrict__ x1, const real* __restrict__ x2,
         const real* __restrict__ x3, const idx pitch_y, const idx pitch_x0, const idx pitch_x1, const idx pitch_x2,
         const idx pitch_x3, const int r0, const int r1, const int c0, const int c1, const int count, const real a0,
         const real a1, const real a2, const real a3)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    for (int i = first_row(r0); i < r1; i += row_step()) {
        real v = y[i * pitch_y + j] + a0 * x0[i * pitch_x0 + j];
        if (count > 1) v = v + a1 * x1[i * pitch_x1 + j];
        if (count > 2) v = v + a2 * x2[i * pitch_x2 + j];
        if (count > 3) v = v + a3 * x3[i * pitch_x3 + j];
        y[i * pitch_y + j] = v;
    }
}

// y = 0 + a*x over the region and 0 on every other point of y's rows x cols (a clear and an axpy, in one pass)
extern "C" __global__ void MG_POINT_BOUNDS
mg_scale(real* __restrict__ y, const real* __restrict__ x, const idx pitch_y, const idx pitch_x, const int rows,
         const int cols, const int r0, const int r1, const int c0, const int c1, const real a)
{
    const int j = column_of(0, cols);
    if (j < 0) return;
    const bool col = j >= c0 && j < c1;
    for (int i = first_row(0); i < rows; i += row_step())
        y[i * pitch_y + j] = col && i >= r0 && i < r1 ? real(0) + a * x[i * pitch_x + j] : real(0);
}

// y = y + a*x over the region, and *out = max(*out, largest |y| there) as mg_max_abs folds it (zero *out first)
extern "C" __global__ void __launch_bounds__(MG_THREADS)
mg_axpy_max(rbits* __restrict__ out, real* __restrict__ y, const real* __restrict__ x, const idx pitch_y,
            const idx pitch_x, const int r0, const int r1, const int c0, const int c1, const real a)
{
    real m = real(0);
    for (int i = r0 + blockIdx.y; i < r1; i += gridDim.y) {
        for (int j = c0 + blockIdx.x * MG_THREADS + threadIdx.x; j < c1; j += gridDim.x * MG_THREADS) {
            const real v = y[i * pitch_y + j] + a * x[i * pitch_x + j];
            y[i * pitch_y + j] = v;
            m = fold_abs(m, v);
        }
    }
    warp_max_to(out, m);
}

// y = x + b*y
extern "C" __global__ void MG_POINT_BOUNDS
mg_xpay(real* __restrict__ y, const real* __restrict__ x, const idx pitch_y, const idx pitch_x, const int r0,
        const int r1, const int c0, const int c1, const real b)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    for (int i = first_row(r0); i < r1; i += row_step()) y[i * pitch_y + j] = x[i * pitch_x + j] + b * y[i * pitch_y + j];
}

// The dot products' two passes (solver/multigrid/dot.py), the products a*b in double (exact for float fields).
// mg_products_max: *out = max(*out, largest |a*b| over the region) as the bits of a non-negative double (NaN counts
// as +inf; zero *out first). mg_folded_sums: out[0] += the sum of q1 = (t + s1) - s1, out[1] += that of
// q2 = (r + s2) - s2, r = t - q1: every partial sum is exact, so the atomic additions' order changes no bit
// (zero out first). Blocks of MG_THREADS stride over rows (y) and columns (x), as mg_max_abs.
__device__ __forceinline__ void warp_max64_to(unsigned long long* to, double m)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        const double other = __shfl_xor_sync(FULL, m, d);
        if (other > m) m = other;
    }
    if ((threadIdx.x & 31) == 0 && m > 0.0) atomicMax(to, (unsigned long long)__double_as_longlong(m));
}

extern "C" __global__ void __launch_bounds__(MG_THREADS)
mg_products_max(unsigned long long* __restrict__ out, const real* __restrict__ a, const real* __restrict__ b,
                const idx pitch_a, const idx pitch_b, const int r0, const int r1, const int c0, const int c1)
{
    double m = 0.0;
    for (int i = r0 + blockIdx.y; i < r1; i += gridDim.y) {
        const real* pa = a + i * pitch_a;
        const real* pb = b + i * pitch_b;
        for (int j = c0 + blockIdx.x * MG_THREADS + threadIdx.x; j < c1; j += gridDim.x * MG_THREADS) {
            const double t = (double)pa[j] * (double)pb[j];
            double d = t < 0.0 ? -t : t;
            if (d != d) d = inf_of(d);
            if (d > m) m = d;
        }
    }
    warp_max64_to(out, m);
}

extern "C" __global__ void __launch_bounds__(MG_THREADS)
mg_folded_sums(double* __restrict__ out, const real* __restrict__ a, const real* __restrict__ b, const idx pitch_a,
               const idx pitch_b, const int r0, const int r1, const int c0, const int c1, const double s1,
               const double s2)
{
    double acc1 = 0.0, acc2 = 0.0;
    for (int i = r0 + blockIdx.y; i < r1; i += gridDim.y) {
        const real* pa = a + i * pitch_a;
        const real* pb = b + i * pitch_b;
        for (int j = c0 + blockIdx.x * MG_THREADS + threadIdx.x; j < c1; j += gridDim.x * MG_THREADS) {
            const double t = (double)pa[j] * (double)pb[j];
            const double q1 = (t + s1) - s1;
            const double rest = t - q1;
            acc1 = acc1 + q1;
            acc2 = acc2 + ((rest + s2) - s2);
        }
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        acc1 = acc1 + __shfl_xor_sync(FULL, acc1, d);
        acc2 = acc2 + __shfl_xor_sync(FULL, acc2, d);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(out, acc1);
        atomicAdd(out + 1, acc2);
    }
}

// Transfers that follow the coefficients (alpha a field: solver/multigrid/opdep.py), per-point weights wy0, wy1, wx0,
// wx1 on the fine layout (one pitch, pitch_w).
// mg_prolong_op: u[i, j] += (0 + wy0*((0 + wx0*e[s, t]) + wx1*e[s, t+1])) + wy1*((0 + wx0*e[s+1, t]) + wx1*e[s+1, t+1]),
// s = ys[i - r0], t = xs[j - c0], the weights at (i, j).
extern "C" __global__ void MG_POINT_BOUNDS
mg_prolong_op(real* __restrict__ u, const real* __restrict__ e, const real* __restrict__ wy0,
              const real* __restrict__ wy1, const real* __restrict__ wx0, const real* __restrict__ wx1,
              const idx pitch_u, const idx pitch_e, const idx pitch_w, const int r0, const int r1, const int c0,
              const int c1, const idx* __restrict__ ys, const idx* __restrict__ xs)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    const idx s = xs[j - c0];
    const real zero = real(0);
    for (int i = first_row(r0); i < r1; i += row_step()) {
        const real* lo = e + ys[i - r0] * pitch_e + s;
        const real* hi = lo + pitch_e;
        const idx w = i * pitch_w + j;
        const real row0 = (zero + wx0[w] * lo[0]) + wx1[w] * lo[1];
        const real row1 = (zero + wx0[w] * hi[0]) + wx1[w] * hi[1];
        real* o = u + i * pitch_u + j;
        *o = *o + ((zero + wy0[w] * row0) + wy1[w] * row1);
    }
}

// mg_restrict_op: gc[I, J] = sum over the window's fine points (rows ys[k] + a, a < yc[k]; columns xs[q] + b,
// b < xc[q]; k = I - r0, q = J - c0) of every term ty[a'][i] == I + oy, tx[b'][j] == J + ox (global targets) of
// (area * (wy_a'[i, j] * wx_b'[i, j])) * r[i, j], from zero in the order a, b, a', b'. ty, tx: (2, ny_t), (2, nx_t).
extern "C" __global__ void MG_POINT_BOUNDS
mg_restrict_op(real* __restrict__ gc, const real* __restrict__ r, const real* __restrict__ wy0,
               const real* __restrict__ wy1, const real* __restrict__ wx0, const real* __restrict__ wx1,
               const idx pitch_gc, const idx pitch_r, const idx pitch_w, const int r0, const int r1, const int c0,
               const int c1, const idx* __restrict__ ys, const idx* __restrict__ yc, const idx* __restrict__ xs,
               const idx* __restrict__ xc, const idx* __restrict__ ty, const idx ny_t, const idx* __restrict__ tx,
               const idx nx_t, const idx oy, const idx ox, const real area)
{
    const int J = column_of(c0, c1);
    if (J < 0) return;
    const int q = J - c0;
    const idx x0 = xs[q], nb = xc[q];
    for (int I = first_row(r0); I < r1; I += row_step()) {
        const int k = I - r0;
        real acc = real(0);
        for (idx a = 0; a < yc[k]; ++a) {
            const idx i = ys[k] + a;
            for (idx b = 0; b < nb; ++b) {
                const idx j = x0 + b;
                const real x = r[i * pitch_r + j];
                const idx w = i * pitch_w + j;
                for (int ai = 0; ai < 2; ++ai) {
                    if (ty[ai * ny_t + i] != I + oy) continue;
                    const real wy = ai ? wy1[w] : wy0[w];
                    for (int bi = 0; bi < 2; ++bi)
                        if (tx[bi * nx_t + j] == J + ox) acc = acc + (area * (wy * (bi ? wx1[w] : wx0[w]))) * x;
                }
            }
        }
        gc[I * pitch_gc + J] = acc;
    }
}
