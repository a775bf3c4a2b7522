// chip (variant `chip`): the whole field on chip for a whole batch of steps, one persistent launch.
//
// Defines: REAL, V (columns per thread), RR (tile rows each thread holds in registers), NT (threads per
// block at most: the launch bounds, one block per multiprocessor).
//
// Tiles: a gx x gy grid of blocks, every block resident at once (cooperative launch; at most one per
// multiprocessor). Block (bx, by) owns interior rows y0 = 1 + by * RT .. y0 + RT - 1 and columns
// x0 = 1 + bx * CT .. x0 + CT - 1 (CT = blockDim.x * V; column 1 is 128-byte aligned, so every
// thread's V columns are 16-byte aligned). Thread t holds columns x0 + t * V .. + V - 1 of every tile
// row: rows 0 .. RR-1 in registers, rows RR .. RT-1 in its own slots of shared memory (nobody else
// reads them). Points outside the interior [1, ny] x [1, nx] keep their value: the ghost ring where a
// tile reaches it (loaded once), else zero; such points beyond the ring are never a neighbour of an
// interior point.
//
// One step, level t -> t + 1 (p = t % 2 selects one of two copies of everything exchanged):
//  1. publish level t: the tile's top and bottom rows and left and right columns to global memory (for
//     the neighbouring blocks), and each warp's outer columns to shared memory (for the next warp);
//  2. barrier; one thread releases the block's flag (= t + 1, levels published); threads 0..3 wait
//     for the up / down / left / right neighbours' flags to reach t + 1; barrier;
//  3. read the neighbours' level-t rows (north / south halo, per thread) and columns (west / east, by
//     the block's first / last thread into shared memory), through L2 (__ldcg: L1 is not coherent);
//  4. march down the tile rows: row r from rows r - 1, r, r + 1 (level t) and the west / east
//     neighbours by warp shuffles (across warps and blocks: what was published), in place.
// A block's neighbours wait for its flag before reading, and it waits for theirs before overwriting
// what it published two steps ago, so two copies suffice and no grid-wide barrier is needed. A
// physical side's halo is the field's ghost row or column (constant: loaded once, into both copies).
//
// The update and its term order are common.cu's (bitwise equal to numpy with --fmad=false). After
// the last step the interior is stored to `out`; with `resid` non-null the largest |level n - level
// n-1| over the interior is folded into *resid (the check's fused residual, as in wave.cu).

constexpr int VW = 16 / (int)sizeof(real);  // elements per 16-byte vector
constexpr int NV = V / VW;                  // 16-byte vectors per thread and row
static_assert(V % VW == 0, "V must be a multiple of the 16-byte vector width");
static_assert(RR >= 1, "at least one tile row in registers");

template <typename T> struct chip_vec;
template <> struct chip_vec<float> { typedef float4 type; };
template <> struct chip_vec<double> { typedef double2 type; };
typedef chip_vec<real>::type vec;

union row_t {
    vec v[NV];
    real e[V];
};

#ifdef __CUDA_ARCH__
#define BLOCK_SHARED(T, name) extern __shared__ T name[]
#else
#define BLOCK_SHARED(T, name) T* name = emu_block_shared<T>()
#endif

__device__ __forceinline__ void flag_release(unsigned* f, const unsigned v)
{
#ifdef __CUDA_ARCH__
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(f), "r"(v) : "memory");
#else
    __atomic_store_n(f, v, __ATOMIC_RELEASE);
#endif
}

__device__ __forceinline__ void flag_wait(const unsigned* f, const unsigned v)
{
#ifdef __CUDA_ARCH__
    unsigned got;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(got) : "l"(f) : "memory");
    } while (got < v);
#else
    while (__atomic_load_n(f, __ATOMIC_ACQUIRE) < v) emu_yield();
#endif
}

struct chip_ctx {
    int ny, nx, rt;   // interior rows and columns; tile rows
    int y0, x;        // first tile row; this thread's first column
    int tid, lane, warp, nt, nw;
    int b, up, down, left, right;  // this block and its neighbours (-1: none, a physical side)
    bool col_in[V];   // column x + m is interior
    vec* rows;        // shared: this thread's tile rows RR .. rt-1 (slot ((r - RR) * NV + q) * nt + tid)
    real* col_w;      // shared: [2][nw][rt] the value west of each warp's lane 0, per row
    real* col_e;      // shared: [2][nw][rt] the value east of each warp's lane 31, per row
    real* hrow;       // global: [2][blocks][2 (top, bottom)][nt * V]
    real* hcol;       // global: [2][blocks][2 (left, right)][rt]
    real wc, wx, wy;
};

