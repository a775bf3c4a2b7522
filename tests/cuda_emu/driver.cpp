// Runs one launch of the wave kernel on the CPU (see shim.h): every block, one warp at a time,
// 32 threads per warp. Built by tests/test_wave_emulated.py with the kernel's own -D defines.
#include "shim.h"
#include <thread>
#include <vector>
#include KERNEL_SOURCE

extern "C" void launch(real* out, const real* u, long long pitch, int r0, int r1, int c0, int c1, int o0, int o1,
                       int p0, int p1, int rows, void* resid, real wc, real wx, real wy, unsigned gx, unsigned gy, unsigned bx)
{
    gridDim = {gx, gy, 1};
    blockDim = {bx, 1, 1};
    for (unsigned by = 0; by < gy; ++by)
        for (unsigned b = 0; b < gx; ++b)
            for (unsigned w0 = 0; w0 < bx; w0 += 32) {
                warp_sync warp;
                std::vector<std::thread> lanes;
                for (unsigned t = w0; t < w0 + 32; ++t)
                    lanes.emplace_back([&, t] {
                        threadIdx = {t, 0, 0};
                        blockIdx = {b, by, 0};
                        this_warp = &warp;
                        wave(out, u, pitch, r0, r1, c0, c1, o0, o1, p0, p1, rows, (rbits*)resid, wc, wx, wy);
                    });
                for (auto& l : lanes) l.join();
            }
}
