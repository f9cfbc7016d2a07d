#include "cuda/device_model.h"

#include <cmath>
#include <cstring>
#include <initializer_list>

#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "cpu/ops.h"
#include "cuda/kernels/hyper_connection.h"
#include "cuda/kernels/qsa.h"
#include "cuda/kernels/random_fill.h"

namespace imp::cuda {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::vector<uint16_t> to_bf16(model::Tensor tensor) {
  std::vector<uint16_t> bits(static_cast<size_t>(tensor->numel()));
  if (tensor->dtype == DType::kBF16) {
    std::memcpy(bits.data(), tensor->data, bits.size() * 2);
  } else {
    const std::vector<float> values = cpu::to_f32(tensor);
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16(values[i]);
  }
  return bits;
}

}  // namespace

// Makes every weight either from the checkpoint (weights != nullptr) or random on the device.
struct DeviceModel::Builder {
  DeviceModel& model;
  const model::ModelWeights* weights;
  uint64_t seed;

  // A [rows, cols] matrix stacked from `parts` (row-wise, in order), or random N-like(mean, std) values.
  DenseWeight matrix(int64_t rows, int64_t cols, float mean, float std, std::initializer_list<model::Tensor> parts) {
    const size_t count = static_cast<size_t>(rows * cols);
    DeviceBuffer<uint16_t> buffer(count);
    if (weights) {
      std::vector<uint16_t> host;
      host.reserve(count);
      for (model::Tensor part : parts) {
        const std::vector<uint16_t> bits = to_bf16(part);
        host.insert(host.end(), bits.begin(), bits.end());
      }
      if (host.size() != count) fail("internal: stacked weights hold {} values, expected {} x {}", host.size(), rows, cols);
      buffer.upload(host);
    } else {
      launch_fill_bf16(buffer.data(), count, seed++, mean, std, nullptr);
    }
    model.device_bytes_ += count * 2;
    DenseWeight result{buffer.data(), static_cast<int32_t>(rows), static_cast<int32_t>(cols), {}};
    model.dense_storage_.push_back(std::move(buffer));
    return result;
  }
  DenseWeight projection(int64_t rows, int64_t cols, std::initializer_list<model::Tensor> parts) {
    if (cols % 8 != 0) fail("a projection with {} inputs cannot use the GPU GEMV (needs a multiple of 8)", cols);
    return matrix(rows, cols, 0.0f, 1.0f / std::sqrt(static_cast<float>(cols)), parts);
  }
  // (1 + w) norm weights: small around zero.
  DenseWeight norm(int64_t n, model::Tensor t) { return matrix(1, n, 0.0f, 0.1f, {t}); }
  // The last matrix made, each row written twice: [rows, 2 cols] (replaces it).
  DenseWeight repeated_columns(DenseWeight w) {
    const size_t row_bytes = static_cast<size_t>(w.cols) * 2;
    DeviceBuffer<uint16_t> buffer(static_cast<size_t>(w.rows) * w.cols * 2);
    for (int half = 0; half < 2; ++half) {
      IMP_CUDA_CHECK(cudaMemcpy2D(reinterpret_cast<uint8_t*>(buffer.data()) + half * row_bytes, 2 * row_bytes, w.data,
                                  row_bytes, row_bytes, static_cast<size_t>(w.rows), cudaMemcpyDeviceToDevice));
    }
    IMP_CUDA_CHECK(cudaDeviceSynchronize());
    if (model.dense_storage_.empty() || model.dense_storage_.back().data() != w.data) fail("internal: repeated_columns of an older matrix");
    model.dense_storage_.pop_back();
    model.device_bytes_ += static_cast<uint64_t>(w.rows) * row_bytes;
    DenseWeight result{buffer.data(), w.rows, 2 * w.cols, {}};
    model.dense_storage_.push_back(std::move(buffer));
    return result;
  }

