// chip (variant `chip`): the whole field on chip for a whole batch of steps, one persistent launch.
//
// Defines: REAL, V (columns per thread), RR (tile rows each thread holds in registers), NT (threads per
// block, exactly: the launch's blockDim.x), RT (rows per tile: the launch's layout, compiled in so that
// the march is unrolled and every row's registers and shared-memory offsets are constants), LEVELS (levels a
// pass: 1, v6, described here; 2, v7, `run2` below, with its own options CHIP_RESID, CHIP_ALLFAST, SPRE).
//
// Tiles: a gx x gy grid of blocks, every block resident at once (cooperative launch; at most one per
// multiprocessor). Block (bx, by) owns interior rows y0 = 1 + by * RT .. y0 + RT - 1 and columns
// x0 = 1 + bx * NT * V .. (column 1 is 128-byte aligned, so every thread's V columns are 16-byte
// aligned). Thread t holds columns x0 + t * V .. + V - 1 of every tile row: rows 0 .. RG-1 in
// registers, rows RG .. RT-1 in its own slots of shared memory (nobody else reads them). Points
// outside the interior [1, ny] x [1, nx] keep their value: the ghost ring where a tile reaches it
// (loaded once), else zero; such points beyond the ring are never a neighbour of an interior point.
// A block whose rows and columns are all interior (every block of 2048^2) runs a copy of the code
// without the interior mask (FAST).
//
// One step, level t -> t + 1 (p = t % 2: the copy of everything exchanged that holds level t; level
// t + 1 goes to copy 1 - p):
//  1. each warp waits for the warps above and below it (same columns, blocks up / down) to have
//     published level t (their flag >= t + 1: even lanes poll up, odd lanes down, one acquire load
//     each), then reads their rows through L2 (__ldcg: L1 is not coherent). The first / last thread
//     of a block with a block to the left / right waits for that block's column flag and copies its
//     level-t column into shared memory (it alone reads it).
//  2. march down the tile, rows PRE first (1 .. PRE), then the tile's top and bottom rows (they need
//     the neighbours' rows), which are published at once (level t + 1, to global memory), then the
//     rest; REL rows later the warp releases its flag (= t + 2): the stores have reached L2 by then,
//     so the release's fence costs little. The bottom row's new values wait in registers until the
//     march has used its old ones. In the march each row's west / east neighbour comes by a warp
//     shuffle; a warp's lane 0 / 31 takes it from shared memory (what the neighbouring warp or the
//     block beside published) and publishes its own first / last column there (copy 1 - p).
//  3. one barrier (the columns exchanged between warps in shared memory); the threads publishing a
//     column to a block beside release that block-side column flag (= t + 2).
// Two copies suffice: a warp overwrites copy 1 - p of its rows (level t - 1 there) only after it
// waited for the neighbouring warps' flag t + 1, which they release after reading level t - 1; in
// shared memory, every access of step t comes before the barrier ending step t, and copy 1 - p is read
// only in step t + 1; the columns to blocks beside are written and waited for by the same threads.
// A physical side's halo is the field's ghost row or column (constant: loaded once, into both copies).
//
// The update and its term order are common.cu's (bitwise equal to numpy with --fmad=false). After
// the last step the interior is stored to `out`; with `resid` non-null the largest |level n - level
// n-1| over the interior is folded into *resid (the check's fused residual, as in wave.cu). At two
// levels a pass (run2), with `checks` non-null, also heat's checks inside the launch (NaN / Inf only:
// heat's checks ask nothing else): checks[j] becomes inf if level L = first + j * every has a NaN or Inf
// in the interior, for each such L up to n (below n, L - first and every even: the end of a pass); at one
// level a pass (run, v6) only at the last level (the backend ends a launch at each check).
//
// Flags (unsigned, zeroed before each launch): [blocks][NW] one per warp (its rows), then [blocks][2]
// one per block side (its west / east column). Each ends at steps + 1 (level 0 is published first).

#ifndef LEVELS
#define LEVELS 1  // levels a pass advances: 1 (v6, below) or 2 (v7, `run2`: one block across, tiles of 2+ rows)
#endif
constexpr int VW = 16 / (int)sizeof(real);  // elements per 16-byte vector
constexpr int NV = V / VW;                  // 16-byte vectors per thread and row
constexpr int NW = NT / 32;                 // warps per block
constexpr int NS = NW + 2;                  // column slots: one per warp, and the block's west and east outboxes
constexpr int RG = RR < RT ? RR : RT;       // tile rows in registers
constexpr int PRE = 1;                      // interior rows marched before the top and bottom rows
constexpr int REL = 4;                      // interior rows between publishing them and releasing the flag
static_assert(V % VW == 0, "V must be a multiple of the 16-byte vector width");
static_assert(RR >= 1 && RT >= 1, "at least one tile row, one in registers");
static_assert(NT % 32 == 0, "whole warps");

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

__device__ __forceinline__ unsigned flag_acquire(const unsigned* f)
{
#ifdef __CUDA_ARCH__
    unsigned got;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(got) : "l"(f) : "memory");
    return got;
#else
    return __atomic_load_n(f, __ATOMIC_ACQUIRE);
#endif
}

__device__ __forceinline__ void flag_wait(const unsigned* f, const unsigned v)
{
    while (flag_acquire(f) < v) {
#ifndef __CUDA_ARCH__
        emu_yield();
#endif
    }
}

struct alignas(2 * sizeof(real)) pair2 {  // two neighbouring columns of a row (v7's published warp edges)
    real x, y;
};

