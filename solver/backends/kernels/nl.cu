// The nonlinear operator's sweeps (solver/nonlinear/operator.py) on one GPU: solver/backends/numba_nl.py's kernels,
// each point's terms in the same order (compiled with --fmad=false: no contraction), one thread a point. Arrays are
// row-major with unit column stride; P(a) is a's row pitch in elements. Variants by macro: NL_KAP (kappa given: the
// faces' harmonic means), NL_DLIN (the linearised sinks' d_lin term), NL_AB (the Jacobian's A and B face terms).
// REAL is the field's type.
#define AT(a, pa, i, j) a[(long long)(i) * (pa) + (j)]
#define TWO ((REAL)2.0)
// The reference faces the residual and the Jacobian read: ax and ay, or where they are null the numbers ux and uy (faces
// that hold one value each: Weights.uniform; the same values, so the same bits, two fields fewer to read)
#define AX(i, j) (ax ? AT(ax, pax, i, j) : ux)
#define AY(i, j) (ay ? AT(ay, pay, i, j) : uy)

__device__ __forceinline__ REAL nl_mean(REAL kref, REAL a, REAL b) {
    return kref * ((TWO * a * b) / (a + b));
}

// out = g0 + div(K grad u) - sigma0 u [- d_lin u] at the owned n x m block from (r0, c0) of u and out
extern "C" __global__ void nl_residual(REAL* out, long long pout, const REAL* u, long long pu, const REAL* kap,
                                       long long pk, const REAL* ax, long long pax, const REAL* ay, long long pay,
                                       REAL ux, REAL uy, const REAL* g0, long long pg, const REAL* sigma0, long long ps,
                                       const REAL* d_lin, long long pd, int n, int m, int r0, int c0) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= m) return;
    int R = r0 + i, C = c0 + j;
    REAL c = AT(u, pu, R, C);
#if NL_KAP
    REAL kw = nl_mean(AX(R, C - 1), AT(kap, pk, i + 1, j), AT(kap, pk, i + 1, j + 1));
    REAL ke = nl_mean(AX(R, C), AT(kap, pk, i + 1, j + 1), AT(kap, pk, i + 1, j + 2));
    REAL ks = nl_mean(AY(R - 1, C), AT(kap, pk, i, j + 1), AT(kap, pk, i + 1, j + 1));
    REAL kn = nl_mean(AY(R, C), AT(kap, pk, i + 1, j + 1), AT(kap, pk, i + 2, j + 1));
#else
    REAL kw = AX(R, C - 1), ke = AX(R, C), ks = AY(R - 1, C), kn = AY(R, C);
#endif
    REAL fw = kw * (c - AT(u, pu, R, C - 1));
    REAL fe = ke * (AT(u, pu, R, C + 1) - c);
    REAL fs = ks * (c - AT(u, pu, R - 1, C));
    REAL fn = kn * (AT(u, pu, R + 1, C) - c);
    REAL v = (AT(g0, pg, i, j) + ((fe - fw) + (fn - fs))) - AT(sigma0, ps, i, j) * c;
#if NL_DLIN
    v = v - AT(d_lin, pd, i, j) * c;
#endif
    AT(out, pout, R, C) = v;
}

// A face's K (and, with NL_AB, its A and B) between points p and q: kr its reference coefficient, a and b their kappa,
// da and db their kappa', du = u_q - u_p (nl_faces stores them; nl_apply_at computes them where it needs them: the same
// terms, so the same bits)
__device__ __forceinline__ void nl_face(REAL kr, REAL a, REAL b, REAL da, REAL db, REAL du, REAL* k, REAL* fa,
                                        REAL* fb) {
    REAL s = a + b;
    *k = kr * ((TWO * a * b) / s);
#if NL_AB
    REAL s2 = s * s;
    *fa = kr * ((TWO * b * b) / s2) * da * du;
    *fb = kr * ((TWO * a * a) / s2) * db * du;
#endif
}

