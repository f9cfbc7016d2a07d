// Where does the decode attention's time go inside its two kernels (launch_attention_decode: the flash-decoding
// partial kernel, then the combine)? Compiles attention_decode.cu and attention_decode_mma.cu with their
// IMP_PHASE_PROBE timestamps (thread 0 of every block, %globaltimer) and runs 12 launches (the released model's
// attention layers) in one PDL graph at the released shape (24 query heads, 2 KV heads, head_dim 256, bf16 pages of
// 64 tokens), with a selection list as the decode step passes it (the early loads before the wait that session 20
// probed went in session 35). `attention_phase_probe 1024`: a selection of every token
// of a 1024-token context (read without the list); `attention_phase_probe 32768`: 2048 selected tokens of 32768 (32
// blocks of 64). Prints the last launch's steps from the partial kernel's first block entry: min / median / max.
// Since session 20 these bf16 pages take the tensor-core partial kernel (attention_decode_mma.cu, compiled here too).
//   partial: 0 entry, 1 after the wait, 2 first tile's K/V in registers (issued; the tensor-core kernel: in shared
//            memory, after its barrier), 3 scores (barrier), 4 softmax (barrier), 5 P V done (barrier; the last
//            tile's), 6 end
//   combine: 0 entry, 1 after the wait, 2 split weights (barrier), 3 end
// Build (links the library for the launch helpers):
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
//     bench/experiments/attention_phase_probe.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda \
//     -o build/exp/attention_phase_probe
#define IMP_PHASE_PROBE 1
#include "cuda/kernels/attention_decode.cu"
#include "cuda/kernels/attention_decode_mma.cu"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/launch.h"
#include "cuda/memory/device_buffer.h"

using imp::cuda::DeviceBuffer;

namespace {

void print_phases(const char* kernel, const unsigned long long (*stamps)[8], int blocks, int phases,
                  unsigned long long t0) {
  for (int i = 0; i < phases; ++i) {
    std::vector<double> us;
    for (int b = 0; b < blocks; ++b) {
      if (stamps[b][i] != 0) us.push_back(static_cast<double>(stamps[b][i] - t0) / 1000.0);
    }
    if (us.empty()) continue;
    std::sort(us.begin(), us.end());
    std::printf("%-8s step %d: %3zu blocks  min %7.2f  median %7.2f  max %7.2f us\n", kernel, i, us.size(), us.front(),
                us[us.size() / 2], us.back());
  }
}

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace

int main(int argc, char** argv) {
  const int context = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int heads = 24, kv_heads = 2, hd = 256, page = 64, layers = 12;
  const int selected_count = context <= 2048 ? context : 2048;
  const int pages = (context + page - 1) / page, width = kv_heads * hd;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> keys(static_cast<size_t>(pages) * page * width), values(keys.size());
  for (auto& v : keys) v = bf16_bits(normal(rng));
  for (auto& v : values) v = bf16_bits(normal(rng));
  std::vector<int32_t> table(static_cast<size_t>(pages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<int32_t> selected(static_cast<size_t>(selected_count));
  if (selected_count == context) {
    std::iota(selected.begin(), selected.end(), 0);
  } else {  // 32 blocks of 64 tokens, sorted
    std::vector<int> blocks(static_cast<size_t>(context / 64));
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    blocks.resize(static_cast<size_t>(selected_count / 64));
    std::sort(blocks.begin(), blocks.end());
    for (size_t b = 0; b < blocks.size(); ++b) {
      for (int t = 0; t < 64; ++t) selected[b * 64 + static_cast<size_t>(t)] = blocks[b] * 64 + t;
    }
  }
  std::vector<float> qg(static_cast<size_t>(heads) * 2 * hd);
  for (auto& v : qg) v = 0.1f * normal(rng);
  DeviceBuffer<uint16_t> d_keys(keys), d_values(values);
  DeviceBuffer<int32_t> d_table(table), d_sel(selected), d_count(std::vector<int32_t>{selected_count}),
      d_pos(std::vector<int32_t>{context - 1});
  DeviceBuffer<float> d_qg(qg), d_out(static_cast<size_t>(heads) * hd);
  DeviceBuffer<float> d_ws(imp::cuda::attention_decode_workspace_floats(1, heads, hd));
  imp::cuda::KvPages cache;
  cache.keys = d_keys.data();
  cache.values = d_values.data();
  cache.page_table = d_table.data();
  cache.max_pages = pages;
  cache.page_size = page;
  cache.bf16 = true;

  cudaStream_t stream;
  IMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  IMP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  {
    const imp::cuda::PdlScope pdl;
    for (int l = 0; l < layers; ++l) {
      imp::cuda::launch_attention_decode(cache, d_qg.data(), d_qg.data() + hd, 2 * hd, d_pos.data(), d_sel.data(),
                                         d_count.data(), selected_count, 1, heads, kv_heads, hd, d_ws.data(), d_out.data(),
                                         stream);
    }
  }
  IMP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  IMP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int run = 0; run < 5; ++run) IMP_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t a, b;
  IMP_CUDA_CHECK(cudaEventCreate(&a));
  IMP_CUDA_CHECK(cudaEventCreate(&b));
  IMP_CUDA_CHECK(cudaMemset(d_out.data(), 0, d_out.size() * sizeof(float)));
  static unsigned long long zero[2][512][8];
  IMP_CUDA_CHECK(cudaMemcpyToSymbol(imp::cuda::attention::g_attention_phase, zero, sizeof(zero)));
  IMP_CUDA_CHECK(cudaEventRecord(a, stream));
  IMP_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  IMP_CUDA_CHECK(cudaEventRecord(b, stream));
  IMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  float ms = 0;
  IMP_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  std::printf("context %d, %d selected: %d launches, %.1f us per launch (partial + combine)\n", context, selected_count,
              layers, ms * 1000.0f / layers);
  static unsigned long long host[2][512][8];
  IMP_CUDA_CHECK(cudaMemcpyFromSymbol(host, imp::cuda::attention::g_attention_phase, sizeof(host)));
  const int partial_blocks = 132, combine_blocks = (hd / 64) * heads;
  unsigned long long t0 = ~0ull;
  for (int blk = 0; blk < partial_blocks; ++blk) {
    if (host[0][blk][0] != 0) t0 = std::min(t0, host[0][blk][0]);
  }
  print_phases("partial", host[0], partial_blocks, 7, t0);
  print_phases("combine", host[1], combine_blocks, 4, t0);
  return 0;
}
