// boundary: fill the ghost layers of a block's physical sides; the rules are solver/core/boundary.py's.
//
// One launch per axis: axis 0 = y (ghost rows over the full padded width), axis 1 = x (ghost columns over
// the full padded height); the y launch goes first, so a corner holds the x rule applied to the ghost row.
// One thread per ghost point of both sides of the axis: d layers (m = 0 next to the owned points).
// kind: 0 none (a neighbour's halo fills it), 1 dirichlet (v = value), 2 neumann (mirror of the owned
// point m inside, plus (2m+1) v with v = G h), 3 periodic (the owned point n places further on),
// 4 convective (g x the owned point m inside + v: g the gain, v the value).
// Values and gains are doubles, rounded to REAL as Fill.apply rounds them (v, (2m+1) v and g each rounded
// once); a side's values (gains) are one number, or one per point p along its padded length (vs, gs non-null).
// `u` points at element (0, 0) of the padded field; n (ny or nx) owned points across the side.
// Entries: fill_sides takes numbers only (the rules of kinds 1-3 with constant values: the plain case),
// fill_rules every rule (cupy_kernels.fill_launches picks).

__device__ __forceinline__ void fill_point(real* __restrict__ u, const idx pitch, const int ny, const int nx,
                                           const int d, const int axis, const int kind_lo, const double v_lo,
                                           const double g_lo, const double* __restrict__ vs_lo,
                                           const double* __restrict__ gs_lo, const int kind_hi, const double v_hi,
                                           const double g_hi, const double* __restrict__ vs_hi,
                                           const double* __restrict__ gs_hi)
{
    const int len = axis == 0 ? nx + 2 * d : ny + 2 * d;
    const int n = axis == 0 ? ny : nx;
    const idx t = blockIdx.x * (idx)blockDim.x + threadIdx.x;
    if (t >= (idx)2 * d * len) return;
    const int p = (int)(t % len);
    const int m = (int)((t / len) % d);
    const int hi = (int)(t / ((idx)len * d));
    const int kind = hi ? kind_hi : kind_lo;
    if (kind == 0) return;
    const double* vs = hi ? vs_hi : vs_lo;
    const double* gs = hi ? gs_hi : gs_lo;
    const double v = vs ? vs[p] : (hi ? v_hi : v_lo);
    const int ghost = hi ? d + n + m : d - 1 - m;
    const int src = kind == 3 ? (hi ? ghost - n : ghost + n) : (hi ? d + n - 1 - m : d + m);
    const idx g = axis == 0 ? (idx)ghost * pitch + p : (idx)p * pitch + ghost;
    const idx s = axis == 0 ? (idx)src * pitch + p : (idx)p * pitch + src;
    if (kind == 1) {
        u[g] = (real)v;
    } else if (kind == 2) {
        const real a = (real)((2 * m + 1) * v);  // as the host computes it: in double, then rounded to REAL
        u[g] = a == (real)0 ? u[s] : u[s] + a;
    } else if (kind == 4) {
        const real gain = (real)(gs ? gs[p] : (hi ? g_hi : g_lo));
        u[g] = gain * u[s] + (real)v;
    } else {
        u[g] = u[s];
    }
}

extern "C" __global__ void
fill_sides(real* __restrict__ u, const idx pitch, const int ny, const int nx, const int d, const int axis,
           const int kind_lo, const double v_lo, const int kind_hi, const double v_hi)
{
    fill_point(u, pitch, ny, nx, d, axis, kind_lo, v_lo, 1.0, nullptr, nullptr, kind_hi, v_hi, 1.0, nullptr, nullptr);
}

extern "C" __global__ void
fill_rules(real* __restrict__ u, const idx pitch, const int ny, const int nx, const int d, const int axis,
           const int kind_lo, const double v_lo, const double g_lo, const double* __restrict__ vs_lo,
           const double* __restrict__ gs_lo, const int kind_hi, const double v_hi, const double g_hi,
           const double* __restrict__ vs_hi, const double* __restrict__ gs_hi)
{
    fill_point(u, pitch, ny, nx, d, axis, kind_lo, v_lo, g_lo, vs_lo, gs_lo, kind_hi, v_hi, g_hi, vs_hi, gs_hi);
}
