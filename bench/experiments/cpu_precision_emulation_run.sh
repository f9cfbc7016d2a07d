#!/bin/bash
# One emulation run over the 8 golden fixtures (bench/experiments/cpu_precision_emulation.patch applied):
# per fixture the largest relative error above 1e-4 and whether a greedy token differs. Env as the patch says.
# usage: cpu_precision_emulation_run.sh TAGS,MODE -> per fixture max err (of rows above 1e-4) and greedy same/differs
cd "$(dirname "$0")/../.."  # the tree with the patch applied, build/cpu built
echo "== IMP_EXP_PRECISION=$1"
for f in chat_tiny long_sparse many_experts multimodal nvfp4 ple2_silu ple_qsa unnorm_topk; do
  IMP_EXP_PRECISION=$1 build/cpu/tests/imp_golden_tests --gtest_filter="*PromptLogits*/$f" 2>&1 | awk -v f=$f '
    /actual: / { for (i=1;i<=NF;i++) if ($i=="actual:") { v=$(i+1)+0; if (v>m) m=v } }
    /overflow/ { ov++ }
    /tokens/ && /Expected equality/ { g=1 } /Expected equality of these values/ { getline; if ($0 ~ /tokens/) g=1 }
    END { printf "  %-13s max %-10.3g greedy %s%s\n", f, m, g?"DIFFERS":"same", ov?" overflow":"" }'
done
