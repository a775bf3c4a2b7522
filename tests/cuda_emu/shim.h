// A CPU stand-in for the few CUDA features the wave and chip kernels use, so that their index logic,
// guards and rounding can be checked with g++ where no GPU is (tests/test_wave_emulated.py,
// tests/test_chip_emulated.py). One std::thread per lane; a warp's 32 threads meet at a barrier around
// every shuffle (the kernels keep shuffles in warp-uniform control flow, which this relies on, as the
// hardware does with a full mask). Blocks: __syncthreads is a barrier of the block's threads, dynamic
// shared memory one buffer per block (emu_block_shared), static __shared__ arrays one buffer for all
// (the wave driver runs one warp at a time, and each warp uses its own part); the chip driver runs
// every thread of every block at once, so flags between blocks (atomics) work as on the GPU.
// Asynchronous copies (cp.async) happen at once. Not a GPU: it says nothing about speed, nor about
// the GPU's memory ordering, and a real GPU run is still the test that counts.
#pragma once
#include <algorithm>
#include <cmath>
#include <atomic>
#include <barrier>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__ static

struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct dim3i { unsigned x, y, z; };

inline thread_local dim3i threadIdx, blockIdx;
inline dim3i gridDim, blockDim;

struct warp_sync {
    std::barrier<> bar{32};
    unsigned long long slot[32];
};
inline thread_local warp_sync* this_warp = nullptr;
inline std::mutex atomic_lock;

struct block_sync {
    explicit block_sync(unsigned threads, size_t smem_bytes) : bar(threads), smem(smem_bytes / 16 + 1) {}
    std::barrier<> bar;
    std::vector<double2> smem;  // 16-byte aligned
};
inline thread_local block_sync* this_block = nullptr;
inline void __syncthreads() { this_block->bar.arrive_and_wait(); }
template <typename T> inline T* emu_block_shared() { return reinterpret_cast<T*>(this_block->smem.data()); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void emu_yield() { std::this_thread::yield(); }
template <typename T> inline T __ldcg(const T* p) { return *p; }
template <typename T> inline void __stcg(T* p, T v) { *p = v; }

template <typename T> inline T shfl_idx(T v, int src) {
    const int lane = threadIdx.x & 31;
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof(T));
    this_warp->slot[lane] = b;
    this_warp->bar.arrive_and_wait();
    unsigned long long r = this_warp->slot[(src >= 0 && src < 32) ? src : lane];
    this_warp->bar.arrive_and_wait();
    T out;
    std::memcpy(&out, &r, sizeof(T));
    return out;
}
template <typename T> inline T __shfl_up_sync(unsigned, T v, unsigned d) {
    const int lane = threadIdx.x & 31;
    return shfl_idx(v, lane >= (int)d ? lane - (int)d : lane);
}
template <typename T> inline T __shfl_down_sync(unsigned, T v, unsigned d) {
    const int lane = threadIdx.x & 31;
    return shfl_idx(v, lane + (int)d < 32 ? lane + (int)d : lane);
}
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int m) {
    const int lane = threadIdx.x & 31;
    return shfl_idx(v, lane ^ m);
}
inline void __syncwarp(unsigned = 0xffffffffu) { this_warp->bar.arrive_and_wait(); }
inline bool __all_sync(unsigned, bool v)
{
    const int lane = threadIdx.x & 31;
    this_warp->slot[lane] = v;
    this_warp->bar.arrive_and_wait();
    bool all = true;
    for (int i = 0; i < 32; ++i) all = all && this_warp->slot[i] != 0;
    this_warp->bar.arrive_and_wait();
    return all;
}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
inline long long __double_as_longlong(double f) { long long i; std::memcpy(&i, &f, 8); return i; }
template <typename T> inline T atomicAdd(T* p, T v) {
    std::lock_guard<std::mutex> g(atomic_lock);
    T old = *p;
    *p = old + v;
    return old;
}
template <typename T> inline T atomicMax(T* p, T v) {
    std::lock_guard<std::mutex> g(atomic_lock);
    T old = *p;
    if (v > old) *p = v;
    return old;
}
using std::min;
using std::max;
using std::isfinite;  // (CUDA has it at global scope)
using std::pow;  // (nl.cu's power law: the host libm's pow, where the GPU has its own)