struct chip_ctx {
    int ny, nx;       // interior rows and columns
    int y0, x;        // first tile row; this thread's first column
    int tid, lane, warp;
    int b, up, down, left, right;  // this block and its neighbours (-1: none, a physical side)
    bool col_in[V];   // column x + m is interior
    vec* rows;        // shared: this thread's tile rows RG .. RT-1 (slot ((r - RG) * NV + q) * NT + tid)
    real* col_w;      // shared: [2][NS][RT] slot w + 1: the value west of warp w's lane 0, per row
    real* col_e;      // shared: [2][NS][RT] slot w + 1: the value east of warp w's lane 31, per row
    vec* hrow;        // global: [2][blocks][2 (top, bottom)][NT * NV], this thread's first vector; where a
                      // side is physical, its slot holds the ghost row instead (both copies)
    real* hcol;       // global: [2][blocks][2 (west, east)][RT]
    unsigned* flags;  // global: [blocks][NW] warps' row flags, then [blocks][2] column flags
    int north, south; // the slots (block * 2 + side) of the rows above and below the tile in hrow
    real wc, wx, wy;
#if LEVELS == 2
    const pair2* pin0;  // lanes 0 / 31: the neighbour's published column pairs (copy 0; copy 1 PCOPY later)
    pair2* pout0;       // lanes 0 / 31: where this thread's first / last two columns go (copy 0)
    pair2* pub;         // shared: the published pairs of every warp (pub_at)
    const real* near0;  // every lane: lane 0's / 31's value just outside the band in pin0's pairs (lanes 1-30: lane 31's)
    real* apr;          // shared: [2 (W, E)][RT] this warp's level 2k + 1 just outside its band (aprons)
    const real* apr_own; // every lane: lane 0's / 31's side of apr (lanes 1-30: lane 0's)
#endif
};

__device__ __forceinline__ real* col_slot(real* base, const int copy, const int slot)
{
    return base + (copy * NS + slot) * RT;
}

// Lanes 0 / 31: where the value west / east of this thread's columns is (copy p: level p's parity)...
__device__ __forceinline__ const real* edge_in(const chip_ctx& c, const int p)
{
    return col_slot(c.lane == 31 ? c.col_e : c.col_w, p, c.warp + 1);
}

// ... and where this thread's first / last column goes (the block's outbox west of warp 0 / east of the last).
__device__ __forceinline__ real* edge_out(const chip_ctx& c, const int q)
{
    return c.lane == 0 ? col_slot(c.col_e, q, c.warp) : col_slot(c.col_w, q, c.warp + 2);
}

__device__ __forceinline__ int blocks() { return gridDim.x * gridDim.y; }

__device__ __forceinline__ vec* hrow_at(const chip_ctx& c, const int p, const int b, const int side)
{
    return c.hrow + ((idx)(p * blocks() + b) * 2 + side) * (NT * NV);
}

__device__ __forceinline__ real* hcol_at(const chip_ctx& c, const int p, const int b, const int side)
{
    return c.hcol + ((idx)(p * blocks() + b) * 2 + side) * RT;
}

__device__ __forceinline__ unsigned* row_flag(const chip_ctx& c, const int b, const int w)
{
    return c.flags + b * NW + w;
}

__device__ __forceinline__ unsigned* col_flag(const chip_ctx& c, const int b, const int side)
{
    return c.flags + blocks() * NW + b * 2 + side;
}

// The first / last thread sends the block's outbox (copy q) to its west / east column in global memory
// and releases that column's flag.
__device__ __forceinline__ void send_columns(const chip_ctx& c, const int q, const unsigned v)
{
    if (c.tid == 0 && c.left >= 0) {
        const real* from = col_slot(c.col_e, q, 0);
        real* to = hcol_at(c, q, c.b, 0);
#pragma unroll 4
        for (int r = 0; r < RT; ++r) __stcg(to + r, from[r]);
        flag_release(col_flag(c, c.b, 0), v);
    }
    if (c.tid == NT - 1 && c.right >= 0) {
        const real* from = col_slot(c.col_w, q, NW + 1);
        real* to = hcol_at(c, q, c.b, 1);
#pragma unroll 4
        for (int r = 0; r < RT; ++r) __stcg(to + r, from[r]);
        flag_release(col_flag(c, c.b, 1), v);
    }
}

__device__ __forceinline__ void unpack(real (&o)[V], const row_t& t)
{
#pragma unroll
    for (int m = 0; m < V; ++m) o[m] = t.e[m];
}

__device__ __forceinline__ void copy_row(real (&o)[V], const real (&a)[V])
{
#pragma unroll
    for (int m = 0; m < V; ++m) o[m] = a[m];
}

// Tile row r (a constant after unrolling: registers by constant index, shared memory at a constant offset).
__device__ __forceinline__ void get_row(real (&o)[V], const real (&reg)[RG][V], const int r, const chip_ctx& c)
{
    if (r < RG) {
#pragma unroll
        for (int k = 0; k < RG; ++k)
            if (k == r) copy_row(o, reg[k]);
    } else {
        row_t t;
#pragma unroll
        for (int q = 0; q < NV; ++q) t.v[q] = c.rows[((r - RG) * NV + q) * NT];
        unpack(o, t);
    }
}

__device__ __forceinline__ void put_row(real (&reg)[RG][V], const real (&o)[V], const int r, const chip_ctx& c)
{
    if (r < RG) {
#pragma unroll
        for (int k = 0; k < RG; ++k)
            if (k == r) copy_row(reg[k], o);
    } else {
        row_t t;
#pragma unroll
        for (int m = 0; m < V; ++m) t.e[m] = o[m];
#pragma unroll
        for (int q = 0; q < NV; ++q) c.rows[((r - RG) * NV + q) * NT] = t.v[q];
    }
}

__device__ __forceinline__ void load_vecs(real (&o)[V], const vec* h)
{
    row_t t;
#pragma unroll
    for (int q = 0; q < NV; ++q) t.v[q] = __ldcg(h + q);
    unpack(o, t);
}

