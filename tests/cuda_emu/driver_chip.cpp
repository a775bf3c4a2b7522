// Runs one launch of the chip kernel on the CPU (see shim.h): every thread of every block at once
// (the blocks wait for each other's flags, as on the GPU). Built by tests/test_chip_emulated.py with
// the kernel's own -D defines.
#include "shim.h"
#include <memory>
#include KERNEL_SOURCE

extern "C" void launch(real* out, const real* u, long long pitch, int ny, int nx, int rt, int steps, real* hrow,
                       real* hcol, unsigned* flags, void* resid, void* checks, int first, int every, real wc, real wx, real wy, unsigned gx, unsigned gy,
                       unsigned nt, unsigned long long smem)
{
    gridDim = {gx, gy, 1};
    blockDim = {nt, 1, 1};
    std::vector<std::unique_ptr<block_sync>> blocks;
    std::vector<std::unique_ptr<warp_sync>> warps;
    std::vector<std::thread> threads;
    for (unsigned by = 0; by < gy; ++by)
        for (unsigned bx = 0; bx < gx; ++bx) {
            blocks.push_back(std::make_unique<block_sync>(nt, smem));
            block_sync* b = blocks.back().get();
            for (unsigned w0 = 0; w0 < nt; w0 += 32) {
                warps.push_back(std::make_unique<warp_sync>());
                warp_sync* w = warps.back().get();
                for (unsigned t = w0; t < w0 + 32; ++t)
                    threads.emplace_back([=] {
                        threadIdx = {t, 0, 0};
                        blockIdx = {bx, by, 0};
                        this_warp = w;
                        this_block = b;
                        chip(out, u, pitch, ny, nx, rt, steps, hrow, hcol, flags, (rbits*)resid, (rbits*)checks, first, every, wc,
                             wx, wy);
                    });
            }
        }
    for (auto& t : threads) t.join();
}