  HyperConnectionDevice hyper_connection(const model::HyperConnectionWeights* w, bool inject) {
    const model::ModelConfig& c = model.config_;
    const int64_t width = c.stream_width(), rank = c.hc_lowrank;
    HyperConnectionDevice hc;
    hc.has_inject = inject;
    hc.norm = norm(width, w ? w->norm : nullptr);
    hc.down_inject = inject ? projection(rank + c.hc_count, width, {w ? w->down : nullptr, w ? w->inject : nullptr})
                            : projection(rank, width, {w ? w->down : nullptr});
    const DenseWeight up = projection(width, rank, {w ? w->up : nullptr});
    hc.up = hc_up_mix_fits(static_cast<int32_t>(c.hc_count), static_cast<int32_t>(c.hidden_size), static_cast<int32_t>(rank))
                ? up
                : repeated_columns(up);
    return hc;
  }

  GatedDeltaNetDevice gated_delta_net(const model::GatedDeltaNetWeights* w) {
    const model::ModelConfig& c = model.config_;
    const int64_t d = c.hidden_size, hv = c.linear_num_value_heads;
    if (c.linear_conv_kernel_dim < 2 || c.linear_conv_kernel_dim > kGdnMaxConvTaps) {
      fail("GDN conv kernel of {} taps is outside the GPU decode kernel's 2 to {}", c.linear_conv_kernel_dim,
           kGdnMaxConvTaps);
    }
    GatedDeltaNetDevice g;
    g.in_proj = projection(c.gdn_conv_dim() + c.gdn_value_dim() + 2 * hv, d,
                           {w ? w->in_proj_qkv : nullptr, w ? w->in_proj_z : nullptr, w ? w->in_proj_b : nullptr,
                            w ? w->in_proj_a : nullptr});
    g.out_proj = projection(d, c.gdn_value_dim(), {w ? w->out_proj : nullptr});
    g.small.conv1d = matrix(c.gdn_conv_dim(), c.linear_conv_kernel_dim, 0.0f, 0.3f, {w ? w->conv1d : nullptr}).data;
    g.small.a_log = matrix(1, hv, 1.0f, 0.5f, {w ? w->a_log : nullptr}).data;
    g.small.dt_bias = matrix(1, hv, 0.0f, 0.5f, {w ? w->dt_bias : nullptr}).data;
    g.small.norm = matrix(1, c.linear_value_head_dim, 1.0f, 0.1f, {w ? w->norm : nullptr}).data;  // plain w
    return g;
  }

  AttentionDevice attention(const model::AttentionWeights* w) {
    const model::ModelConfig& c = model.config_;
    const int64_t d = c.hidden_size, hd = c.head_dim, heads = c.num_attention_heads, kv_width = c.num_key_value_heads * hd;
    AttentionDevice a;
    const model::IndexerWeights* ix = w && w->indexer ? &*w->indexer : nullptr;
    const int64_t index_rows = c.has_qsa ? (c.indexer_n_heads + 1) * c.indexer_head_dim : 0;
    if (c.has_qsa) {
      if (c.indexer_n_heads > kQsaMaxIndexHeads || c.indexer_head_dim > kQsaMaxIndexDim) {
        fail("QSA indexer of {} heads x {} dims is beyond the GPU selection kernels' {} x {}", c.indexer_n_heads,
             c.indexer_head_dim, kQsaMaxIndexHeads, kQsaMaxIndexDim);
      }
      a.in_proj = projection(heads * 2 * hd + 2 * kv_width + index_rows, d,
                             {w ? w->q_proj : nullptr, w ? w->k_proj : nullptr, w ? w->v_proj : nullptr,
                              ix ? ix->qk_proj : nullptr});
      a.index_q_norm = norm(c.indexer_head_dim, ix ? ix->q_norm : nullptr);
      a.index_k_norm = norm(c.indexer_head_dim, ix ? ix->k_norm : nullptr);
    } else {
      a.in_proj = projection(heads * 2 * hd + 2 * kv_width, d,
                             {w ? w->q_proj : nullptr, w ? w->k_proj : nullptr, w ? w->v_proj : nullptr});
    }
    a.o_proj = projection(d, heads * hd, {w ? w->o_proj : nullptr});
    a.q_norm = norm(hd, w ? w->q_norm : nullptr);
    a.k_norm = norm(hd, w ? w->k_norm : nullptr);
    return a;
  }