__device__ __forceinline__ void store_vecs(vec* h, const real (&o)[V])
{
    row_t t;
#pragma unroll
    for (int m = 0; m < V; ++m) t.e[m] = o[m];
#pragma unroll
    for (int q = 0; q < NV; ++q) __stcg(h + q, t.v[q]);
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
    unpack(o, t);
}

__device__ __forceinline__ real field_at(const real* u, const idx pitch, const int y, const int x, const chip_ctx& c)
{
    return y <= c.ny + 1 && x <= c.nx + 1 ? u[(idx)y * pitch + x] : real(0);
}

// This thread's published column value of a row: lane 0 its first column, lane 31 its last.
__device__ __forceinline__ real edge_of(const real (&o)[V], const chip_ctx& c)
{
    return c.lane == 0 ? o[0] : o[V - 1];
}

// Row r of level t + 1 from rows s (r - 1), m (r) and n (r + 1) of level t (kept where not interior);
// lanes 0 / 31 publish their first / last column of it.
template <bool FAST, bool RES>
__device__ __forceinline__ void update_row(real (&o)[V], const real (&s)[V], const real (&m)[V], const real (&n)[V],
                                           const int r, const real* ein, real* eout, const chip_ctx& c, real& rmax)
{
    real edge = real(0);
    if (c.lane == 0 || c.lane == 31) edge = ein[r];
    real w0 = __shfl_up_sync(FULL, m[V - 1], 1);
    real e0 = __shfl_down_sync(FULL, m[0], 1);
    if (c.lane == 0) w0 = edge;
    if (c.lane == 31) e0 = edge;
    const bool row_in = FAST || c.y0 + r <= c.ny;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const real wj = j == 0 ? w0 : m[j - 1];
        const real ej = j == V - 1 ? e0 : m[j + 1];
        const real v = update(m[j], wj, ej, s[j], n[j], c.wc, c.wx, c.wy);
        if (FAST) {
            o[j] = v;
            if (RES) rmax = max_abs_diff(rmax, v, m[j]);
        } else {
            const bool in = row_in && c.col_in[j];
            o[j] = in ? v : m[j];
            if (RES && in) rmax = max_abs_diff(rmax, v, m[j]);
        }
    }
    if (c.lane == 0 || c.lane == 31) eout[r] = edge_of(o, c);
}

__device__ __forceinline__ void release_rows(const chip_ctx& c, const unsigned v)
{
    __syncwarp();
    if (c.lane == 0) flag_release(row_flag(c, c.b, c.warp), v);
}

// One step in place, level t -> t + 1 (see the top of the file).
template <bool FAST, bool RES>
__device__ __forceinline__ void step(real (&reg)[RG][V], const int t,
                                     const chip_ctx& c, real& rmax)
{
    const int p = t & 1, q = p ^ 1;
    // 1. the neighbours' level t
    if (c.up >= 0 || c.down >= 0) {
        const unsigned* f = (c.lane & 1) ? (c.down >= 0 ? row_flag(c, c.down, c.warp) : nullptr)
                                         : (c.up >= 0 ? row_flag(c, c.up, c.warp) : nullptr);
        bool ready;
        do {
            ready = f == nullptr || flag_acquire(f) >= (unsigned)t + 1;
#ifndef __CUDA_ARCH__
            if (!ready) emu_yield();
#endif
        } while (!__all_sync(FULL, ready));
        __syncwarp();
    }
    // (a physical side's ghost row waits in this block's own slot for that side, loaded once)
    real north[V], south[V];
    load_vecs(north, c.hrow + (idx)(p * blocks() * 2 + c.north) * (NT * NV));
    load_vecs(south, c.hrow + (idx)(p * blocks() * 2 + c.south) * (NT * NV));
    if (c.tid == 0 && c.left >= 0) {
        flag_wait(col_flag(c, c.left, 1), (unsigned)t + 1);
        const real* h = hcol_at(c, p, c.left, 1);
        real* to = col_slot(c.col_w, p, 1);
#pragma unroll 4
        for (int r = 0; r < RT; ++r) to[r] = __ldcg(h + r);
    }
    if (c.tid == NT - 1 && c.right >= 0) {
        flag_wait(col_flag(c, c.right, 0), (unsigned)t + 1);
        const real* h = hcol_at(c, p, c.right, 0);
        real* to = col_slot(c.col_e, p, NW);
#pragma unroll 4
        for (int r = 0; r < RT; ++r) to[r] = __ldcg(h + r);
    }
    const real* ein = edge_in(c, p);
    real* eout = edge_out(c, q);

    // 2. the march
    // interior rows marched before the top and bottom rows (row RT-2 must still be old then), and before
    // the release; at least one iteration, for the edge rows
    constexpr int pre = RT >= 3 ? (PRE < RT - 3 ? PRE : RT - 3) : 0;
    constexpr int rel = pre + REL < RT - 2 ? pre + REL : RT - 2;
    constexpr int last = RT >= 3 ? RT - 2 : 1;
    real s[V], m[V], n[V], o[V], old1[V], bottom[V];
    bool released = false;
    if (RT >= 3) {
        get_row(s, reg, 0, c);
        get_row(m, reg, 1, c);
        copy_row(old1, m);
    }
#pragma unroll
    for (int r = 1; r <= last; ++r) {
        if (r == 1 + pre) {  // the top and bottom rows, published at once
            real a[V], b0[V];
            get_row(a, reg, 0, c);
            if (RT >= 3) copy_row(b0, old1);
            else if (RT == 2) get_row(b0, reg, 1, c);
            else copy_row(b0, south);
            update_row<FAST, RES>(o, north, a, b0, 0, ein, eout, c, rmax);
            put_row(reg, o, 0, c);
            if (c.up >= 0) store_vecs(hrow_at(c, q, c.b, 0), o);
            if (RT >= 2) {
                real a2[V], s2[V];
                get_row(s2, reg, RT >= 2 ? RT - 2 : 0, c);  // old: the march has not reached it
                if (RT == 2) copy_row(s2, a);               // (RT == 2: row 0, just overwritten)
                get_row(a2, reg, RT - 1, c);
                update_row<FAST, RES>(bottom, s2, a2, south, RT - 1, ein, eout, c, rmax);
            }
            if (c.down >= 0) store_vecs(hrow_at(c, q, c.b, 1), RT >= 2 ? bottom : o);
        }
        if (r > RT - 2) break;
        get_row(n, reg, r + 1, c);  // old (row RT-1 is written after the march)
        update_row<FAST, RES>(o, s, m, n, r, ein, eout, c, rmax);
        put_row(reg, o, r, c);
        copy_row(s, m);
        copy_row(m, n);
        if (r == rel) {
            release_rows(c, (unsigned)t + 2);
            released = true;
        }
    }
    if (RT >= 2) put_row(reg, bottom, RT - 1, c);
    if (!released) release_rows(c, (unsigned)t + 2);
}

