# Prepared in session 30 for the next visit (not run): the three patches of session 30 that no visit measured, each
# built as a variant (bench/tools/build_variant.sh PATCH NAME, carried with their labels and test binaries):
#   rows1: session30_hc_up_rows_once.patch (the hyper-connection up rows stored once where the fused kernel runs:
#          0.6 GB less VRAM at the released shape; decode and the fused kernel read rows up.cols apart)
#   fapp:  session30_attention_prefill_pingpong.patch (FA3's ping-pong of the two consumer warpgroups)
#   gdnfs: session30_gdn_out_fast_sigmoid.patch (the GDN output kernel's gate with fast_sigmoidf)
#   moefd: session30_moe_swiglu_fast_division.patch (the MoE gate/up epilogue's SiLU division as __fdividef)
#   sm132: session30_upmix_all_sms.patch (the fused up/mix on every SM: equal runs of (slice, tile) items per block,
#          B reloaded once where a run crosses into a second slice; 120 -> 132 blocks at the released shape)
# Each: its GPU tests (all for rows1: it changes the device model's layout), then pp 4096 A/B against main.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
declare -A filter=([rows1]='*' [fapp]='*Attention*:*Golden*:*Prefill*' [gdnfs]='*GatedDeltaNet*:*Golden*'
                   [moefd]='*MoePrefill*:*Golden*' [sm132]='GpuHyperConnection.*:*Golden*')
for v in rows1 fapp gdnfs moefd sm132; do
  timeout 240 build/exp/imp_gpu_tests_$v --gtest_filter="${filter[$v]}" > $OUT/tests_$v.txt 2>&1; echo "$v tests rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $OUT/tests_$v.txt | head -12
done
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 build/exp/imp_gpu_tests_fapp --gtest_filter='*AttentionPrefill*' > $OUT/racecheck_fapp.txt 2>&1; echo "racecheck fapp rc=$?"; tail -1 $OUT/racecheck_fapp.txt
cfg=bench/configs/qwen3.8-flash-next.json
for order in "main rows1 fapp gdnfs moefd sm132" "sm132 moefd gdnfs fapp rows1 main"; do for v in $order; do
  timeout 90 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp |memory plan' $OUT/$v.log | cut -c12-160)"
done; done