  void experts(const model::MoeWeights* w, MoeDevice& moe) {
    const model::ModelConfig& c = model.config_;
    const model::ExpertSlotLayout& layout = model.slot_layout_;
    const int64_t experts = c.num_experts;
    moe.pool = DeviceBuffer<uint8_t>(layout.slot_bytes * static_cast<size_t>(experts));
    model.device_bytes_ += moe.pool.size();
    std::vector<model::SlotScales> scales(static_cast<size_t>(experts));
    if (w) {
      std::vector<uint8_t> host(moe.pool.size(), 0);
      for (int64_t e = 0; e < experts; ++e) {
        const model::ExpertWeights& ew = w->experts[static_cast<size_t>(e)];
        uint8_t* slot = host.data() + static_cast<size_t>(e) * layout.slot_bytes;
        const model::ExpertProjection* parts[3] = {&ew.gate, &ew.up, &ew.down};
        const model::SlotProjection* targets[3] = {&layout.gate, &layout.up, &layout.down};
        for (int p = 0; p < 3; ++p) {
          if (layout.format == model::SlotFormat::kNvfp4) {
            model::pack_projection(*targets[p], parts[p]->weight->data, parts[p]->weight_scale->data, slot);
          } else {
            model::pack_projection_bf16(*targets[p], to_bf16(parts[p]->weight).data(), slot);
          }
        }
        scales[static_cast<size_t>(e)] = layout.format == model::SlotFormat::kNvfp4
                                             ? model::SlotScales{ew.gate.weight_scale_2, ew.up.weight_scale_2, ew.down.weight_scale_2, 0.0f}
                                             : model::SlotScales{1.0f, 1.0f, 1.0f, 0.0f};
      }
      moe.pool.upload(host);
    } else {
      // Random E2M1 codes; E4M3 block scales in [0.5, 2]; weight_scale_2 so weights are ~1/sqrt(inputs).
      launch_fill_random_bytes(moe.pool.data(), moe.pool.size(), seed++, 0, 255, nullptr);
      for (const model::SlotProjection* p : {&layout.gate, &layout.up, &layout.down}) {
        launch_fill_random_bytes_strided(moe.pool.data() + p->scales, static_cast<size_t>(experts), layout.slot_bytes,
                                         p->scale_bytes(), seed++, 0x30, 0x40, nullptr);
      }
      const float in_scale = 1.0f / (3.0f * std::sqrt(static_cast<float>(c.hidden_size)));
      const float down_scale = 1.0f / (3.0f * std::sqrt(static_cast<float>(c.moe_intermediate_size)));
      for (auto& s : scales) s = {in_scale, in_scale, down_scale, 0.0f};
    }
    moe.scales = DeviceBuffer<model::SlotScales>(scales);
  }

  MoeDevice moe(const model::MoeWeights* w) {
    const model::ModelConfig& c = model.config_;
    const int64_t d = c.hidden_size, is = c.shared_expert_intermediate_size;
    MoeDevice m;
    m.in_proj = projection(c.num_experts + 2 * is + 1, d,
                           {w ? w->router : nullptr, w ? w->shared_gate_proj : nullptr, w ? w->shared_up_proj : nullptr,
                            w ? w->shared_expert_gate : nullptr});
    m.shared_down = projection(d, is, {w ? w->shared_down_proj : nullptr});
    experts(w, m);
    return m;
  }