// p + n (elements), hidden from the optimiser: the addresses of the tile's rows are recomputed where they
// are used instead of being kept in registers (spilled) across the steps from load_tile to store_tile.
template <typename T> __device__ __forceinline__ T* opaque_add(T* p, const idx n)
{
    T* q = p + n;
#ifdef __CUDA_ARCH__
    asm volatile("" : "+l"(q));
#endif
    return q;
}

template <bool FAST>
__device__ __forceinline__ void store_tile(real* out, const idx pitch, const real (&reg)[RG][V], const chip_ctx& c)
{
    bool all = true;
#pragma unroll
    for (int m = 0; m < V; ++m) all = all && c.col_in[m];
    int y0 = c.y0;
#ifdef __CUDA_ARCH__
    asm volatile("" : "+r"(y0));  // (nor y0 * pitch, from load_tile)
#endif
    real* q = opaque_add(out, (idx)y0 * pitch + c.x);
#pragma unroll
    for (int r = 0; r < RT; ++r) {
        if (!FAST && c.y0 + r > c.ny) break;
        real o[V];
        get_row(o, reg, r, c);
        if (FAST || all) {
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
        q = opaque_add(q, pitch);
    }
}

// A heat check inside a launch: *word = inf (bits) if a point of the tile's interior is NaN or Inf now
// (x - x is 0 for every finite x), else left as it is (zeroed before the launch). Between passes, on this
// thread's own rows (registers and its shared-memory slots), as store_tile reads them.
template <bool FAST>
__device__ __forceinline__ void flag_nonfinite(rbits* word, const real (&reg)[RG][V], const chip_ctx& c)
{
    bool bad = false;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
        if (!FAST && c.y0 + r > c.ny) break;
        real o[V];
        get_row(o, reg, r, c);
#pragma unroll
        for (int m = 0; m < V; ++m) bad = bad || ((FAST || c.col_in[m]) && !(o[m] - o[m] == real(0)));
    }
    warp_max_to(word, bad ? inf_of(real(0)) : real(0));
}

// The tile, the ghost columns (both copies) where no block is left / right; then level 0 published and
// the flags released (= 1).
__device__ __forceinline__ void load_tile(real (&reg)[RG][V], const real* u, const idx pitch, const chip_ctx& c)
{
    const real* row = opaque_add(u, (idx)c.y0 * pitch);
#pragma unroll
    for (int r = 0; r < RT; ++r) {
        real o[V];
        load_field_row(o, row, 0, c.y0 + r, c);
        row = opaque_add(row, pitch);
        put_row(reg, o, r, c);
        if (c.lane == 0 || c.lane == 31) edge_out(c, 0)[r] = edge_of(o, c);
        if (r == 0 && c.up >= 0) store_vecs(hrow_at(c, 0, c.b, 0), o);
        if (r == RT - 1 && c.down >= 0) store_vecs(hrow_at(c, 0, c.b, 1), o);
    }
    for (int side = 0; side < 2; ++side) {  // a physical side's ghost row (or zeros) in the slot no one reads
        if ((side == 0 ? c.up : c.down) >= 0) continue;
        real o[V];
        load_field_row(o, u, pitch, side == 0 ? c.y0 - 1 : c.y0 + RT, c);
        store_vecs(hrow_at(c, 0, c.b, side), o);
        store_vecs(hrow_at(c, 1, c.b, side), o);
    }
    if (c.tid == 0 && c.left < 0) {
        for (int r = 0; r < RT; ++r)
            col_slot(c.col_w, 0, 1)[r] = col_slot(c.col_w, 1, 1)[r] = field_at(u, pitch, c.y0 + r, c.x - 1, c);
    }
    if (c.tid == NT - 1 && c.right < 0) {
        for (int r = 0; r < RT; ++r)
            col_slot(c.col_e, 0, NW)[r] = col_slot(c.col_e, 1, NW)[r] = field_at(u, pitch, c.y0 + r, c.x + V, c);
    }
    __syncthreads();
    if (c.lane == 0) flag_release(row_flag(c, c.b, c.warp), 1u);
    send_columns(c, 0, 1u);
}