__device__ __forceinline__ vec* smem_row(const chip_ctx& c, const int r, const int q)
{
    return c.rows + ((r - RR) * NV + q) * c.nt + c.tid;
}

// Tile row r >= RR (shared memory).
__device__ __forceinline__ void smem_get(real (&o)[V], const int r, const chip_ctx& c)
{
    row_t t;
#pragma unroll
    for (int q = 0; q < NV; ++q) t.v[q] = *smem_row(c, r, q);
#pragma unroll
    for (int m = 0; m < V; ++m) o[m] = t.e[m];
}

// Tile row r, any r: registers are selected by constant indices (a run-time index would move them to
// local memory), so this is for the few per-step accesses outside the march.
__device__ __forceinline__ void any_row(real (&o)[V], const real (&reg)[RR][V], const int r, const chip_ctx& c)
{
    if (r >= RR) return smem_get(o, r, c);
#pragma unroll
    for (int k = 0; k < RR; ++k)
        if (k == r) {
#pragma unroll
            for (int j = 0; j < V; ++j) o[j] = reg[k][j];
        }
}

__device__ __forceinline__ void put_smem_row(const real (&o)[V], const int r, const chip_ctx& c)
{
    row_t t;
#pragma unroll
    for (int m = 0; m < V; ++m) t.e[m] = o[m];
#pragma unroll
    for (int q = 0; q < NV; ++q) *smem_row(c, r, q) = t.v[q];
}

__device__ __forceinline__ real* hrow_at(const chip_ctx& c, const int p, const int b, const int side)
{
    return c.hrow + ((idx)(p * gridDim.x * gridDim.y + b) * 2 + side) * (c.nt * V) + c.tid * V;
}

__device__ __forceinline__ real* hcol_at(const chip_ctx& c, const int p, const int b, const int side)
{
    return c.hcol + ((idx)(p * gridDim.x * gridDim.y + b) * 2 + side) * c.rt;
}

__device__ __forceinline__ real* col_at(real* base, const chip_ctx& c, const int p, const int w)
{
    return base + (p * c.nw + w) * c.rt;
}

// A row of the field (ghosts included) for this thread's columns: zeros beyond the ghost ring.
__device__ __forceinline__ void load_field_row(real (&o)[V], const real* u, const idx pitch, const int y,
                                               const chip_ctx& c)
{
    row_t t;
#pragma unroll
    for (int q = 0; q < NV; ++q) {
        if (y <= c.ny + 1 && c.x + q * VW <= c.nx + 1) {
            t.v[q] = reinterpret_cast<const vec*>(u + (idx)y * pitch + c.x)[q];
        } else {
#pragma unroll
            for (int m = 0; m < VW; ++m) t.e[q * VW + m] = real(0);
        }
    }
#pragma unroll
    for (int m = 0; m < V; ++m) o[m] = t.e[m];
}

__device__ __forceinline__ real field_at(const real* u, const idx pitch, const int y, const int x, const chip_ctx& c)
{
    return y <= c.ny + 1 && x <= c.nx + 1 ? u[(idx)y * pitch + x] : real(0);
}

// 1. Publish level t (copy p) for the neighbouring warps and blocks.
__device__ __forceinline__ void publish(const real (&reg)[RR][V], const int p, const chip_ctx& c)
{
    if (c.up >= 0) {
        real* h = hrow_at(c, p, c.b, 0);
#pragma unroll
        for (int m = 0; m < V; ++m) __stcg(h + m, reg[0][m]);
    }
    if (c.down >= 0) {
        real o[V];
        any_row(o, reg, c.rt - 1, c);
        real* h = hrow_at(c, p, c.b, 1);
#pragma unroll
        for (int m = 0; m < V; ++m) __stcg(h + m, o[m]);
    }
    const bool west = c.lane == 0 && (c.warp > 0 || c.left >= 0);  // someone needs this thread's column x
    const bool east = c.lane == 31 && (c.warp < c.nw - 1 || c.right >= 0);
    if (!west && !east) return;
    real* to = nullptr;
    if (west) to = c.warp > 0 ? col_at(c.col_e, c, p, c.warp - 1) : hcol_at(c, p, c.b, 0);
    else to = c.warp < c.nw - 1 ? col_at(c.col_w, c, p, c.warp + 1) : hcol_at(c, p, c.b, 1);
    const int m = west ? 0 : V - 1;
    const bool global = west ? c.warp == 0 : c.warp == c.nw - 1;
    for (int r = 0; r < c.rt; ++r) {
        real o[V];
        any_row(o, reg, r, c);
        real v = o[0];
#pragma unroll
        for (int j = 1; j < V; ++j)
            if (j == m) v = o[j];
        if (global) __stcg(to + r, v);
        else to[r] = v;
    }
}