// the owned block's faces' (K, A, B) at u: east faces kx (n, m + 1), north faces ky (n + 1, m); threads over
// (n + 1) x (m + 1)
extern "C" __global__ void nl_faces(REAL* kx, REAL* ex_a, REAL* ex_b, long long pex, REAL* ky, REAL* ny_a, REAL* ny_b,
                                    long long pny, const REAL* kap, const REAL* dkap, long long pk, const REAL* u,
                                    long long pu, const REAL* ax, long long pax, const REAL* ay, long long pay, REAL ux,
                                    REAL uy, int n, int m, int r0, int c0) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > n || j > m) return;
    REAL k, fa, fb;
    if (i < n) {  // east face (i, j), west of owned column j
        int R = r0 + i, C = c0 - 1 + j;
        nl_face(AX(R, C), AT(kap, pk, i + 1, j), AT(kap, pk, i + 1, j + 1), AT(dkap, pk, i + 1, j),
                AT(dkap, pk, i + 1, j + 1), AT(u, pu, R, C + 1) - AT(u, pu, R, C), &k, &fa, &fb);
        AT(kx, pex, i, j) = k;
#if NL_AB
        AT(ex_a, pex, i, j) = fa;
        AT(ex_b, pex, i, j) = fb;
#endif
    }
    if (j < m) {  // north face (i, j), south of owned row i
        int R = r0 - 1 + i, C = c0 + j;
        nl_face(AY(R, C), AT(kap, pk, i, j + 1), AT(kap, pk, i + 1, j + 1), AT(dkap, pk, i, j + 1),
                AT(dkap, pk, i + 1, j + 1), AT(u, pu, R + 1, C) - AT(u, pu, R, C), &k, &fa, &fb);
        AT(ky, pny, i, j) = k;
#if NL_AB
        AT(ny_a, pny, i, j) = fa;
        AT(ny_b, pny, i, j) = fb;
#endif
    }
}

// A face's linearised flux from its K, A and B
__device__ __forceinline__ REAL nl_face_flux(REAL k, REAL fa, REAL fb, REAL vp, REAL vq) {
    REAL f = k * (vq - vp);
#if NL_AB
    f = f + (fa * vp + fb * vq);
#endif
    return f;
}

// the same, the face (i, j) of nl_faces' arrays
__device__ __forceinline__ REAL nl_flux(const REAL* k, const REAL* a, const REAL* b, long long p, int i, int j, REAL vp,
                                        REAL vq) {
#if NL_AB
    return nl_face_flux(AT(k, p, i, j), AT(a, p, i, j), AT(b, p, i, j), vp, vq);
#else
    return nl_face_flux(AT(k, p, i, j), (REAL)0, (REAL)0, vp, vq);
#endif
}

// out = D v - div(the faces' linearised fluxes) at the owned points
extern "C" __global__ void nl_apply(REAL* out, long long pout, const REAL* v, long long pv, const REAL* kx,
                                    const REAL* ex_a, const REAL* ex_b, long long pex, const REAL* ky, const REAL* ny_a,
                                    const REAL* ny_b, long long pny, const REAL* diag, long long pd, int n, int m,
                                    int r0, int c0) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= m) return;
    int R = r0 + i, C = c0 + j;
    REAL c = AT(v, pv, R, C);
    REAL fw = nl_flux(kx, ex_a, ex_b, pex, i, j, AT(v, pv, R, C - 1), c);
    REAL fe = nl_flux(kx, ex_a, ex_b, pex, i, j + 1, c, AT(v, pv, R, C + 1));
    REAL fs = nl_flux(ky, ny_a, ny_b, pny, i, j, AT(v, pv, R - 1, C), c);
    REAL fn = nl_flux(ky, ny_a, ny_b, pny, i + 1, j, c, AT(v, pv, R + 1, C));
    AT(out, pout, R, C) = AT(diag, pd, i, j) * c - ((fe - fw) + (fn - fs));
}