template <bool FAST>
__device__ __forceinline__ void run(real* out, const real* u, const idx pitch, const int steps, rbits* resid,
                                    rbits* checks, const int first, const int every, const chip_ctx& c)
{
    real reg[RG][V];
    load_tile(reg, u, pitch, c);
    real rmax = real(0);
    const int plain = resid ? steps - 1 : steps;  // steps without the residual
    for (int t = 0; t < steps; ++t) {
        if (t < plain) step<FAST, false>(reg, t, c, rmax);
        else step<false, true>(reg, t, c, rmax);  // the masked code: equal where FAST, and one copy fewer
        __syncthreads();
        send_columns(c, (t + 1) & 1, (unsigned)t + 2);
    }
    if (checks != nullptr && steps >= first && (steps - first) % every == 0)  // a heat check at the last level
        flag_nonfinite<FAST>(checks + (steps - first) / every, reg, c);
    store_tile<FAST>(out, pitch, reg, c);
    if (resid) warp_max_to(resid, rmax);
}

#if LEVELS == 2
// ---- v7 (v8: aprons by the whole warp): two levels a pass (LEVELS == 2) ---------------------------------
// Layouts of one block across (gx == 1: every block's row strip spans the grid, neighbours only above
// and below) and tiles of at least 2 rows. Pass k advances level 2k to 2k + 2 (p = k % 2: the copy of
// everything exchanged that holds level 2k); a thread reads each tile row once and writes it once a
// pass, as a wavefront down the tile: at step r (r = -1 .. RT) level 2k + 1 of row r from level 2k
// rows r - 1 .. r + 1, then level 2k + 2 of row r - 1 from level 2k + 1 rows r - 2 .. r (in registers),
// stored over row r - 1 (whose level 2k is no longer needed).
// Overlapped aprons, so that nothing is exchanged inside a pass:
//  - rows: each block publishes its top two and bottom two rows of level 2k (hrow, [2][blocks][4]:
//    rows 0, 1, RT - 2, RT - 1); the blocks below / above read them as rows -2, -1 / RT, RT + 1 and
//    compute level 2k + 1 of rows -1 and RT themselves (redundantly; kept where not interior).
//  - columns: lanes 0 / 31 of each warp publish the warp's first / last two columns of every row into
//    shared memory (pub, [2 copies][W, E][NW + 2 slots][RT + 2 rows]); at the start of the next pass each
//    warp computes level 2k + 1 of the column just outside its band on both sides from them, all rows at
//    once, a lane a point (`aprons`, again redundantly; v8: v7 had lanes 0 / 31 compute it row by row, a
//    whole warp instruction a point), so level 2k + 2 of the band needs nothing from the neighbour during
//    the pass. Inside the march every lane reads these values with unconditional shared loads (no
//    divergent branch in the unrolled rows). The
//    value at rows -1 and RT just outside the band comes from the published row in global memory (the
//    neighbouring thread's columns), at a physical side from the ghost slots (0 of E, NW + 1 of W),
//    filled once with the ghost columns.
// Synchronisation: one barrier a pass (the pub copies), then thread 0 releases the block's flag
// (flags[b] = k + 2: level 2k + 2 published). Every lane waits (acquire) for the block above (flag >=
// k + 1) at the start of pass k and for the block below a few rows before the end (SPRE rows before it
// needs rows RT and RT + 1). Two copies suffice: the top rows of copy 1 - p are overwritten only after
// the block above released k + 1, i.e. after it read them (as its rows RT, RT + 1 in pass k - 1); the
// bottom rows only after the wait for the block below, likewise.
// An odd step count ends with one single-level pass (pass1) from the same published data. With `resid`
// the last pass folds max |level n - level n-1| (both levels are at hand there). Compile-time options
// (the backend's): CHIP_RESID 0 leaves the residual's pass out (a second module serves the launches
// with `resid`), CHIP_ALLFAST 1 compiles only the code without the mask (every tile interior); both
// keep the hot module's registers (float64: 128) from spilling into the march.
constexpr int PR = RT + 2;  // rows of a column slot: -1 .. RT
#ifndef CHIP_RESID
#define CHIP_RESID 1  // 0: compiled without the residual's pass (the backend compiles one module of each)
#endif
#ifndef CHIP_ALLFAST
#define CHIP_ALLFAST 0  // 1: the layout's tiles are all interior, only the code without the mask is compiled
#endif
#ifndef SPRE
#define SPRE 2  // rows before needing rows RT and RT + 1 that the block below is waited for and they are loaded
#endif
static_assert(RT >= 2, "v7 needs tiles of at least two rows");
static_assert(V >= 2, "v7 publishes two columns a side");

constexpr int PCOPY = 2 * (NW + 2) * PR;  // pairs a copy of pub

__device__ __forceinline__ pair2* pub_at(pair2* base, const int copy, const int side, const int slot)
{
    return base + copy * PCOPY + (side * (NW + 2) + slot) * PR;
}

__device__ __forceinline__ const pair2* pin(const chip_ctx& c, const int copy) { return c.pin0 + copy * PCOPY; }
__device__ __forceinline__ pair2* pout(const chip_ctx& c, const int copy) { return c.pout0 + copy * PCOPY; }

__device__ __forceinline__ void setup2(chip_ctx& c, vec* shm)
{
    pair2* pub = reinterpret_cast<pair2*>(shm + (RT - RG) * NV * NT);
    c.pub = pub;
    c.pin0 = c.lane == 0 ? pub_at(pub, 0, 1, c.warp) : pub_at(pub, 0, 0, c.warp + 2);
    c.pout0 = c.lane == 0 ? pub_at(pub, 0, 0, c.warp + 1) : pub_at(pub, 0, 1, c.warp + 1);
    c.near0 = reinterpret_cast<const real*>(c.pin0) + (c.lane == 0 ? 1 : 0);  // lane 0: pair.y, else pair.x
    c.apr = reinterpret_cast<real*>(pub + 2 * PCOPY) + c.warp * 2 * RT;
    c.apr_own = c.apr + (c.lane == 31 ? RT : 0);
    c.north = c.up >= 0 ? c.up * 4 + 2 : c.b * 4;     // rows -2, -1: the block above's bottom rows, or own (unread)
    c.south = c.down >= 0 ? c.down * 4 : c.b * 4 + 2; // rows RT, RT + 1
}