// 2. Release this block's level t; wait for the neighbours' (threads 0..3, one neighbour each).
__device__ __forceinline__ void meet(unsigned* flags, const unsigned t1, const chip_ctx& c)
{
    __syncthreads();
    if (c.tid == 0) {
        __threadfence();
        flag_release(flags + c.b, t1);
    }
    if (c.tid < 4) {
        const int nb = c.tid == 0 ? c.up : c.tid == 1 ? c.down : c.tid == 2 ? c.left : c.right;
        if (nb >= 0) {
            flag_wait(flags + nb, t1);
            __threadfence();
        }
    }
    __syncthreads();
}

// 3. The neighbours' level t: north / south rows (every thread), west / east columns (first / last thread).
__device__ __forceinline__ void receive(real (&north)[V], real (&south)[V], const int p, const chip_ctx& c)
{
    if (c.up >= 0) {
        const real* h = hrow_at(c, p, c.up, 1);
#pragma unroll
        for (int m = 0; m < V; ++m) north[m] = __ldcg(h + m);
    }
    if (c.down >= 0) {
        const real* h = hrow_at(c, p, c.down, 0);
#pragma unroll
        for (int m = 0; m < V; ++m) south[m] = __ldcg(h + m);
    }
    if (c.tid == 0 && c.left >= 0) {
        const real* h = hcol_at(c, p, c.left, 1);
        real* to = col_at(c.col_w, c, p, 0);
        for (int r = 0; r < c.rt; ++r) to[r] = __ldcg(h + r);
    }
    if (c.tid == c.nt - 1 && c.right >= 0) {
        const real* h = hcol_at(c, p, c.right, 0);
        real* to = col_at(c.col_e, c, p, c.nw - 1);
        for (int r = 0; r < c.rt; ++r) to[r] = __ldcg(h + r);
    }
}

// Row r of level t + 1 from rows s (r - 1), m (r) and n (r + 1) of level t; kept where not interior.
template <bool RES>
__device__ __forceinline__ void update_row(real (&o)[V], const real (&s)[V], const real (&m)[V], const real (&n)[V],
                                           const int r, const int p, const chip_ctx& c, real& rmax)
{
    real w0 = __shfl_up_sync(FULL, m[V - 1], 1);
    real e0 = __shfl_down_sync(FULL, m[0], 1);
    if (c.lane == 0) w0 = col_at(c.col_w, c, p, c.warp)[r];
    if (c.lane == 31) e0 = col_at(c.col_e, c, p, c.warp)[r];
    const bool row_in = c.y0 + r <= c.ny;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const real wj = j == 0 ? w0 : m[j - 1];
        const real ej = j == V - 1 ? e0 : m[j + 1];
        const real v = update(m[j], wj, ej, s[j], n[j], c.wc, c.wx, c.wy);
        const bool in = row_in && c.col_in[j];
        o[j] = in ? v : m[j];
        if (RES && in) rmax = max_abs_diff(rmax, v, m[j]);
    }
}

// 4. One step in place: registers rows first, then the shared-memory rows.
template <bool RES>
__device__ __forceinline__ void march(real (&reg)[RR][V], const real (&north)[V], const real (&south)[V], const int p,
                                      const chip_ctx& c, real& rmax)
{
    real s[V], m[V], n[V], o[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
        s[j] = north[j];
        m[j] = reg[0][j];
    }
#pragma unroll
    for (int r = 0; r < RR; ++r) {
        if (r + 1 < RR) {
#pragma unroll
            for (int j = 0; j < V; ++j) n[j] = reg[r + 1][j];
        } else if (c.rt > RR) {
            smem_get(n, RR, c);
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j) n[j] = south[j];
        }
        update_row<RES>(o, s, m, n, r, p, c, rmax);
#pragma unroll
        for (int j = 0; j < V; ++j) {
            s[j] = m[j];
            m[j] = n[j];
            reg[r][j] = o[j];
        }
    }
    for (int r = RR; r < c.rt; ++r) {
        if (r + 1 < c.rt) {
            smem_get(n, r + 1, c);
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j) n[j] = south[j];
        }
        update_row<RES>(o, s, m, n, r, p, c, rmax);
        put_smem_row(o, r, c);
#pragma unroll
        for (int j = 0; j < V; ++j) {
            s[j] = m[j];
            m[j] = n[j];
        }
    }
}

