// Kernel timeline of a process, from CUPTI activity records: start and end of every kernel, including the nodes
// of replayed CUDA graphs, with the overlap that programmatic dependent launch gives (ncu times each kernel
// alone and cannot show it; the GPU machine has no nsys). Loaded by the CUDA driver as an injection library:
//   CUDA_INJECTION64_PATH=build/exp/libkernel_timeline.so IMP_TIMELINE=out.csv imp bench ...
// Writes one line per kernel at exit: start_ns,end_ns,graph_id,grid,block,name. bench/tools/timeline_summary.py
// turns it into per-step critical-path figures.
// Build: g++ -O2 -shared -fPIC -I/usr/local/cuda/include bench/tools/kernel_timeline.cpp \
//          -L/usr/local/cuda/lib64 -lcupti -o build/exp/libkernel_timeline.so
#include <cupti.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Row {
  uint64_t start, end;
  uint32_t graph;
  int grid, block;
  std::string name;
};

std::mutex rows_mutex;
std::vector<Row> rows;
constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard lock(rows_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    rows.push_back({k->start, k->end, k->graphId, k->gridX * k->gridY * k->gridZ, k->blockX * k->blockY * k->blockZ,
                    k->name ? k->name : "?"});
  }
  std::free(buffer);
}

void write_rows() {
  cuptiActivityFlushAll(1);
  const char* path = std::getenv("IMP_TIMELINE");
  FILE* f = std::fopen(path ? path : "timeline.csv", "w");
  if (!f) return;
  std::lock_guard lock(rows_mutex);
  std::fprintf(f, "start_ns,end_ns,graph_id,grid,block,name\n");
  for (const Row& r : rows) {
    std::fprintf(f, "%llu,%llu,%u,%d,%d,\"%s\"\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), r.graph, r.grid, r.block, r.name.c_str());
  }
  std::fclose(f);
  std::fprintf(stderr, "kernel_timeline: %zu kernels written to %s\n", rows.size(), path ? path : "timeline.csv");
}

}  // namespace

extern "C" int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_timeline: CUPTI activity tracing could not be enabled\n");
    return 0;
  }
  std::atexit(write_rows);
  return 1;
}