__device__ __forceinline__ vec* hrow2(const chip_ctx& c, const int copy, const int slot)
{
    return c.hrow + (idx)(copy * blocks() * 4 + slot) * (NT * NV);
}

// The value just outside thread t's columns (west of its first, or east of its last) in a halo row (row -1
// or RT, pair slot i = 0 or PR - 1) whose vectors for thread t start at h: the thread beside's value, published
// to L2, or at the block's side the ghost slot of nb (the neighbour's pairs, copy p).
__device__ __forceinline__ real halo_beside(const vec* h, const int t, const bool east, const pair2* nb, const int i)
{
    if (east) return t < NT - 1 ? __ldcg(reinterpret_cast<const real*>(h) + V) : nb[i].x;
    return t > 0 ? __ldcg(reinterpret_cast<const real*>(h) - 1) : nb[i].y;
}

// The value just outside a published pair's band (the column beside it): .y west of the band, .x east.
__device__ __forceinline__ real near_in(const pair2& q, const bool east) { return east ? q.x : q.y; }

// Lanes 0 / 31: halo_beside for this thread (copy p; h: its vectors of the halo row).
__device__ __forceinline__ real halo_near(const chip_ctx& c, const vec* h, const int p, const int i)
{
    real v = real(0);
    if (c.lane == 0) v = halo_beside(h, c.tid, false, pin(c, p), i);
    if (c.lane == 31) v = halo_beside(h, c.tid, true, pin(c, p), i);
    return v;
}

__device__ __forceinline__ bool row_ok(const chip_ctx& c, const int r) { return c.y0 + r >= 1 && c.y0 + r <= c.ny; }

// One level of row r in the band: o from s (r - 1), m (r), n (r + 1); lanes 0 / 31 take the value just
// outside the band from `near`. Kept where the row (rin) or column is not interior.
template <bool FAST, bool RES>
__device__ __forceinline__ void level_row(real (&o)[V], const real (&s)[V], const real (&m)[V], const real (&n)[V],
                                          const real near, const bool rin, const chip_ctx& c, real& rmax)
{
    real w0 = __shfl_up_sync(FULL, m[V - 1], 1);
    real e0 = __shfl_down_sync(FULL, m[0], 1);
    if (c.lane == 0) w0 = near;
    if (c.lane == 31) e0 = near;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const real wj = j == 0 ? w0 : m[j - 1];
        const real ej = j == V - 1 ? e0 : m[j + 1];
        const real v = update(m[j], wj, ej, s[j], n[j], c.wc, c.wx, c.wy);
        const bool in = FAST ? rin : rin && c.col_in[j];
        o[j] = in ? v : m[j];
        if (RES && in) rmax = max_abs_diff(rmax, v, m[j]);
    }
}

// Level 2k + 1 just outside the warp's band (west of lane 0's columns, east of lane 31's) at tile rows
// r0 .. r1 - 1, one point a lane, into apr (kept where the row or that column is not interior). From level
// 2k: the neighbour's published pairs (the column just outside and the one beyond it), the warp's own (its
// first / last column) and, at rows -1 and RT, the halo rows (hm1: this thread's vectors of row -1, hrt: of
// row RT; the value just outside the band is the thread beside lane 0's / 31's, or the ghost slot).
template <bool FAST>
__device__ __forceinline__ void aprons(const chip_ctx& c, const int p, const int r0, const int r1, const vec* hm1,
                                       const vec* hrt)
{
    const int n = r1 - r0;
    for (int i = c.lane; i < 2 * n; i += 32) {
        const bool east = i >= n;
        const int r = r0 + (east ? i - n : i);
        const int vt = c.warp * 32 + (east ? 31 : 0);  // the thread whose band edge this point is beside
        const pair2* nb = east ? pub_at(c.pub, p, 0, c.warp + 2) : pub_at(c.pub, p, 1, c.warp);
        const pair2* own = east ? pub_at(c.pub, p, 1, c.warp + 1) : pub_at(c.pub, p, 0, c.warp + 1);
        const pair2 q = nb[r + 1];
        const real cm = near_in(q, east), cf = east ? q.y : q.x;
        const real cs = r > 0 ? near_in(nb[r], east) : halo_beside(hm1 + (vt - c.tid) * NV, vt, east, nb, 0);
        const real cn = r < RT - 1 ? near_in(nb[r + 2], east) : halo_beside(hrt + (vt - c.tid) * NV, vt, east, nb, PR - 1);
        const real ov = east ? own[r + 1].y : own[r + 1].x;
        const real v = update(cm, east ? ov : cf, east ? cf : ov, cs, cn, c.wc, c.wx, c.wy);
        const int xe = c.x + (vt - c.tid) * V + (east ? V : -1);  // the point's column
        const bool in = (FAST || row_ok(c, r)) && xe >= 1 && xe <= c.nx;
        c.apr[(east ? RT : 0) + r] = in ? v : cm;
    }
    __syncwarp();
}