// nl_apply without the faces' arrays (a GPU's Newton steps: six fields fewer to keep, and no pass to make them): each
// face's (K, A, B) from u, kappa and kappa' as nl_faces makes it, then nl_apply's terms. A face is made once: blocks are
// NL_LANES threads wide (a warp a row of them), each thread takes a column and NL_ROWS rows of it from the top down, a
// row's north face is the next row's south, and a point's east face is its right neighbour's west (passed along the warp;
// lane 0 makes its own west face). Launch: blocks of NL_LANES x blockDim.y threads, (ceil(m / NL_LANES),
// ceil(n / (blockDim.y NL_ROWS))) of them; NL_ROWS from cupy_nl.APPLY_ROWS.
#define NL_LANES 32
#ifndef NL_ROWS
#error "nl.cu needs NL_ROWS (solver/backends/cupy_nl.py passes it)"
#endif
extern "C" __global__ void nl_apply_at(REAL* out, long long pout, const REAL* v, long long pv, const REAL* u,
                                       long long pu, const REAL* kap, const REAL* dkap, long long pk, const REAL* ax,
                                       long long pax, const REAL* ay, long long pay, REAL ux, REAL uy,
                                       const REAL* diag, long long pd, int n, int m, int r0, int c0) {
    const int lane = threadIdx.x, j = blockIdx.x * NL_LANES + lane;
    const int i0 = (blockIdx.y * blockDim.y + threadIdx.y) * NL_ROWS;
    if (i0 >= n) return;  // (the whole warp: its lanes share their rows)
    const bool in = j < m;
    const int C = c0 + j, i1 = i0 + NL_ROWS < n ? i0 + NL_ROWS : n;
    REAL ks = 0, as_ = 0, bs = 0;  // the south face of row i0: nl_faces' north face (i0, j)
    if (in)
        nl_face(AY(r0 + i0 - 1, C), AT(kap, pk, i0, j + 1), AT(kap, pk, i0 + 1, j + 1), AT(dkap, pk, i0, j + 1),
                AT(dkap, pk, i0 + 1, j + 1), AT(u, pu, r0 + i0, C) - AT(u, pu, r0 + i0 - 1, C), &ks, &as_, &bs);
    for (int i = i0; i < i1; ++i) {
        const int R = r0 + i;
        REAL c = 0, uc = 0, ke = 0, ae = 0, be = 0, kn = 0, an = 0, bn = 0;
        if (in) {
            c = AT(v, pv, R, C);
            uc = AT(u, pu, R, C);
            nl_face(AX(R, C), AT(kap, pk, i + 1, j + 1), AT(kap, pk, i + 1, j + 2), AT(dkap, pk, i + 1, j + 1),
                    AT(dkap, pk, i + 1, j + 2), AT(u, pu, R, C + 1) - uc, &ke, &ae, &be);  // east: nl_faces' (i, j + 1)
            nl_face(AY(R, C), AT(kap, pk, i + 1, j + 1), AT(kap, pk, i + 2, j + 1), AT(dkap, pk, i + 1, j + 1),
                    AT(dkap, pk, i + 2, j + 1), AT(u, pu, R + 1, C) - uc, &kn, &an, &bn);  // north: (i + 1, j)
        }
        REAL kw = __shfl_up_sync(0xffffffffu, ke, 1), aw = __shfl_up_sync(0xffffffffu, ae, 1);
        REAL bw = __shfl_up_sync(0xffffffffu, be, 1);
        if (!in) continue;
        if (lane == 0)  // west: nl_faces' east face (i, j)
            nl_face(AX(R, C - 1), AT(kap, pk, i + 1, j), AT(kap, pk, i + 1, j + 1), AT(dkap, pk, i + 1, j),
                    AT(dkap, pk, i + 1, j + 1), uc - AT(u, pu, R, C - 1), &kw, &aw, &bw);
        REAL fw = nl_face_flux(kw, aw, bw, AT(v, pv, R, C - 1), c);
        REAL fe = nl_face_flux(ke, ae, be, c, AT(v, pv, R, C + 1));
        REAL fs = nl_face_flux(ks, as_, bs, AT(v, pv, R - 1, C), c);
        REAL fn = nl_face_flux(kn, an, bn, c, AT(v, pv, R + 1, C));
        AT(out, pout, R, C) = AT(diag, pd, i, j) * c - ((fe - fw) + (fn - fs));
        ks = kn;
        as_ = an;
        bs = bn;
    }
}

// d = sigma0 + d_lin (or + 0), scale = kappa at free points and 1 elsewhere
extern "C" __global__ void nl_diagonal(REAL* d, REAL* scale, long long po, const REAL* sigma0, long long ps,
                                       const REAL* d_lin, long long pd, const REAL* kap, long long pk,
                                       const bool* free_, long long pf, int n, int m) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= m) return;
