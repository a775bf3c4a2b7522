# chip v6 final device call: GPU tests, tune (V=4 vs V=8 blocks), stencil runs, Nsight, timing decomposition
cp -r .chipcarry/. . && rm -f final.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD STENCIL_CACHE_DIR=/tmp/sc PYTHONUNBUFFERED=1
(date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv; python3 -c 'import cupy; print("cupy", cupy.__version__, cupy.cuda.runtime.runtimeGetVersion())') > $OUT/machine.txt 2>&1
cat $OUT/machine.txt
timeout 80 python3 -m pytest -q -rfEs -p no:cacheprovider -n 8 tests/test_gpu_chip.py > $OUT/tests.log 2>&1; tail -4 $OUT/tests.log
printf 'name: k2048\ngrid: {nx: 2048, ny: 2048}\nbackend: {name: cupy}\noutput: {dir: /tmp/o, vtk: false}\n' > /tmp/k2048.yaml
timeout 40 python3 -m solver tune /tmp/k2048.yaml --dtype float64 --kernel chip --blocks 512x4,256x6,256x5 --chip-steps 256 --repeats 5 --steps 48 --json $OUT/tune64.json > $OUT/tune.log 2>&1
timeout 40 python3 -m solver tune /tmp/k2048.yaml --dtype float32 --kernel chip --blocks 512x8,256x8,256x12 --chip-steps 256 --repeats 5 --steps 48 --json $OUT/tune32.json >> $OUT/tune.log 2>&1
grep -a -i "chip" $OUT/tune.log | tail -12
timeout 70 python3 -m solver.bench.gpu runs --cases 2048:float64 2048:float32 --steps 2400 --repeats 3 --json $OUT/runs.json > $OUT/runs.log 2>&1; grep -a "^run" $OUT/runs.log
timeout 60 ncu --clock-control none -k regex:^chip$ --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_shared_ld.sum" python3 ncu_chip.py float64:512x4 float64:256x6 float32:512x8 float32:256x12 > $OUT/ncu.txt 2>&1; grep -a -E "^ncu_chip|Duration|Issue Slots Busy|Warp Cycles Per Issued|Registers Per" $OUT/ncu.txt
timeout 110 python3 exp.py > $OUT/exp.log 2>&1; grep -a -v "^{" $OUT/exp.log | tail -3; python3 -c "
import json
for l in open('$OUT/exp.log'):
    if l.startswith('{'): r=json.loads(l); print(r['dtype'], r['block'], ' '.join(r['extra']) or '-', round(r['us_per_step'], 3))"
