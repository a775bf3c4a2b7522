# chip v7 second device call: v7 with the residual's pass and the masked code in their own modules
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD STENCIL_CACHE_DIR=/tmp/sc PYTHONUNBUFFERED=1
(date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv; python3 -c 'import cupy; print("cupy", cupy.__version__, cupy.cuda.runtime.runtimeGetVersion())') > $OUT/machine.txt 2>&1
cat $OUT/machine.txt
T=tests/test_gpu_chip.py::test_chip_equals_numpy_steps_over_several_launches
timeout 60 python3 -m pytest -q -rfEs -p no:cacheprovider "$T[float64-None-2]" "$T[float32-None-2]" "$T[float64-(256, 6)-2]" > $OUT/tests.log 2>&1; tail -2 $OUT/tests.log
printf 'name: k2048\ngrid: {nx: 2048, ny: 2048}\nbackend: {name: cupy}\noutput: {dir: /tmp/o, vtk: false}\n' > /tmp/k2048.yaml
R="python3 -m solver.bench.gpu runs --cases 2048:float64 2048:float32 --steps 2400 --repeats 3"
(date -u; echo "STENCIL_CHIP_LEVELS=1 (defaults)"; STENCIL_CHIP_LEVELS=1 timeout 60 $R --json $OUT/runs_L1.json; date -u) > $OUT/runs.log 2>&1
(echo "tune, STENCIL_CHIP_LEVELS=2"; STENCIL_CHIP_LEVELS=2 timeout 45 python3 -m solver tune /tmp/k2048.yaml --dtype float64 --kernel chip --blocks 512x4,256x5,256x4 --chip-steps 256 --repeats 5 --steps 48; STENCIL_CHIP_LEVELS=2 timeout 35 python3 -m solver tune /tmp/k2048.yaml --dtype float32 --kernel chip --blocks 512x8,256x12 --chip-steps 256 --repeats 5 --steps 48) > $OUT/tune.log 2>&1; grep -a -i "chip" $OUT/tune.log | tail -8
(date -u; echo "STENCIL_CHIP_LEVELS=2 (tuned above)"; STENCIL_CHIP_LEVELS=2 timeout 60 $R --json $OUT/runs_L2.json; date -u) >> $OUT/runs.log 2>&1; grep -a "^run\|LEVELS" $OUT/runs.log
timeout 60 python3 kt.py > $OUT/kt.log 2>&1; cut -c1-170 $OUT/kt.log
STENCIL_CHIP_LEVELS=2 timeout 45 ncu --clock-control none -k regex:^chip$ --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_shared_ld.sum" python3 ncu_chip.py float64:512x4 float64:256x5 > $OUT/ncu.txt 2>&1; grep -a -E "^ncu_chip|Duration|Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Spilling Requests  " $OUT/ncu.txt
date -u
timeout 30 python3 -m pytest -q -rfEs -p no:cacheprovider -n 16 tests/test_gpu_chip.py >> $OUT/tests.log 2>&1; tail -3 $OUT/tests.log
