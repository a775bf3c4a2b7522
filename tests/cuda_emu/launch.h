// Launches any kernel of a .cu file on the CPU (see shim.h), with the argument list the backend builds:
// tests/test_mg_emulated.py writes a translation unit that includes this header, the kernel source and one
// EMU_EXPORT(kernel, mode) per kernel. That defines a C symbol launch_<kernel>, a pointer to a function
// (gx, gy, bx, by, the kernel's own arguments...) that runs the grid gx x gy of blocks bx x by.
// Modes: serial runs every thread of every block one after another in the calling thread (kernels whose
// threads never meet: no shuffles, no __syncthreads); warps runs 32 lane threads that go through the
// blocks' warps one warp at a time, meeting at a barrier after each (kernels with warp shuffles; the block's
// thread count must be a multiple of 32); blocks runs every thread of one block at once, block after block,
// meeting at __syncthreads (kernels with shared-memory tiles). Not a GPU: no concurrency between warps of the
// serial and warps modes, nor between blocks, and nothing about speed.
#pragma once
#include "shim.h"
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

template <typename F> void emu_serial(unsigned gx, unsigned gy, unsigned bx, unsigned by, F body)
{
    gridDim = {gx, gy, 1};
    blockDim = {bx, by, 1};
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x)
            for (unsigned t = 0; t < bx * by; ++t) {
                blockIdx = {x, y, 0};
                threadIdx = {t % bx, t / bx, 0};
                body();
            }
}

template <typename F> void emu_warps(unsigned gx, unsigned gy, unsigned bx, unsigned by, F body)
{
    gridDim = {gx, gy, 1};
    blockDim = {bx, by, 1};
    const unsigned per_block = bx * by;
    if (per_block % 32) {
        std::fprintf(stderr, "emu_warps: %u threads per block is not a whole number of warps\n", per_block);
        std::abort();
    }
    warp_sync warp;
    std::barrier<> done(32);
    std::vector<std::thread> lanes;
    for (unsigned lane = 0; lane < 32; ++lane)
        lanes.emplace_back([&, lane] {
            this_warp = &warp;
            for (unsigned y = 0; y < gy; ++y)
                for (unsigned x = 0; x < gx; ++x)
                    for (unsigned w0 = 0; w0 < per_block; w0 += 32) {
                        const unsigned t = w0 + lane;
                        blockIdx = {x, y, 0};
                        threadIdx = {t % bx, t / bx, 0};
                        body();
                        done.arrive_and_wait();
                    }
        });
    for (auto& l : lanes) l.join();
}

template <typename F> void emu_blocks(unsigned gx, unsigned gy, unsigned bx, unsigned by, F body)
{
    gridDim = {gx, gy, 1};
    blockDim = {bx, by, 1};
    const unsigned per_block = bx * by;
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) {
            block_sync block(per_block, 0);
            std::vector<warp_sync> warps((per_block + 31) / 32);
            std::vector<std::thread> threads;
            for (unsigned t = 0; t < per_block; ++t)
                threads.emplace_back([&, t] {
                    blockIdx = {x, y, 0};
                    threadIdx = {t % bx, t / bx, 0};
                    this_block = &block;
                    this_warp = &warps[t / 32];
                    body();
                });
            for (auto& t : threads) t.join();
        }
}

template <auto Fn> struct emu_kernel;  // (not K, V, BX...: the kernels' defines)
template <typename... A, void (*Fn)(A...)> struct emu_kernel<Fn> {
    static void serial(unsigned gx, unsigned gy, unsigned bx, unsigned by, A... a)
    {
        emu_serial(gx, gy, bx, by, [&] { Fn(a...); });
    }
    static void warps(unsigned gx, unsigned gy, unsigned bx, unsigned by, A... a)
    {
        emu_warps(gx, gy, bx, by, [&] { Fn(a...); });
    }
    static void blocks(unsigned gx, unsigned gy, unsigned bx, unsigned by, A... a)
    {
        emu_blocks(gx, gy, bx, by, [&] { Fn(a...); });
    }
};

#define EMU_EXPORT(kernel, mode) extern "C" { void* launch_##kernel = (void*)&emu_kernel<kernel>::mode; }
