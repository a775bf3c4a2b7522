// maxdiff: *out = max(*out, largest |a - b| over the region [r0, r1) x [c0, c1)) (NaN -> +inf), for the
// convergence and NaN checks. Blocks stride over rows, threads over columns (coalesced); each warp
// folds its largest value into *out (common.cu). *out must be zeroed first. Blocks of BX threads.

extern "C" __global__ void __launch_bounds__(BX)
maxdiff(rbits* __restrict__ out, const real* __restrict__ a, const real* __restrict__ b, const idx pitch_a,
        const idx pitch_b, const int r0, const int r1, const int c0, const int c1)
{
    real m = real(0);
    for (int i = r0 + blockIdx.y; i < r1; i += gridDim.y) {
        const real* pa = a + i * pitch_a;
        const real* pb = b + i * pitch_b;
        for (int j = c0 + blockIdx.x * BX + threadIdx.x; j < c1; j += gridDim.x * BX) m = max_abs_diff(m, pa[j], pb[j]);
    }
    warp_max_to(out, m);
}