  // The n-gram table in mapped pinned host memory (as stored: FP8 or BF16; other dtypes become BF16).
  PleTableDevice table(const model::PleWeights* w, int64_t total_rows, size_t dummy_bytes) {
    const model::ModelConfig& c = model.config_;
    PleTableDevice t;
    t.head_dim = static_cast<int32_t>(c.ple_head_dim());
    t.fp8 = !w || w->table_shards.front()->dtype == DType::kF8E4M3;
    t.scale = w ? w->table_scale : 2.0e-4f;
    const size_t element = t.fp8 ? 1 : 2;
    t.row_count = w ? total_rows : static_cast<int64_t>(dummy_bytes / (element * static_cast<size_t>(t.head_dim)));
    const size_t bytes = static_cast<size_t>(t.row_count) * static_cast<size_t>(t.head_dim) * element;
    void* host = nullptr;
    IMP_CUDA_CHECK_HOST_ALLOC(cudaHostAlloc(&host, bytes, cudaHostAllocMapped), bytes);
    model.pinned_tables_.push_back(host);
    uint8_t* out = static_cast<uint8_t*>(host);
    if (w) {
      size_t at = 0;
      for (model::Tensor shard : w->table_shards) {
        if (t.fp8 || shard->dtype == DType::kBF16) {
          std::memcpy(out + at, shard->data, shard->nbytes);
          at += shard->nbytes;
        } else {
          const std::vector<uint16_t> bits = to_bf16(shard);
          std::memcpy(out + at, bits.data(), bits.size() * 2);
          at += bits.size() * 2;
        }
      }
      if (at != bytes) fail("the n-gram table holds {} bytes, expected {}", at, bytes);
    }
    uint8_t* device_rows = nullptr;
    IMP_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_rows), host, 0));
    t.rows = device_rows;
    // Dummy: random positive E4M3 bytes below NaN (0x7f), written by the GPU through the mapping.
    if (!w) launch_fill_random_bytes(device_rows, bytes, seed++, 0x00, 0x7e, nullptr);
    return t;
  }

  void build(size_t ple_table_bytes);

  PleDevice ple(int layer, const model::PleWeights* w, size_t dummy_table_bytes) {
    const model::ModelConfig& c = model.config_;
    const int64_t d = c.hidden_size, width = c.stream_width(), e = c.ple_embed_dim;
    const model::NgramHash hash(c, c.ple_index(layer));
    PleDevice p;
    p.key_value = projection(width + d, e, {w ? w->key_proj : nullptr, w ? w->value_proj : nullptr});
    p.norm_key = norm(width, w ? w->norm_key : nullptr);
    p.norm_query = norm(width, w ? w->norm_query : nullptr);
    p.norm_conv = norm(width, w ? w->norm_conv : nullptr);
    p.conv1d = matrix(width, c.ple_conv_kernel_size, 0.0f, 0.3f, {w ? w->conv1d : nullptr});
    p.table = table(w, hash.padded_rows(), dummy_table_bytes);
    p.hash = to_device(hash);
    return p;
  }
};

GatedDeltaNetShape gdn_shape(const model::ModelConfig& c) {
  GatedDeltaNetShape shape;
  shape.key_heads = static_cast<int32_t>(c.linear_num_key_heads);
  shape.value_heads = static_cast<int32_t>(c.linear_num_value_heads);
  shape.key_dim = static_cast<int32_t>(c.linear_key_head_dim);
  shape.value_dim = static_cast<int32_t>(c.linear_value_head_dim);
  shape.conv_kernel = static_cast<int32_t>(c.linear_conv_kernel_dim);
  shape.eps = static_cast<float>(c.rms_norm_eps);
  shape.sigmoid_gate = c.output_gate_type == "sigmoid";
  return shape;
}

NgramHashDevice to_device(const model::NgramHash& hash) {
  NgramHashDevice h;
  const int64_t n = static_cast<int64_t>(hash.multipliers().size());
  if (n > kMaxNgram || hash.heads() > kMaxNgramHeads) {
    fail("n-gram size {} with {} heads is beyond the GPU hash limits ({} / {})", n, hash.heads(), kMaxNgram, kMaxNgramHeads);
  }
  h.ngram_size = static_cast<int32_t>(n);
  h.heads_per_ngram = static_cast<int32_t>(hash.heads() / (n - 1));
  h.eos = hash.eos();
  for (int64_t i = 0; i < n; ++i) h.multipliers[i] = hash.multipliers()[static_cast<size_t>(i)];
  for (int64_t i = 0; i < hash.heads(); ++i) {
    h.vocab_sizes[i] = hash.vocab_sizes()[static_cast<size_t>(i)];
    h.offsets[i] = hash.offsets()[static_cast<size_t>(i)];
  }
  return h;
}