#if NL_DLIN
    AT(d, po, i, j) = AT(sigma0, ps, i, j) + AT(d_lin, pd, i, j);
#else
    AT(d, po, i, j) = AT(sigma0, ps, i, j) + (REAL)0.0;
#endif
#if NL_KAP
    AT(scale, po, i, j) = AT(free_, pf, i, j) ? AT(kap, pk, i + 1, j + 1) : (REAL)1.0;
#else
    AT(scale, po, i, j) = (REAL)1.0;
#endif
}

// out = max(a / b, 0) with NaN kept (numpy.maximum's rule), as double
extern "C" __global__ void nl_quotient(double* out, const REAL* a, const REAL* b, long long p, int n, int m) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= m) return;
    REAL q = AT(a, p, i, j) / AT(b, p, i, j);
    out[(long long)i * m + j] = (double)((q >= (REAL)0.0 || q != q) ? q : (REAL)0.0);
}

// y = (0 + x) + a v over the owned points (Backend.combine's terms)
extern "C" __global__ void nl_trial(REAL* y, long long py, const REAL* x, long long px, REAL a, const REAL* v,
                                    long long pv, int n, int m, int r0, int c0) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= m) return;
    int R = r0 + i, C = c0 + j;
    AT(y, py, R, C) = ((REAL)0.0 + AT(x, px, R, C)) + a * AT(v, pv, R, C);
}

// out[r0 + i, c0 + j] = y[r0 + i, c0 + j] / k[i, j]
extern "C" __global__ void nl_divide(REAL* out, long long po, const REAL* y, long long py, const REAL* k, long long pk,
                                     int n, int m, int r0, int c0) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= m) return;
    AT(out, po, r0 + i, c0 + j) = AT(y, py, r0 + i, c0 + j) / AT(k, pk, i, j);
}

// A Newton rebuild's coarsening of the levels' diagonal on the device (solver.multigrid.coefficients.coarsened, one
// rank): numba_mg.across_rows and across_cols, float64, each output's taps summed in their order. k: (n, c)
// contiguous; rows / cols, w: (m, taps) contiguous; wsum: (m,).
extern "C" __global__ void nl_across_rows(double* out, const double* k, const long long* rows, const double* w,
                                          const double* wsum, int m, int c, int taps) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= m || j >= c) return;
    double o = 0.0;
    for (int t = 0; t < taps; ++t)
        o = o + w[(long long)i * taps + t] * k[rows[(long long)i * taps + t] * c + j];
    out[(long long)i * c + j] = o / wsum[i];
}

extern "C" __global__ void nl_across_cols(double* out, const double* k, const long long* cols, const double* w,
                                          const double* wsum, int n, int c, int m, int taps) {
    int jc = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || jc >= m) return;
    double acc = 0.0;
    for (int t = 0; t < taps; ++t)
        acc = acc + w[(long long)jc * taps + t] * k[(long long)i * c + cols[(long long)jc * taps + t]];
    out[(long long)i * m + jc] = acc / wsum[jc];
}

// kappa and kappa' of one power law on an n x m box of u from (r0, c0) (solver.core.conductivity.Law.evaluate, then
// the operator's division by k_ref, term by term): theta = u + offset, k = k0 (theta / t0)^b, kap = k / kref,
// dkap = ((b k) / theta) / kref. pow is CuPy's power's (the same bits as its array expression), in one pass.
extern "C" __global__ void nl_power(REAL* kap, REAL* dkap, long long pk, const REAL* u, long long pu, REAL offset,
                                    REAL t0, REAL b, REAL k0, REAL kref, int n, int m, int r0, int c0) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= m) return;
    REAL theta = AT(u, pu, r0 + i, c0 + j) + offset;
    REAL k = k0 * pow(theta / t0, b);
    AT(kap, pk, i, j) = k / kref;
    AT(dkap, pk, i, j) = ((b * k) / theta) / kref;
}

