#include "cuda/engine.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "core/error.h"
#include "cuda/kernels/bandwidth.h"
#include "cuda/kernels/random_fill.h"
#include "core/log.h"
#include "model/weights.h"
#include "runtime/memory_plan.h"

namespace imp::cuda {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Device bytes of one sequence's fixed state at `context` tokens (KV pages not included).
uint64_t sequence_state_bytes(const model::ModelConfig& c, int64_t context) {
  uint64_t bytes = 0;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (c.layer_types[static_cast<size_t>(layer)] == model::LayerType::kLinearAttention) {
      bytes += 4ull * static_cast<uint64_t>((c.linear_conv_kernel_dim - 1) * c.gdn_conv_dim() +
                                            c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim);
    } else if (c.has_qsa) {
      bytes += 4ull * static_cast<uint64_t>(context + context / c.indexer_compress_ratio + 1) * static_cast<uint64_t>(c.indexer_head_dim);
    }
    if (c.ple_index(layer) >= 0) bytes += 4ull * static_cast<uint64_t>(c.ple_conv_state_rows() * c.stream_width());
  }
  return bytes;
}

int32_t attention_layers(const model::ModelConfig& c) {
  return static_cast<int32_t>(std::count(c.layer_types.begin(), c.layer_types.end(), model::LayerType::kAttention));
}

std::unique_ptr<runtime::Engine> make_cuda_engine(const std::filesystem::path& model_dir,
                                                  const runtime::EngineOptions& options) {
  return std::make_unique<CudaEngine>(model_dir, options);
}

const bool registered = (runtime::register_backend("cuda", &make_cuda_engine), true);

}  // namespace

CudaEngine::CudaEngine(const std::filesystem::path& model_dir, const runtime::EngineOptions& options)
    : config_(model::load_config(model_dir)) {
  (void)registered;
  if (options.max_context > config_.max_position_embeddings) {
    fail("--max-context {} exceeds the model's max_position_embeddings {}", options.max_context, config_.max_position_embeddings);
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    fail("backend 'cuda' needs an NVIDIA GPU, and none is visible (cudaGetDeviceCount found {})", devices);
  }
  if (options.load_format == "dummy") {
    // 4 GiB of FP8 rows: enough that gathers miss the caches as the real 48 GiB table does.
    model_ = DeviceModel::dummy(config_, 1, 4ull << 30);
  } else {
    const model::Checkpoint checkpoint = model::Checkpoint::open(model_dir);
    const model::ModelWeights weights = model::bind_weights(config_, checkpoint);
    model_ = DeviceModel::upload(config_, weights);
  }
  IMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  workspace_ = std::make_unique<DecodeWorkspace>(*model_);
  const size_t host_logit_bytes = static_cast<size_t>(kPrefillLogitRows) * static_cast<size_t>(config_.vocab_size) * sizeof(float);
  IMP_CUDA_CHECK_HOST_ALLOC(cudaMallocHost(&host_logits_, host_logit_bytes), host_logit_bytes);
  prefill_logits_ = DeviceBuffer<float>(static_cast<size_t>(kPrefillLogitRows) * static_cast<size_t>(config_.vocab_size));
  sample_params_ = DeviceBuffer<SampleParams>(1);
  sampled_token_ = DeviceBuffer<int32_t>(1);

  // Prefill's low-term weights (DeviceModel::build_low_term_weights) when they take at most a tenth of what is
  // free after the weights.
  size_t free_bytes = 0, total_bytes = 0;
  IMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const uint64_t low8_bytes = model_->low_term_weight_bytes();
  if (runtime::plan_low_term_weights(low8_bytes, free_bytes)) {
    model_->build_low_term_weights();
    log::info("prefill low-term weights: fp16 copies of the GDN value/gate and output, attention query/key/value and "
              "output and shared-expert gate/up rows (one fp16 term), E4M3 copies of the GDN query/key and shared-expert "
              "down rows (an FP8 low term), not the router's or the indexer's rows, {:.2f} GiB "
              "({:.1f}% of the {:.2f} GiB free after the weights, at most 10%)",
              static_cast<double>(low8_bytes) / kGiB, 100.0 * static_cast<double>(low8_bytes) / static_cast<double>(free_bytes),
              static_cast<double>(free_bytes) / kGiB);
  } else {
    log::info("prefill low-term weights: not built ({:.2f} GiB would exceed 10% of the {:.2f} GiB free after the "
              "weights): the split-bf16 GEMMs keep their bf16 low term",
              static_cast<double>(low8_bytes) / kGiB, static_cast<double>(free_bytes) / kGiB);
  }

  // The memory plan (runtime/memory_plan.h): context, prefill chunk and KV pages from what is free now.
  IMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int32_t layers = attention_layers(config_);
  const int32_t kv_width = static_cast<int32_t>(config_.num_key_value_heads * config_.head_dim);
  const runtime::MemoryPlan plan = runtime::plan_memory({
      .free_bytes = free_bytes,
      .max_context_option = options.max_context,
      .model_max_positions = config_.max_position_embeddings,
      .page_bytes = KvCache::bytes_per_page(std::max(layers, 1), kv_width),
      .page_tokens = KvCache::kPageSize,
      .state_bytes = [&](int64_t context) { return sequence_state_bytes(config_, context); },
      .prefill_bytes = [&](int32_t chunk, int64_t context) { return PrefillWorkspace::bytes_for(*model_, chunk, context); },
  });
  context_ = plan.context;
  prefill_ = std::make_unique<PrefillWorkspace>(*model_, plan.prefill_chunk, context_);
  kv_ = std::make_unique<KvCache>(plan.kv_pages, std::max(layers, 1), kv_width);
  log::info("{}", plan.summary);
}