// Every layer, the embedding, the LM head and the final mixer, from the checkpoint or random.
void DeviceModel::Builder::build(size_t ple_table_bytes) {
  const model::ModelConfig& c = model.config_;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const model::LayerWeights* lw = weights ? &weights->layers[static_cast<size_t>(layer)] : nullptr;
    LayerDevice ld;
    ld.type = c.layer_types[static_cast<size_t>(layer)];
    ld.attn_hc = hyper_connection(lw ? &lw->attn_hc : nullptr, true);
    ld.mlp_hc = hyper_connection(lw ? &lw->mlp_hc : nullptr, true);
    if (ld.type == model::LayerType::kLinearAttention) {
      ld.gdn = gated_delta_net(lw ? &*lw->gdn : nullptr);
    } else {
      ld.attention = attention(lw ? &*lw->attention : nullptr);
    }
    ld.moe = moe(lw ? &lw->moe : nullptr);
    if (c.ple_index(layer) >= 0) ld.ple = ple(layer, lw ? &*lw->ple : nullptr, ple_table_bytes);
    model.layers_.push_back(std::move(ld));
  }
  model.embed_tokens_ = projection(c.vocab_size, c.hidden_size, {weights ? weights->embed_tokens : nullptr});
  model.lm_head_ = projection(c.vocab_size, c.hidden_size, {weights ? weights->lm_head : nullptr});
  model.mixer_ = hyper_connection(weights ? &weights->mixer : nullptr, false);
  model.inv_freq_ = DeviceBuffer<float>(cpu::Rope(c).inv_freq);
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
}

std::unique_ptr<DeviceModel> DeviceModel::upload(const model::ModelConfig& config, const model::ModelWeights& weights) {
  std::unique_ptr<DeviceModel> model(new DeviceModel(config));
  model->slot_layout_ = model::ExpertSlotLayout::make(
      static_cast<int32_t>(config.hidden_size), static_cast<int32_t>(config.moe_intermediate_size),
      weights.experts_nvfp4 ? model::SlotFormat::kNvfp4 : model::SlotFormat::kBf16);
  model->build_or_explain([&] { Builder{*model, &weights, 0}.build(0); });
  log::info("cuda weights: {:.2f} GiB on the device ({} experts per layer in {} slots of {:.2f} MiB)",
            static_cast<double>(model->device_bytes_) / kGiB, config.num_experts,
            model->slot_layout_.format == model::SlotFormat::kNvfp4 ? "NVFP4" : "BF16",
            static_cast<double>(model->slot_layout_.slot_bytes) / (1024.0 * 1024.0));
  return model;
}

std::unique_ptr<DeviceModel> DeviceModel::dummy(const model::ModelConfig& config, uint64_t seed, size_t ple_table_bytes) {
  std::unique_ptr<DeviceModel> model(new DeviceModel(config));
  model->slot_layout_ = model::ExpertSlotLayout::make(static_cast<int32_t>(config.hidden_size),
                                                      static_cast<int32_t>(config.moe_intermediate_size));
  model->build_or_explain([&] { Builder{*model, nullptr, seed}.build(ple_table_bytes); });
  log::info("dummy weights: {:.2f} GiB of random weights on the device (NVFP4 experts), PLE table {:.2f} GiB FP8 in "
            "pinned host memory (smaller than the hash range; row ids wrap)",
            static_cast<double>(model->device_bytes_) / kGiB, static_cast<double>(ple_table_bytes) / kGiB);
  return model;
}

void DeviceModel::build_or_explain(const std::function<void()>& build) {
  try {
    build();
  } catch (const OutOfMemory& error) {
    const char* advice = error.pinned_host()
                             ? "the n-gram table stays in pinned host memory: free RAM or raise the locked-memory limit"
                             : "every weight is resident in GPU memory (experts kept in host RAM are the next step, "
                               "docs/expert_cache.md): use a GPU with more free memory";
    throw OutOfMemory(fmt::format("the model does not fit: {:.2f} GiB of its weights were on the GPU when this failed: "
                                  "{}. {}",
                                  static_cast<double>(device_bytes_) / kGiB, error.what(), advice),
                      error.pinned_host());
  }
}

DeviceModel::~DeviceModel() {
  for (void* table : pinned_tables_) cudaFreeHost(table);
}

