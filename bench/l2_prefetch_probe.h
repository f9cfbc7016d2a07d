// Measures whether L2 prefetches ahead of a GEMV pay (bench/l2_prefetch_probe.cu), for imp_kernel_bench.
#pragma once

namespace imp::bench {

struct L2ProbeResult {
  double gemv_bytes = 0;
  double cold_us = 0, warm_us = 0, bulk_prefetch_us = 0, line_prefetch_us = 0, touch_us = 0;  // the GEMV alone
  double pattern_plain_us = 0, pattern_prefetch_us = 0;  // spin + GEMV per iteration, in a PDL graph
};

L2ProbeResult l2_prefetch_probe();

}  // namespace imp::bench
