// mg: the multigrid verbs (solver/backends/mg_ops.py is the reference; solver/backends/cupy_mg.py launches them).
//
// Defines injected at compile time (cupy_mg.options): REAL (common.cu), MG_BX x MG_BY threads per block of the
// point kernels (one thread per point: x over columns, y over rows, blocks striding over rows when the grid's
// y extent is capped), MG_THREADS per block of the one-dimensional ones (solve, max_abs; a multiple of 32).
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

// out = wc*u + wx*(W + E) + wy*(S + N) [+ om*g]   (g null: no right-hand side)
extern "C" __global__ void MG_POINT_BOUNDS
mg_smooth(real* __restrict__ out, const real* __restrict__ u, const real* __restrict__ g, const idx pitch_out,
          const idx pitch_u, const idx pitch_g, const int r0, const int r1, const int c0, const int c1, const real wc,
          const real wx, const real wy, const real om)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    for (int i = first_row(r0); i < r1; i += row_step()) {
        const real* p = u + i * pitch_u + j;
        real v = update(p[0], p[-1], p[1], p[-pitch_u], p[pitch_u], wc, wx, wy);
        if (g) v = v + om * g[i * pitch_g + j];
        out[i * pitch_out + j] = v;
    }
}

// r = (wx*(W + E) + wy*(S + N) [+ g]) - u
extern "C" __global__ void MG_POINT_BOUNDS
mg_residual(real* __restrict__ r, const real* __restrict__ u, const real* __restrict__ g, const idx pitch_r,
            const idx pitch_u, const idx pitch_g, const int r0, const int r1, const int c0, const int c1,
            const real wx, const real wy)
{
    const int j = column_of(c0, c1);
    if (j < 0) return;
    for (int i = first_row(r0); i < r1; i += row_step()) {
        const real* p = u + i * pitch_u + j;
        real v = wx * (p[-1] + p[1]) + wy * (p[-pitch_u] + p[pitch_u]);
        if (g) v = v + g[i * pitch_g + j];
        r[i * pitch_r + j] = v - p[0];
    }
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
    const idx x0 = xs[q], nb = xc[q];
    const real* wq = xw + (idx)q * xw_width;
    for (int i = first_row(r0); i < r1; i += row_step()) {
        const int k = i - r0;
        const real* wk = yw + (idx)k * yw_width;
        real acc = real(0);
        for (idx a = 0; a < yc[k]; ++a) {
            const real* src = r + (ys[k] + a) * pitch_r + x0;
            real row = real(0);
            for (idx b = 0; b < nb; ++b) row = row + wq[b] * src[b];
            acc = acc + wk[a] * row;
        }
        gc[i * pitch_gc + j] = scale * acc;
    }
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
    const real zero = real(0);
    for (int i = first_row(r0); i < r1; i += row_step()) {
        const int k = i - r0;
        const real* lo = e + ys[k] * pitch_e + s;
        const real* hi = lo + pitch_e;
        const real row0 = (zero + x0 * lo[0]) + x1 * lo[1];
        const real row1 = (zero + x0 * hi[0]) + x1 * hi[1];
        const real y0 = yw[(idx)k * yw_width], y1 = yw[(idx)k * yw_width + 1];
        real* o = u + i * pitch_u + j;
        *o = *o + ((zero + y0 * row0) + y1 * row1);
    }
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
    const real* m = minv + p * n;
    real acc = real(0);
    for (int i = r0; i < r1; ++i) {
        const real* src = r + i * pitch_r + c0;
        for (int c = 0; c < nx; ++c) acc = acc + m[c] * src[c];
        m += nx;
    }
    real* o = e + (r0 + p / nx) * pitch_e + c0 + p % nx;
    *o = *o + acc;
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

// a = 0 on every point of a rows x cols field (ghost layers included).
extern "C" __global__ void MG_POINT_BOUNDS
mg_clear(real* __restrict__ a, const idx pitch_a, const int rows, const int cols)
{
    const int j = column_of(0, cols);
    if (j < 0) return;
    for (int i = first_row(0); i < rows; i += row_step()) a[i * pitch_a + j] = real(0);
}