// A film's wall temperatures and losses (solver.nonlinear.films.wall_flux and wall_temperature, term by term, one
// thread a point): Newton's method safeguarded by bisection inside [min(u, T_a, T_s), max(u, T_a, T_s)], a point
// stopping where its step no longer changes it (the array form freezes it there: the same x). kappa at the half-link's
// middle temperature from the points' power laws (lp: offset, t0, b, k0, kref for each of nlaws laws; a code outside
// 1..nlaws is constant k: 1 and 0); nlaws 0: no k(T) at all (kappa_at None). e4 is 4 e, rounded once as Python does.
// (numpy's minimum and maximum: a NaN on either side wins; b where a is no less, or greater, than it)
__device__ __forceinline__ REAL nl_nanmin(REAL a, REAL b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ REAL nl_nanmax(REAL a, REAL b) { return (a != a || a > b) ? a : b; }

__device__ __forceinline__ void nl_law(REAL t, long long code, const REAL* lp, int nlaws, REAL* kap, REAL* dkap) {
    *kap = (REAL)1.0;
    *dkap = (REAL)0.0;
    if (code >= 1 && code <= nlaws) {
        const REAL* p = lp + 5 * (code - 1);
        REAL theta = t + p[0];
        REAL k = p[3] * pow(theta / p[1], p[2]);
        *kap = k / p[4];
        *dkap = ((p[2] * k) / theta) / p[4];
    }
}

extern "C" __global__ void nl_film(REAL* q, REAL* dq, REAL* rad, const REAL* u, long long pu, const long long* rows,
                                   const long long* cols, const REAL* a, const REAL* delta, const REAL* h,
                                   const REAL* ta, const REAL* ts4, const long long* code, REAL e, REAL e4,
                                   REAL offset, REAL eps, const REAL* lp, int nlaws, int radiates, int jacobian,
                                   int most, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const REAL half_ = (REAL)0.5;
    REAL uu = AT(u, pu, rows[i], cols[i]);
    REAL H = h[i], TA = ta[i], TS4 = ts4[i], scale = a[i] / delta[i];
    long long cd = code[i];
    bool law = nlaws > 0;
    if (!law && !radiates) {  // the closed form
        REAL s = H + scale;
        REAL hc = (H * scale) / s;
        q[i] = hc * (uu - TA);
        dq[i] = hc;
        return;
    }
    REAL ts = radiates ? pow(TS4, (REAL)0.25) - offset : TA;
    REAL lo = nl_nanmin(nl_nanmin(uu, TA), ts), hi = nl_nanmax(nl_nanmax(uu, TA), ts);
    REAL x = hi, kap, dkap;
    for (int it = 0; it < most; ++it) {
        REAL theta = x + offset;
        REAL t3 = theta * theta * theta;
        REAL cx = scale, c = scale;
        if (law) {
            nl_law(half_ * (uu + x), cd, lp, nlaws, &kap, &dkap);
            REAL hl = (half_ * (uu - x)) * dkap;
            cx = scale * (kap - hl);
            c = scale * kap;
        }
        REAL g = ((c * (uu - x)) - (H * (x - TA))) - (e * ((t3 * theta) - TS4));
        lo = g > (REAL)0.0 ? x : lo;
        hi = g <= (REAL)0.0 ? x : hi;
        REAL nw = x + g / ((cx + H) + e4 * t3);
        nw = (nw > lo && nw < hi) ? nw : half_ * (lo + hi);
        bool done = (fabs(nw - x) <= eps * fabs(nw)) || (hi - lo <= eps * fabs(hi)) || !isfinite(nw);
        x = nw;
        if (done) break;
    }
    REAL theta = x + offset;
    REAL t3 = theta * theta * theta;
    REAL r = e * ((t3 * theta) - TS4);
    REAL qq = H * (x - TA);
    REAL qw = H;
    if (radiates) {
        qq = qq + r;
        qw = H + e4 * t3;
        rad[i] = r;
    }
    REAL cu = scale, cx = scale;
    if (law) {
        nl_law(half_ * (uu + x), cd, lp, nlaws, &kap, &dkap);
        if (jacobian) {
            REAL hl = (half_ * (uu - x)) * dkap;
            cu = scale * (kap + hl);
            cx = scale * (kap - hl);
        } else {
            cu = cx = scale * kap;
        }
    }
    q[i] = qq;
    dq[i] = (qw * cu) / (qw + cx);
}
