// The first rungs of the ladder on the GPU: SAXPY and three ways to sum an array.
// Injected as defines at compile time (bench_gpu.py): ELEM (element type), BLOCK (threads per block,
// a power of two). Sums accumulate in double whatever ELEM is; atomicAdd on double needs sm_60+.
#ifndef ELEM
#define ELEM double
#endif
#ifndef BLOCK
#define BLOCK 256
#endif

// y[i] = a*x[i] + y[i], grid-stride. Compiled with --fmad=false: the multiply and the add are rounded
// apart, as on the CPU, so results match the host bitwise.
extern "C" __global__ void saxpy(const ELEM* __restrict__ x, ELEM* __restrict__ y, const ELEM a, const long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = a * x[i] + y[i];
    }
}

// The wrong way: every element is one atomicAdd on the same address, so the adds serialise in L2.
extern "C" __global__ void sum_atomic(const ELEM* __restrict__ x, double* total, const long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicAdd(total, (double)x[i]);
    }
}

// The textbook way: each thread accumulates a grid-stride slice in a register, the block adds its
// BLOCK partials in a shared-memory tree (log2(BLOCK) steps, a barrier between steps), and thread 0
// adds the block's sum to the total with one atomic: gridDim.x atomics in all.
extern "C" __global__ void sum_block(const ELEM* __restrict__ x, double* total, const long long n)
{
    __shared__ double part[BLOCK];
    const long long stride = (long long)gridDim.x * BLOCK;
    double acc = 0.0;
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride) {
        acc += (double)x[i];
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int k = BLOCK / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            part[threadIdx.x] += part[threadIdx.x + k];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(total, part[0]);
    }
}
