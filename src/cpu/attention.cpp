#include <algorithm>
#include <numeric>

#include "cpu/blocks.h"

namespace imp::cpu {

std::vector<int64_t> qsa_select(const model::ModelConfig& config, const model::IndexerWeights& w, const Rope& rope,
                                const float* queries, const float* raw_keys, int64_t position) {
  const int64_t ratio = config.indexer_compress_ratio, dim = config.indexer_head_dim;
  const int64_t visible = position + 1;
  const int64_t blocks = visible / ratio;
  const int64_t keep = std::min(config.block_topk(), blocks);

  // Block key: mean of its raw keys, k_layernorm, RoPE at the block's first token.
  const std::vector<float> k_norm = to_f32(w.k_norm);
  const float inv_sqrt_dim = 1.0f / std::sqrt(static_cast<float>(dim));
  std::vector<float> scores(static_cast<size_t>(blocks));
  std::vector<float> key(static_cast<size_t>(dim));
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t i = 0; i < dim; ++i) {
      float sum = 0.0f;
      for (int64_t r = 0; r < ratio; ++r) sum += raw_keys[(b * ratio + r) * dim + i];
      key[static_cast<size_t>(i)] = sum / static_cast<float>(ratio);
    }
    rms_norm(key.data(), k_norm, 1, dim, dim, config.rms_norm_eps, key.data());
    rope.apply(key.data(), b * ratio);
    float score = 0.0f;
    for (int64_t h = 0; h < config.indexer_n_heads; ++h) score += std::max(0.0f, dot(queries + h * dim, key.data(), dim));
    scores[static_cast<size_t>(b)] = score * inv_sqrt_dim;
  }
  // Top blocks by score (equal scores: lower block first), then the incomplete tail.
  std::vector<int64_t> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int64_t a, int64_t b) {
    const float sa = scores[static_cast<size_t>(a)], sb = scores[static_cast<size_t>(b)];
    return sa != sb ? sa > sb : a < b;
  });
  std::vector<int64_t> selected;
  for (int64_t i = 0; i < keep; ++i) {
    for (int64_t r = 0; r < ratio; ++r) selected.push_back(order[static_cast<size_t>(i)] * ratio + r);
  }
  for (int64_t p = blocks * ratio; p < visible; ++p) selected.push_back(p);
  std::sort(selected.begin(), selected.end());
  return selected;
}

void attention(const model::ModelConfig& config, const model::AttentionWeights& w, const Rope& rope, const float* x,
               int64_t T, int64_t first_position, AttentionCache& cache, float* y) {
  const int64_t heads = config.num_attention_heads, kv_heads = config.num_key_value_heads, hd = config.head_dim;
  const int64_t group = heads / kv_heads, kv_width = kv_heads * hd;

  std::vector<float> qg(static_cast<size_t>(T * heads * hd * 2)), k(static_cast<size_t>(T * kv_width)), v(static_cast<size_t>(T * kv_width));
  linear(w.q_proj, x, T, qg.data());
  linear(w.k_proj, x, T, k.data());
  linear(w.v_proj, x, T, v.data());

  // Per head the projection holds [query(hd) | gate(hd)].
  std::vector<float> q(static_cast<size_t>(T * heads * hd)), gate(static_cast<size_t>(T * heads * hd));
  for (int64_t i = 0; i < T * heads; ++i) {
    std::copy_n(qg.data() + i * 2 * hd, hd, q.data() + i * hd);
    std::copy_n(qg.data() + i * 2 * hd + hd, hd, gate.data() + i * hd);
  }
  rms_norm(q.data(), to_f32(w.q_norm), T * heads, hd, hd, config.rms_norm_eps, q.data());
  rms_norm(k.data(), to_f32(w.k_norm), T * kv_heads, hd, hd, config.rms_norm_eps, k.data());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < heads; ++h) rope.apply(q.data() + (t * heads + h) * hd, first_position + t);
    for (int64_t h = 0; h < kv_heads; ++h) rope.apply(k.data() + (t * kv_heads + h) * hd, first_position + t);
  }
  cache.keys.insert(cache.keys.end(), k.begin(), k.end());
  cache.values.insert(cache.values.end(), v.begin(), v.end());

  // Indexer: normalised, rotated queries for each new row; raw keys go to the cache.
  std::vector<float> index_q;
  if (w.indexer) {
    const int64_t ih = config.indexer_n_heads, id = config.indexer_head_dim;
    std::vector<float> qk(static_cast<size_t>(T * (ih + 1) * id));
    linear(w.indexer->qk_proj, x, T, qk.data());
    index_q.resize(static_cast<size_t>(T * ih * id));
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(qk.data() + t * (ih + 1) * id, ih * id, index_q.data() + t * ih * id);
      cache.index_keys.insert(cache.index_keys.end(), qk.data() + t * (ih + 1) * id + ih * id, qk.data() + (t + 1) * (ih + 1) * id);
    }
    rms_norm(index_q.data(), to_f32(w.indexer->q_norm), T * ih, id, id, config.rms_norm_eps, index_q.data());
    for (int64_t i = 0; i < T * ih; ++i) rope.apply(index_q.data() + i * id, first_position + i / ih);
  }

  // Attention of each row over its visible (and, with QSA, selected) cached tokens.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> out(static_cast<size_t>(T * heads * hd));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t position = first_position + t;
    std::vector<int64_t> selected;
    if (w.indexer) {
      selected = qsa_select(config, *w.indexer, rope, index_q.data() + t * config.indexer_n_heads * config.indexer_head_dim,
                            cache.index_keys.data(), position);
    } else {
      selected.resize(static_cast<size_t>(position + 1));
      std::iota(selected.begin(), selected.end(), 0);
    }
    std::vector<float> probs(selected.size());
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = q.data() + (t * heads + h) * hd;
      const int64_t kvh = h / group;
      float max_score = -INFINITY;
      for (size_t i = 0; i < selected.size(); ++i) {
        probs[i] = dot(qh, cache.keys.data() + selected[i] * kv_width + kvh * hd, hd) * scale;
        max_score = std::max(max_score, probs[i]);
      }
      float sum = 0.0f;
      for (float& p : probs) sum += p = std::exp(p - max_score);
      float* o = out.data() + (t * heads + h) * hd;
      std::fill(o, o + hd, 0.0f);
      for (size_t i = 0; i < selected.size(); ++i) {
        const float p = probs[i] / sum;
        const float* vh = cache.values.data() + selected[i] * kv_width + kvh * hd;
        for (int64_t j = 0; j < hd; ++j) o[j] += p * vh[j];
      }
    }
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] *= sigmoid(gate[i]);
  linear(w.o_proj, out.data(), T, y);
}

}  // namespace imp::cpu