CudaEngine::~CudaEngine() {
  sequences_.clear();
  if (host_logits_) cudaFreeHost(host_logits_);
  if (stream_) cudaStreamDestroy(stream_);
}

SequenceStateDevice& CudaEngine::at(runtime::SequenceId id) const {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) fail("unknown sequence {}", id);
  return *it->second;
}

runtime::SequenceId CudaEngine::new_sequence() {
  const runtime::SequenceId id = next_id_++;
  sequences_.emplace(id, std::make_unique<SequenceStateDevice>(*model_, *kv_, context_));
  return id;
}

runtime::SequenceId CudaEngine::fork(runtime::SequenceId source) {
  const runtime::SequenceId id = new_sequence();
  at(id).copy_from(at(source), stream_);
  return id;
}

void CudaEngine::release(runtime::SequenceId sequence) { sequences_.erase(sequence); }

int64_t CudaEngine::sequence_length(runtime::SequenceId sequence) const { return at(sequence).length; }

void CudaEngine::step(SequenceStateDevice& sequence, int32_t token) {
  if (token < 0 || token >= config_.vocab_size) fail("token id {} is outside the vocabulary [0, {})", token, config_.vocab_size);
  sequence.reserve(sequence.length + 1, stream_);
  // Pageable sources: the copy has read them when the call returns, so the values may change right after.
  const int32_t position = static_cast<int32_t>(sequence.length);
  IMP_CUDA_CHECK(cudaMemcpyAsync(sequence.step_token.data(), &token, sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  IMP_CUDA_CHECK(cudaMemcpyAsync(sequence.step_position.data(), &position, sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  IMP_CUDA_CHECK(cudaGraphLaunch(decode_graph(sequence, position), stream_));
  sequence.length += 1;
}

cudaGraphExec_t CudaEngine::decode_graph(SequenceStateDevice& sequence, int64_t position) {
  const auto regime = static_cast<int>(decode_regime(config_, position));
  if (sequence.graphs[regime]) return sequence.graphs[regime];
  // At the sequence's first step: every regime its positions up to the context reach (the regime only grows with
  // the position), so nothing is captured or allocated later inside the decode loop.
  const auto last = static_cast<int>(decode_regime(config_, sequence.context - 1));
  for (int r = regime; r <= last; ++r) {
    if (sequence.graphs[r]) continue;
    cudaGraph_t graph = nullptr;
    IMP_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_decode_step(*model_, *kv_, sequence, *workspace_, static_cast<DecodeRegime>(r), stream_);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    IMP_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    // Node priorities as launched (launch.h's LaunchPriority): the output gates' side branch yields to the main chain.
    const cudaError_t status = cudaGraphInstantiate(&sequence.graphs[r], graph, cudaGraphInstantiateFlagUseNodePriority);
    cudaGraphDestroy(graph);
    IMP_CUDA_CHECK(status);
  }
  return sequence.graphs[regime];
}

void CudaEngine::download_logits(const float* device, size_t rows, std::vector<float>& out) {
  const size_t count = rows * static_cast<size_t>(config_.vocab_size);
  IMP_CUDA_CHECK(cudaMemcpyAsync(host_logits_, device, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  IMP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  out.insert(out.end(), host_logits_, host_logits_ + count);
}

const float* CudaEngine::prefill_chunk(SequenceStateDevice& sequence, std::span<const int32_t> tokens, bool all_rows,
                                       bool last, bool download_last, std::vector<float>& logits) {
  const int32_t count = static_cast<int32_t>(tokens.size());
  for (int32_t token : tokens) {
    if (token < 0 || token >= config_.vocab_size) fail("token id {} is outside the vocabulary [0, {})", token, config_.vocab_size);
  }
  sequence.reserve(sequence.length + count, stream_);
  std::vector<int32_t> positions(static_cast<size_t>(count));
  for (int32_t t = 0; t < count; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(sequence.length + t);
  // Pageable sources: each copy has read them when the call returns.
  IMP_CUDA_CHECK(cudaMemcpyAsync(prefill_->tokens.data(), tokens.data(), tokens.size_bytes(), cudaMemcpyHostToDevice, stream_));
  IMP_CUDA_CHECK(cudaMemcpyAsync(prefill_->positions.data(), positions.data(), positions.size() * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, stream_));
  enqueue_prefill(*model_, *kv_, sequence, *prefill_, count, stream_);
  const float* last_row = nullptr;
  if (all_rows) {
    for (int32_t first = 0; first < count; first += kPrefillLogitRows) {
      const int32_t rows = std::min(kPrefillLogitRows, count - first);
      enqueue_prefill_logits(*model_, *prefill_, first, rows, prefill_logits_.data(), stream_);
      download_logits(prefill_logits_.data(), static_cast<size_t>(rows), logits);
      last_row = prefill_logits_.data() + static_cast<size_t>(rows - 1) * static_cast<size_t>(config_.vocab_size);
    }
  } else if (last) {
    enqueue_prefill_logits(*model_, *prefill_, count - 1, 1, prefill_logits_.data(), stream_);
    if (download_last) download_logits(prefill_logits_.data(), 1, logits);
    last_row = prefill_logits_.data();
  }
  sequence.length += count;
  return last ? last_row : nullptr;
}

int32_t CudaEngine::choose_token(const float* row, const int32_t* greedy, const runtime::TokenSampling& sampling) {
  const runtime::SamplingOptions& o = sampling.options;
  const int32_t* chosen = greedy;
  if (o.temperature > 0.0f) {
    const SampleParams params{.temperature = o.temperature,
                              .top_k = static_cast<int32_t>(std::clamp<int64_t>(o.top_k, 0, INT32_MAX)),
                              .top_p = o.top_p,
                              .min_p = o.min_p,
                              .u = runtime::sampling_uniform(o.seed, sampling.draw)};
    // Pageable source: the copy has read it when the call returns.
    IMP_CUDA_CHECK(cudaMemcpyAsync(sample_params_.data(), &params, sizeof params, cudaMemcpyHostToDevice, stream_));
    launch_sample_tokens(row, 1, static_cast<int32_t>(config_.vocab_size), sample_params_.data(), sampled_token_.data(), stream_);
    chosen = sampled_token_.data();
  } else if (!chosen) {  // greedy (runtime::sample_token's temperature <= 0 case): the argmax
    launch_argmax(row, 1, static_cast<int32_t>(config_.vocab_size), sampled_token_.data(), stream_);
    chosen = sampled_token_.data();
  }
  int32_t token = -1;
  IMP_CUDA_CHECK(cudaMemcpyAsync(&token, chosen, sizeof token, cudaMemcpyDeviceToHost, stream_));
  IMP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return token;
}

runtime::ForwardResult CudaEngine::run_request(const runtime::ForwardRequest& request, bool sample) {
  if (request.tokens.empty()) fail("forward needs at least one token");
  SequenceStateDevice& sequence = at(request.sequence);
  runtime::ForwardResult result;
  if (request.tokens.size() == 1) {
    step(sequence, request.tokens.front());
    if (!sample || request.all_logits) download_logits(workspace_->logits.data(), 1, result.logits);
    // The decode graph ends with the argmax of its logits into step_token: the greedy choice.
    if (sample) result.token = choose_token(workspace_->logits.data(), sequence.step_token.data(), *request.sampling);
  } else {
    const size_t chunk = static_cast<size_t>(prefill_->max_tokens);
    const float* last_row = nullptr;
    for (size_t first = 0; first < request.tokens.size(); first += chunk) {
      const size_t count = std::min(chunk, request.tokens.size() - first);
      last_row = prefill_chunk(sequence, request.tokens.subspan(first, count), request.all_logits,
                               first + count == request.tokens.size(), !sample, result.logits);
    }
    if (sample) result.token = choose_token(last_row, nullptr, *request.sampling);
  }
  return result;
}

std::vector<std::vector<float>> CudaEngine::forward(std::span<const runtime::ForwardRequest> batch) {
  std::vector<std::vector<float>> out;
  for (const runtime::ForwardRequest& request : batch) out.push_back(std::move(run_request(request, false).logits));
  return out;
}

std::vector<runtime::ForwardResult> CudaEngine::forward_sampled(std::span<const runtime::ForwardRequest> batch) {
  runtime::check_token_sampling(batch);
  std::vector<runtime::ForwardResult> out;
  for (const runtime::ForwardRequest& request : batch) out.push_back(run_request(request, request.sampling.has_value()));
  return out;
}

std::string CudaEngine::device_name() const {
  cudaDeviceProp props{};
  int device = 0;
  IMP_CUDA_CHECK(cudaGetDevice(&device));
  IMP_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  return fmt::format("{} ({} SMs, {:.1f} GiB)", props.name, props.multiProcessorCount,
                     static_cast<double>(props.totalGlobalMem) / kGiB);
}

double CudaEngine::measure_read_bandwidth() {
  size_t free_bytes = 0, total_bytes = 0;
  IMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t bytes = std::min<size_t>(4ull << 30, free_bytes / 4) / 16 * 16;  // far beyond the 60 MiB L2
  DeviceBuffer<uint8_t> buffer(bytes);
  DeviceBuffer<uint32_t> sums(static_cast<size_t>(launch_read_sweep_blocks()));
  launch_fill_random_bytes(buffer.data(), bytes, 7, 0, 255, stream_);
  cudaEvent_t begin, end;
  IMP_CUDA_CHECK(cudaEventCreate(&begin));
  IMP_CUDA_CHECK(cudaEventCreate(&end));
  std::vector<double> rates;
  for (int run = 0; run < 10; ++run) {
    IMP_CUDA_CHECK(cudaEventRecord(begin, stream_));
    launch_read_sweep(buffer.data(), bytes, sums.data(), stream_);
    IMP_CUDA_CHECK(cudaEventRecord(end, stream_));
    IMP_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0.0f;
    IMP_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    if (run > 0) rates.push_back(static_cast<double>(bytes) / (ms * 1e-3));  // run 0 warms up
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

void CudaEngine::fill_context(runtime::SequenceId id, int64_t tokens) {
  SequenceStateDevice& sequence = at(id);
  sequence.reserve(tokens, stream_);
  // Small positive values (every byte in [0, 0x3e]) in the KV pages and index keys: no NaN, no overflow.
  kv_->fill_random(3, stream_);
  for (LayerStateDevice& layer : sequence.layers) {
    for (DeviceBuffer<float>* keys : {&layer.index_keys, &layer.block_keys}) {
      if (keys->size()) launch_fill_random_bytes(reinterpret_cast<uint8_t*>(keys->data()), keys->size() * 4, 5, 0, 0x3e, stream_);
    }
  }
  IMP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  sequence.length = tokens;
}

double CudaEngine::decode_greedy_on_device(runtime::SequenceId id, int32_t token, int32_t steps,
                                          std::vector<int32_t>* tokens) {
  SequenceStateDevice& sequence = at(id);
  sequence.reserve(sequence.length + 1 + steps, stream_);
  DeviceBuffer<int32_t> chosen(tokens ? static_cast<size_t>(steps) + 1 : 0);  // before the loop: no allocation in it
  auto record = [&](int32_t i) {
    if (tokens) {
      IMP_CUDA_CHECK(cudaMemcpyAsync(chosen.data() + i, sequence.step_token.data(), sizeof(int32_t),
                                     cudaMemcpyDeviceToDevice, stream_));
    }
  };
  step(sequence, token);  // untimed: it also captures the graphs when needed
  record(0);
  IMP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const auto start = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < steps; ++i) {
    IMP_CUDA_CHECK(cudaGraphLaunch(decode_graph(sequence, sequence.length + i), stream_));
    record(i + 1);
  }
  IMP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  sequence.length += steps;
  if (tokens) *tokens = chosen.download();
  return ms;
}

}  // namespace imp::cuda