template <bool FAST, bool RES>
__device__ __forceinline__ void pass2(real (&reg)[RG][V], const int k, const chip_ctx& c, real& rmax)
{
    const int p = k & 1, q = p ^ 1;
    if (c.up >= 0) flag_wait(c.flags + c.up, (unsigned)k + 1);
    const vec* hn1 = hrow2(c, p, c.north + 1);
    real s[V], m[V], n[V];         // level 2k: rows r - 1, r, r + 1
    real a[V], b[V], l1[V];        // level 2k + 1: rows r - 2, r - 1, r
    real sth[V], sth2[V];          // level 2k: rows RT, RT + 1
    load_vecs(s, hrow2(c, p, c.north));
    load_vecs(m, hn1);
    real em = halo_near(c, hn1, p, 0), en = real(0);  // edge lanes: level 2k just outside the band, rows r, r + 1
    real esth = real(0);                               // edge lanes: the same, row RT
    const real* near = c.near0 + p * PCOPY * 2;        // (pairs of two reals)
    aprons<FAST>(c, p, 0, RT - 1, hn1, hn1);           // rows 0 .. RT - 2 (row RT - 1 needs the block below)
    constexpr int sload = RT - 1 - SPRE > -1 ? RT - 1 - SPRE : -1;
#pragma unroll
    for (int r = -1; r <= RT; ++r) {
        if (r == sload) {
            if (c.down >= 0) flag_wait(c.flags + c.down, (unsigned)k + 1);
            const vec* hs = hrow2(c, p, c.south);
            load_vecs(sth, hs);
            load_vecs(sth2, hrow2(c, p, c.south + 1));
            esth = halo_near(c, hs, p, PR - 1);  // row RT
            aprons<FAST>(c, p, RT - 1, RT, hn1, hs);
        }
        // level 2k of row r + 1
        if (r + 1 <= RT - 1) {
            get_row(n, reg, r + 1, c);
            en = near[2 * (r + 2)];  // every lane loads (lanes 1-30 lane 31's): no branch
        } else if (r + 1 == RT) {
            copy_row(n, sth);
            en = esth;
        } else {
            copy_row(n, sth2);
        }
        // level 2k + 1 of row r (rows -1 and RT: the aprons; interior only where a block is beside)
        const bool rin = (r >= 0 && r <= RT - 1 && FAST) || row_ok(c, r);
        level_row<FAST, false>(l1, s, m, n, em, rin, c, rmax);
        // level 2k + 2 of row r - 1, stored over it and published
        if (r >= 1) {
            real o[V];
            const bool rin1 = FAST || row_ok(c, r - 1);
            level_row<FAST, RES>(o, a, b, l1, c.apr_own[r - 1], rin1, c, rmax);
            put_row(reg, o, r - 1, c);
            if (c.lane == 0) pout(c, q)[r] = pair2{o[0], o[1]};
            if (c.lane == 31) pout(c, q)[r] = pair2{o[V - 2], o[V - 1]};
            if (r - 1 <= 1 && c.up >= 0) store_vecs(hrow2(c, q, c.b * 4 + (r - 1)), o);
            if (r - 1 >= RT - 2 && c.down >= 0) store_vecs(hrow2(c, q, c.b * 4 + 2 + (r - 1 - (RT - 2))), o);
        }
        copy_row(s, m);
        copy_row(m, n);
        copy_row(a, b);
        copy_row(b, l1);
        em = en;
    }
}

// One level (the last of an odd count), level 2k -> 2k + 1, from the data pass k would use.
template <bool FAST, bool RES>
__device__ __forceinline__ void pass1(real (&reg)[RG][V], const int k, const chip_ctx& c, real& rmax)
{
    const int p = k & 1;
    if (c.up >= 0) flag_wait(c.flags + c.up, (unsigned)k + 1);
    if (c.down >= 0) flag_wait(c.flags + c.down, (unsigned)k + 1);
    const real* near = c.near0 + p * PCOPY * 2;
    real s[V], m[V], n[V];
    load_vecs(s, hrow2(c, p, c.north + 1));
    get_row(m, reg, 0, c);
#pragma unroll
    for (int r = 0; r < RT; ++r) {
        if (r + 1 <= RT - 1) get_row(n, reg, r + 1, c);
        else load_vecs(n, hrow2(c, p, c.south));
        const real em = near[2 * (r + 1)];  // lanes 0 / 31: just outside the band (every lane loads)
        real o[V];
        level_row<FAST, RES>(o, s, m, n, em, FAST || row_ok(c, r), c, rmax);
        put_row(reg, o, r, c);
        copy_row(s, m);
        copy_row(m, n);
    }
}

// The tile, level 0 published (rows to hrow copy 0, column pairs to pub copy 0), physical sides' ghost
// rows in the block's own unread slots and the ghost columns in the ghost slots (both copies); flag = 1.
__device__ __forceinline__ void load_tile2(real (&reg)[RG][V], const real* u, const idx pitch, const chip_ctx& c)
{
    const real* row = opaque_add(u, (idx)c.y0 * pitch);
#pragma unroll
    for (int r = 0; r < RT; ++r) {
        real o[V];
        load_field_row(o, row, 0, c.y0 + r, c);
        row = opaque_add(row, pitch);
        put_row(reg, o, r, c);
        if (c.lane == 0 || c.lane == 31) {
            pair2 e;
            e.x = c.lane == 0 ? o[0] : o[V - 2];
            e.y = c.lane == 0 ? o[1] : o[V - 1];
            pout(c, 0)[r + 1] = e;
        }
        if (r <= 1 && c.up >= 0) store_vecs(hrow2(c, 0, c.b * 4 + r), o);
        if (r >= RT - 2 && c.down >= 0) store_vecs(hrow2(c, 0, c.b * 4 + 2 + (r - (RT - 2))), o);
    }
    for (int j = 0; j < 2; ++j) {  // a physical side's rows -2, -1 / RT, RT + 1 (zeros beyond the ring)
        real o[V];
        if (c.up < 0) {
            if (j == 0) {
#pragma unroll
                for (int m = 0; m < V; ++m) o[m] = real(0);
            } else {
                load_field_row(o, u, pitch, c.y0 - 1, c);
            }
            store_vecs(hrow2(c, 0, c.b * 4 + j), o);
            store_vecs(hrow2(c, 1, c.b * 4 + j), o);
        }
        if (c.down < 0) {
            load_field_row(o, u, pitch, c.y0 + RT + j, c);
            store_vecs(hrow2(c, 0, c.b * 4 + 2 + j), o);
            store_vecs(hrow2(c, 1, c.b * 4 + 2 + j), o);
        }
    }
    if (c.tid == 0) {  // the ghost column west of the block (x0 - 1), rows -1 .. RT
        for (int i = 0; i < PR; ++i) {
            pair2 e;
            e.x = real(0);
            e.y = field_at(u, pitch, c.y0 - 1 + i, c.x - 1, c);
            const_cast<pair2*>(pin(c, 0))[i] = e;
            const_cast<pair2*>(pin(c, 1))[i] = e;
        }
    }
    if (c.tid == NT - 1) {  // east of the block (x0 + NT * V)
        for (int i = 0; i < PR; ++i) {
            pair2 e;
            e.x = field_at(u, pitch, c.y0 - 1 + i, c.x + V, c);
            e.y = real(0);
            const_cast<pair2*>(pin(c, 0))[i] = e;
            const_cast<pair2*>(pin(c, 1))[i] = e;
        }
    }
    __syncthreads();
    if (c.tid == 0) {
        __threadfence();
        flag_release(c.flags + c.b, 1u);
    }
}

