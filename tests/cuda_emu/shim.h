// A CPU stand-in for the few CUDA features the wave kernel uses, so that its index logic, guards and
// rounding can be checked with g++ where no GPU is (tests/test_wave_emulated.py). One std::thread per
// lane; a warp's 32 threads meet at a barrier around every shuffle (the kernel keeps shuffles in
// warp-uniform control flow, which this relies on, as the hardware does with a full mask).
// Not a GPU: it says nothing about speed, and a real GPU run is still the test that counts.
#pragma once
#include <barrier>
#include <cstring>
#include <mutex>
#include <algorithm>

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(n)

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
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
inline long long __double_as_longlong(double f) { long long i; std::memcpy(&i, &f, 8); return i; }
template <typename T> inline T atomicMax(T* p, T v) {
    std::lock_guard<std::mutex> g(atomic_lock);
    T old = *p;
    if (v > old) *p = v;
    return old;
}
using std::min;
using std::max;
