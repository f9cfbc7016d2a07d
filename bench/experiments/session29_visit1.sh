set -x
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
./build/exp/gdn_scan_phase_probe > $OUT/probe.txt 2>&1; cat $OUT/probe.txt
./build/exp/gdn_scan_phase_probe > $OUT/probe2.txt 2>&1; cat $OUT/probe2.txt | tail -9
for k in chunk_prep_kernel chunk_out_kernel; do
  timeout 200 ncu -k regex:$k -s 0 -c 1 --import-source no --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters --export $OUT/$k ./build/exp/gdn_scan_phase_probe > $OUT/ncu_$k.txt 2>&1
  timeout 60 ncu --import $OUT/$k.ncu-rep --print-details all > $OUT/ncu_${k}_details.txt 2>&1
  timeout 60 ncu --import $OUT/$k.ncu-rep --page source --csv --print-source sass > $OUT/ncu_${k}_sass.csv 2>&1
  grep -v "^==PROF==" $OUT/ncu_$k.txt | tail -120
done
ls -la $OUT
