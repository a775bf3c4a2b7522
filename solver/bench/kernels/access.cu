// `stencil bench access` on the GPU: read every element of x (int64) once per pass in a given order and add
// them up (the sum is returned, so the loads cannot be removed). Grid-stride over positions k; the
// position is mapped to an element index, so adjacent threads of a warp read adjacent positions:
//   visit:  i(k) = ((k & (per - 1)) << log2s) | (k >> log2per), with per = n >> log2s (n and the
//           stride s = 1 << log2s powers of two). s = 1 is contiguous (coalesced: a warp reads 32
//           adjacent elements); s > 1 puts adjacent threads s elements apart; the column-major
//           traversal of a (rows x cols) array is s = cols.
//   gather: i(k) = index[k], a random permutation made on the host before timing.
// Each thread accumulates in a register, each warp adds its 32 partials by shuffles and lane 0 does
// one atomicAdd. Integer sums are exact, so every order gives exactly passes x sum(x).
#ifndef BLOCK
#define BLOCK 256
#endif

__device__ void warp_add(long long acc, unsigned long long* total)
{
    for (int off = 16; off > 0; off >>= 1) {
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(total, (unsigned long long)acc);
    }
}

extern "C" __global__ void visit(const long long* __restrict__ x, unsigned long long* total, const unsigned long long n,
                                 const int log2s, const int log2per, const int passes)
{
    const unsigned long long mask = (n >> log2s) - 1ull;
    const unsigned long long step = (unsigned long long)gridDim.x * BLOCK;
    long long acc = 0;
    for (int p = 0; p < passes; ++p) {
        for (unsigned long long k = (unsigned long long)blockIdx.x * BLOCK + threadIdx.x; k < n; k += step) {
            acc += x[((k & mask) << log2s) | (k >> log2per)];
        }
    }
    warp_add(acc, total);
}

extern "C" __global__ void gather(const long long* __restrict__ x, const int* __restrict__ index,
                                  unsigned long long* total,
                                  const unsigned long long n, const int passes)
{
    const unsigned long long step = (unsigned long long)gridDim.x * BLOCK;
    long long acc = 0;
    for (int p = 0; p < passes; ++p) {
        for (unsigned long long k = (unsigned long long)blockIdx.x * BLOCK + threadIdx.x; k < n; k += step) {
            acc += x[index[k]];
        }
    }
    warp_add(acc, total);
}
