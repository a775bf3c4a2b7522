// naive: one thread per point, five loads from global memory (neighbours come from L1/L2).
// Block BX x BY threads; blocks stride over the rows when the grid's y extent is capped. With data (common.cu:
// SRC, FORM) each point also reads its source and faces from global memory.

extern "C" __global__ void __launch_bounds__(BX * BY)
naive(real* __restrict__ out, const real* __restrict__ u, const idx pitch,
      const int r0, const int r1, const int c0, const int c1, const real wc, const real wx, const real wy DATA_PARAMS)
{
    const int j = c0 + blockIdx.x * BX + threadIdx.x;
    if (j >= c1) return;
    for (int i = r0 + blockIdx.y * BY + threadIdx.y; i < r1; i += gridDim.y * BY) {
        const idx k = i * pitch + j;
#if HAS_DATA
        out[k] = update_data(u[k], u[k - 1], u[k + 1], u[k - pitch], u[k + pitch], wc, wx, wy, data_at(k, pitch, q, ax, ay, cap_m, cap_w),
                             sigma);
#else
        out[k] = update(u[k], u[k - 1], u[k + 1], u[k - pitch], u[k + pitch], wc, wx, wy);
#endif
    }
}