__device__ __forceinline__ void store_tile(real* out, const idx pitch, const real (&reg)[RR][V], const chip_ctx& c)
{
    bool all = true;
#pragma unroll
    for (int m = 0; m < V; ++m) all = all && c.col_in[m];
    for (int r = 0; r < c.rt && c.y0 + r <= c.ny; ++r) {
        real o[V];
        any_row(o, reg, r, c);
        real* q = out + (idx)(c.y0 + r) * pitch + c.x;
        if (all) {
            row_t t;
#pragma unroll
            for (int m = 0; m < V; ++m) t.e[m] = o[m];
#pragma unroll
            for (int v = 0; v < NV; ++v) reinterpret_cast<vec*>(q)[v] = t.v[v];
        } else {
#pragma unroll
            for (int m = 0; m < V; ++m)
                if (c.col_in[m]) q[m] = o[m];
        }
    }
}

__device__ __forceinline__ void load_tile(real (&reg)[RR][V], real (&north)[V], real (&south)[V], const real* u,
                                          const idx pitch, const chip_ctx& c)
{
#pragma unroll
    for (int r = 0; r < RR; ++r) load_field_row(reg[r], u, pitch, c.y0 + r, c);
    for (int r = RR; r < c.rt; ++r) {
        real o[V];
        load_field_row(o, u, pitch, c.y0 + r, c);
        put_smem_row(o, r, c);
    }
    load_field_row(north, u, pitch, c.y0 - 1, c);  // kept where there is no block above: the ghost row
    load_field_row(south, u, pitch, c.y0 + c.rt, c);
    if (c.tid == 0 && c.left < 0) {  // the ghost column (or zeros), both copies
        for (int r = 0; r < c.rt; ++r)
            col_at(c.col_w, c, 0, 0)[r] = col_at(c.col_w, c, 1, 0)[r] = field_at(u, pitch, c.y0 + r, c.x - 1, c);
    }
    if (c.tid == c.nt - 1 && c.right < 0) {
        for (int r = 0; r < c.rt; ++r)
            col_at(c.col_e, c, 0, c.nw - 1)[r] = col_at(c.col_e, c, 1, c.nw - 1)[r] =
                field_at(u, pitch, c.y0 + r, c.x + V, c);
    }
}

extern "C" __global__ void __launch_bounds__(NT, 1)
chip(real* __restrict__ out, const real* __restrict__ u, const idx pitch, const int ny, const int nx, const int rt,
     const int steps, real* __restrict__ hrow, real* __restrict__ hcol, unsigned* __restrict__ flags,
     rbits* __restrict__ resid, const real wc, const real wx, const real wy)
{
    BLOCK_SHARED(vec, shm);
    chip_ctx c;
    c.ny = ny;
    c.nx = nx;
    c.rt = rt;
    c.wc = wc;
    c.wx = wx;
    c.wy = wy;
    c.tid = threadIdx.x;
    c.lane = c.tid & 31;
    c.warp = c.tid >> 5;
    c.nt = blockDim.x;
    c.nw = c.nt >> 5;
    const int bx = blockIdx.x, by = blockIdx.y;
    c.b = by * gridDim.x + bx;
    c.up = by > 0 ? c.b - gridDim.x : -1;
    c.down = by + 1 < (int)gridDim.y ? c.b + gridDim.x : -1;
    c.left = bx > 0 ? c.b - 1 : -1;
    c.right = bx + 1 < (int)gridDim.x ? c.b + 1 : -1;
    c.y0 = 1 + by * rt;
    c.x = 1 + bx * c.nt * V + c.tid * V;
#pragma unroll
    for (int m = 0; m < V; ++m) c.col_in[m] = c.x + m <= nx;
    c.rows = shm;
    c.col_w = reinterpret_cast<real*>(shm + (rt > RR ? rt - RR : 0) * NV * c.nt);
    c.col_e = c.col_w + 2 * c.nw * rt;
    c.hrow = hrow;
    c.hcol = hcol;

    real reg[RR][V], north[V], south[V];
    load_tile(reg, north, south, u, pitch, c);
    real rmax = real(0);
    for (int t = 0; t < steps; ++t) {
        const int p = t & 1;
        publish(reg, p, c);
        meet(flags, (unsigned)t + 1, c);
        receive(north, south, p, c);
        if (resid && t == steps - 1) march<true>(reg, north, south, p, c, rmax);
        else march<false>(reg, north, south, p, c, rmax);
    }
    store_tile(out, pitch, reg, c);
    if (resid) warp_max_to(resid, rmax);
}
