// tiled: a (BY + 2) x (BX + 2) shared-memory tile with its one-cell apron, loaded cooperatively
// (coalesced along rows), then every thread computes its point from shared memory.
// Apron guards: the tile loads rows i0 - 1 .. i0 + BY and columns j0 - 1 .. j0 + BX, but only those
// with row <= r1 and column <= c1 (row r1 / column c1 is the last one a point of the region reads);
// entries left unloaded are read only by threads whose point lies outside the region. With data (common.cu: SRC,
// FORM) each point reads its source and faces from global memory (no reuse between threads to share).

extern "C" __global__ void __launch_bounds__(BX * BY)
tiled(real* __restrict__ out, const real* __restrict__ u, const idx pitch,
      const int r0, const int r1, const int c0, const int c1, const real wc, const real wx, const real wy DATA_PARAMS)
{
    __shared__ real s[BY + 2][BX + 2];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int j0 = c0 + blockIdx.x * BX;
    const int tiles = (r1 - r0 + BY - 1) / BY;
    for (int t = blockIdx.y; t < tiles; t += gridDim.y) {
        const int i0 = r0 + t * BY;
        for (int y = ty; y < BY + 2; y += BY) {
            const int i = i0 - 1 + y;
            for (int x = tx; x < BX + 2; x += BX) {
                const int j = j0 - 1 + x;
                if (i <= r1 && j <= c1) s[y][x] = u[i * pitch + j];
            }
        }
        __syncthreads();
        const int i = i0 + ty, j = j0 + tx;
#if HAS_DATA
        if (i < r1 && j < c1)
            out[i * pitch + j] = update_data(s[ty + 1][tx + 1], s[ty + 1][tx], s[ty + 1][tx + 2], s[ty][tx + 1],
                                             s[ty + 2][tx + 1], wc, wx, wy, data_at(i * pitch + j, pitch, q, ax, ay, cap_m, cap_w), sigma);
#else
        if (i < r1 && j < c1)
            out[i * pitch + j] = update(s[ty + 1][tx + 1], s[ty + 1][tx], s[ty + 1][tx + 2],
                                        s[ty][tx + 1], s[ty + 2][tx + 1], wc, wx, wy);
#endif
        __syncthreads();
    }
}
