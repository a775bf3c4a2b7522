# chip v7 device call: v7 GPU smoke tests, stencil run v6 vs v7, kernel-only decomposition, Nsight of v7, GPU chip tests
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD STENCIL_CACHE_DIR=/tmp/sc PYTHONUNBUFFERED=1
(date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv; python3 -c 'import cupy; print("cupy", cupy.__version__, cupy.cuda.runtime.runtimeGetVersion())') > $OUT/machine.txt 2>&1
cat $OUT/machine.txt
T=tests/test_gpu_chip.py::test_chip_equals_numpy_steps_over_several_launches
timeout 60 python3 -m pytest -q -rfEs -p no:cacheprovider "$T[float64-None-2]" "$T[float32-None-2]" > $OUT/tests.log 2>&1; tail -2 $OUT/tests.log
for L in 1 2; do date -u >> $OUT/runs.log; echo "STENCIL_CHIP_LEVELS=$L" >> $OUT/runs.log; STENCIL_CHIP_LEVELS=$L timeout 70 python3 -m solver.bench.gpu runs --cases 2048:float64 2048:float32 --steps 2400 --repeats 3 --json $OUT/runs_L$L.json >> $OUT/runs.log 2>&1; done; grep -a "^run\|LEVELS" $OUT/runs.log
date -u >> $OUT/runs.log
timeout 70 python3 kt.py > $OUT/kt.log 2>&1; cat $OUT/kt.log | cut -c1-200
STENCIL_CHIP_LEVELS=2 timeout 60 ncu --clock-control none -k regex:^chip$ --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_shared_ld.sum" python3 ncu_chip.py float64:512x4 float32:512x8 > $OUT/ncu.txt 2>&1; grep -a -E "^ncu_chip|Duration|Issue Slots Busy|Warp Cycles Per Issued|Registers Per|FP64|L1/TEX Hit|Executed Ipc A" $OUT/ncu.txt | head -30
date -u
timeout 75 python3 -m pytest -q -rfEs -p no:cacheprovider -n 16 tests/test_gpu_chip.py >> $OUT/tests.log 2>&1; tail -4 $OUT/tests.log