uint64_t DeviceModel::decode_bytes_per_token() const {
  const model::ModelConfig& c = config_;
  uint64_t bytes = 0;
  for (const DeviceBuffer<uint16_t>& b : dense_storage_) bytes += b.size() * 2;
  // Decode reads one copy of each up row (HyperConnectionDevice::up: repeated, [rows, 2 rank], for some shapes).
  const uint64_t rank = static_cast<uint64_t>(c.hc_lowrank);
  auto repeated = [rank](const HyperConnectionDevice& hc) {
    return static_cast<uint64_t>(hc.up.rows) * (static_cast<uint64_t>(hc.up.cols) - rank) * 2;
  };
  bytes -= repeated(mixer_);
  for (const LayerDevice& l : layers_) bytes -= repeated(l.attn_hc) + repeated(l.mlp_hc);
  bytes -= static_cast<uint64_t>(embed_tokens_.rows - 1) * static_cast<uint64_t>(embed_tokens_.cols) * 2;  // one row read
  const model::ExpertSlotLayout& s = slot_layout_;
  const uint64_t expert_bytes = s.gate.code_bytes() + s.gate.scale_bytes() + s.up.code_bytes() + s.up.scale_bytes() +
                                s.down.code_bytes() + s.down.scale_bytes();
  bytes += static_cast<uint64_t>(c.num_hidden_layers) * static_cast<uint64_t>(c.num_experts_per_tok) * expert_bytes;
  for (const LayerDevice& l : layers_) {
    if (l.ple) bytes += static_cast<uint64_t>(c.ngram_heads()) * static_cast<uint64_t>(l.ple->table.head_dim) * (l.ple->table.fp8 ? 1 : 2);
  }
  return bytes;
}

namespace {

// The rows build_low_term_weights copies (see there): e4m3(weight, first row, end row) and f16(the same).
template <typename Layers, typename E4m3, typename F16>
void for_each_low_term_weight(const model::ModelConfig& c, Layers& layers, E4m3 e4m3, F16 f16) {
  const int32_t qkv_rows = static_cast<int32_t>(c.num_attention_heads * 2 * c.head_dim + 2 * c.num_key_value_heads * c.head_dim);
  const int32_t experts = static_cast<int32_t>(c.num_experts);
  const int32_t shared_rows = static_cast<int32_t>(2 * c.shared_expert_intermediate_size);
  const int32_t qk_rows = static_cast<int32_t>(2 * c.gdn_key_dim());
  const int32_t vz_end = static_cast<int32_t>(c.gdn_conv_dim() + c.gdn_value_dim());
  for (auto& l : layers) {
    if (l.gdn) {
      e4m3(l.gdn->in_proj, 0, qk_rows);
      f16(l.gdn->in_proj, qk_rows, vz_end);  // v, then z; b and a (2 x 48 rows) keep bf16 terms
      f16(l.gdn->out_proj, 0, l.gdn->out_proj.rows);
    }
    if (l.attention) {
      f16(l.attention->in_proj, 0, qkv_rows);  // the indexer's rows follow
      f16(l.attention->o_proj, 0, l.attention->o_proj.rows);
    }
    f16(l.moe.in_proj, experts, experts + shared_rows);  // after the router, before the shared gate logit
    e4m3(l.moe.shared_down, 0, l.moe.shared_down.rows);
  }
}

// The largest power of two p with bound * p <= 2^15 (fp16's largest is 65504); 1 for a zero bound.
float f16_scale_for(double bound) {
  return bound > 0.0 ? std::ldexp(1.0f, static_cast<int>(std::floor(std::log2(32768.0 / bound)))) : 1.0f;
}

// Load-time queries, on the host: max |v + offset| over a bf16 array, and the largest row sum of |v| of a bf16
// matrix.
float abs_max(const uint16_t* data, size_t count, float offset, DeviceBuffer<float>& scratch) {
  launch_bf16_abs_max(data, count, offset, scratch.data(), nullptr);
  float m = 0.0f;
  IMP_CUDA_CHECK(cudaMemcpy(&m, scratch.data(), sizeof(float), cudaMemcpyDeviceToHost));
  return m;
}
float row_abs_sum_max(const uint16_t* data, int32_t rows, int32_t cols, DeviceBuffer<float>& scratch) {
  launch_bf16_row_abs_sum_max(data, rows, cols, scratch.data(), nullptr);
  float m = 0.0f;
  IMP_CUDA_CHECK(cudaMemcpy(&m, scratch.data(), sizeof(float), cudaMemcpyDeviceToHost));
  return m;
}

// A bound on |x| of a hyper-connection read: x is a convex mix of the streams' normed values, each at most
// sqrt(d) |1 + w| for the RMS over d.
double read_bound(const HyperConnectionDevice& read, int64_t d, DeviceBuffer<float>& scratch) {
  const size_t count = static_cast<size_t>(read.norm.rows) * static_cast<size_t>(read.norm.cols);
  return std::sqrt(static_cast<double>(d)) * abs_max(read.norm.data, count, 1.0f, scratch);
}

}  // namespace