template <bool FAST>
__device__ __forceinline__ void run2(real* out, const real* u, const idx pitch, const int steps, rbits* resid,
                                     rbits* checks, const int first, const int every, const chip_ctx& c)
{
    real reg[RG][V];
    load_tile2(reg, u, pitch, c);
    real rmax = real(0);
    const int passes = steps / 2;
    const bool odd = steps & 1;
#if CHIP_RESID
    const bool res = resid != nullptr;
#else
    const bool res = false;  // (compiled without the residual: `resid` and `checks` are ignored)
#endif
    for (int k = 0; k < passes; ++k) {
#if CHIP_RESID
        if (res && !odd && k == passes - 1) pass2<FAST && CHIP_ALLFAST, true>(reg, k, c, rmax);
        else
#endif
            pass2<FAST, false>(reg, k, c, rmax);
        __syncthreads();
        if (c.tid == 0) flag_release(c.flags + c.b, (unsigned)k + 2);  // (release: cumulative over the barrier)
        const int lev = 2 * k + 2;  // a heat check inside the launch (its own rows: after the release)
        if (checks != nullptr && lev < steps && lev >= first && (lev - first) % every == 0)
            flag_nonfinite<FAST>(checks + (lev - first) / every, reg, c);
    }
    if (odd) {
#if CHIP_RESID
        if (res) pass1<FAST && CHIP_ALLFAST, true>(reg, passes, c, rmax);
        else
#endif
            pass1<FAST, false>(reg, passes, c, rmax);
        if (c.tid == 0) flag_release(c.flags + c.b, (unsigned)passes + 2);  // (nothing published: the count)
    }
    if (checks != nullptr && steps >= first && (steps - first) % every == 0)  // a check at the last level
        flag_nonfinite<FAST>(checks + (steps - first) / every, reg, c);
    store_tile<FAST>(out, pitch, reg, c);
    if (res) warp_max_to(resid, rmax);
}
#endif

extern "C" __global__ void __launch_bounds__(NT, 1)
chip(real* __restrict__ out, const real* __restrict__ u, const idx pitch, const int ny, const int nx, const int rt,
     const int steps, real* __restrict__ hrow, real* __restrict__ hcol, unsigned* __restrict__ flags,
     rbits* __restrict__ resid, rbits* __restrict__ checks, const int first, const int every, const real wc,
     const real wx, const real wy)
{
    (void)rt;  // == RT (compiled in)
    BLOCK_SHARED(vec, shm);
    chip_ctx c;
    c.ny = ny;
    c.nx = nx;
    c.wc = wc;
    c.wx = wx;
    c.wy = wy;
    c.tid = threadIdx.x;
    c.lane = c.tid & 31;
    c.warp = c.tid >> 5;
    const int bx = blockIdx.x, by = blockIdx.y;
    c.b = by * gridDim.x + bx;
    c.up = by > 0 ? c.b - gridDim.x : -1;
    c.down = by + 1 < (int)gridDim.y ? c.b + gridDim.x : -1;
    c.left = bx > 0 ? c.b - 1 : -1;
    c.right = bx + 1 < (int)gridDim.x ? c.b + 1 : -1;
    c.y0 = 1 + by * RT;
    const int x0 = 1 + bx * NT * V;
    c.x = x0 + c.tid * V;
#pragma unroll
    for (int m = 0; m < V; ++m) c.col_in[m] = c.x + m <= nx;
    c.rows = shm + c.tid;
    c.col_w = reinterpret_cast<real*>(shm + (RT - RG) * NV * NT);
    c.col_e = c.col_w + 2 * NS * RT;
    c.hrow = reinterpret_cast<vec*>(hrow) + c.tid * NV;
    c.hcol = hcol;
    c.flags = flags;
    c.north = c.up >= 0 ? c.up * 2 + 1 : c.b * 2;  // a physical side: this block's own slot
    c.south = c.down >= 0 ? c.down * 2 : c.b * 2 + 1;
    const bool fast = c.y0 + RT - 1 <= ny && x0 + NT * V - 1 <= nx;
#if LEVELS == 2
    setup2(c, shm);
#if CHIP_ALLFAST
    (void)fast;  // every block's rows and columns are interior (the layout's)
    run2<true>(out, u, pitch, steps, resid, checks, first, every, c);
#else
    if (fast) run2<true>(out, u, pitch, steps, resid, checks, first, every, c);
    else run2<false>(out, u, pitch, steps, resid, checks, first, every, c);
#endif
#else
    if (fast) run<true>(out, u, pitch, steps, resid, checks, first, every, c);
    else run<false>(out, u, pitch, steps, resid, checks, first, every, c);
#endif
}