uint64_t DeviceModel::low_term_weight_bytes() const {
  uint64_t bytes = 0;
  for_each_low_term_weight(
      config_, layers_,
      [&](const DenseWeight& w, int32_t first, int32_t end) {
        bytes += static_cast<uint64_t>(end - first) * (static_cast<uint64_t>(w.cols) + 4);
      },
      [&](const DenseWeight& w, int32_t first, int32_t end) {
        bytes += static_cast<uint64_t>(end - first) * static_cast<uint64_t>(w.cols) * 2;
      });
  return bytes;
}

void DeviceModel::build_low_term_weights() {
  if (has_low_term_weights()) return;
  DeviceBuffer<float> scratch(1);
  for_each_low_term_weight(
      config_, layers_,
      [&](DenseWeight& w, int32_t first, int32_t end) {
        if (end == first) return;
        const size_t rows = static_cast<size_t>(end - first), cols = static_cast<size_t>(w.cols);
        DeviceBuffer<uint8_t> codes(rows * cols);
        DeviceBuffer<float> scales(rows);
        launch_quantize_rows_e4m3(w.data + static_cast<size_t>(first) * cols, end - first, w.cols, codes.data(),
                                  scales.data(), nullptr);
        w.low8 = {{codes.data(), scales.data()}, first, end};
        low8_codes_.push_back(std::move(codes));
        low8_scales_.push_back(std::move(scales));
      },
      [&](DenseWeight& w, int32_t first, int32_t end) {
        if (end == first) return;
        const size_t count = static_cast<size_t>(end - first) * static_cast<size_t>(w.cols);
        const uint16_t* rows = w.data + static_cast<size_t>(first) * static_cast<size_t>(w.cols);
        const float scale = f16_scale_for(abs_max(rows, count, 0.0f, scratch));
        DeviceBuffer<uint16_t> copy(count);
        launch_f16_rows(rows, count, scale, copy.data(), nullptr);
        w.half = {{copy.data(), scale}, first, end};
        half_copies_.push_back(std::move(copy));
      });
  // The scales of the inputs those copies multiply (each bound maps to at most 2^15: no fp16 overflow).
  const int64_t d = config_.hidden_size, conv = config_.gdn_conv_dim();
  for (LayerDevice& l : layers_) {
    const double x_bound = read_bound(l.attn_hc, d, scratch);
    l.attn_hc.x16_scale = f16_scale_for(x_bound);
    if (l.moe.in_proj.half.rows.data != nullptr) l.mlp_hc.x16_scale = f16_scale_for(read_bound(l.mlp_hc, d, scratch));
    if (l.gdn) {
      const DenseWeight& in = l.gdn->in_proj;
      const double z_bound = row_abs_sum_max(in.data + conv * in.cols, static_cast<int32_t>(config_.gdn_value_dim()),
                                             in.cols, scratch) * x_bound;
      const double norm_max = abs_max(l.gdn->small.norm, static_cast<size_t>(config_.linear_value_head_dim), 0.0f, scratch);
      // |silu(z)| <= max(|z|, 0.2785) (the minimum of silu is -0.2785)
      l.gdn->core16_scale = f16_scale_for(std::sqrt(static_cast<double>(config_.linear_value_head_dim)) * norm_max *
                                          std::max(z_bound, 0.2785));
    }
    if (l.attention) {
      const DenseWeight& in = l.attention->in_proj;
      const int64_t kv_width = config_.num_key_value_heads * config_.head_dim;
      const int64_t v_first = config_.num_attention_heads * 2 * config_.head_dim + kv_width;
      l.attention->core16_scale =
          f16_scale_for(row_abs_sum_max(in.data + v_first * in.cols, static_cast<int32_t>(kv_width), in.cols, scratch) * x_bound);
    }
  }
  IMP_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace imp::cuda
