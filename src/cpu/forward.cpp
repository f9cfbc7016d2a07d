#include "cpu/forward.h"

#include "core/error.h"
#include "cpu/blocks.h"

namespace imp::cpu {

Model::Model(const std::filesystem::path& model_dir)
    : config_(model::load_config(model_dir)),
      checkpoint_(model::Checkpoint::open(model_dir)),
      weights_(model::bind_weights(config_, checkpoint_)),
      rope_(config_) {}

std::vector<float> Model::forward(SequenceState& state, std::span<const int32_t> tokens, bool all_rows) const {
  const model::ModelConfig& c = config_;
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t d = c.hidden_size, width = c.stream_width(), S = c.hc_count;
  if (T == 0) fail("forward needs at least one token");
  for (int32_t id : tokens) {
    if (id < 0 || id >= c.vocab_size) fail("token id {} is outside the vocabulary [0, {})", id, c.vocab_size);
  }

  // Embedding (unscaled), copied into each of the S streams: stream [T, S*d].
  std::vector<float> stream(static_cast<size_t>(T * width));
  for (int64_t t = 0; t < T; ++t) {
    float* first = stream.data() + t * width;
    read_row(weights_.embed_tokens, tokens[static_cast<size_t>(t)], first);
    for (int64_t s = 1; s < S; ++s) std::copy_n(first, d, first + s * d);
  }

  std::vector<float> x(static_cast<size_t>(T * d)), y(static_cast<size_t>(T * d));
  std::vector<float> inject(static_cast<size_t>(T * S)), ple_out;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const model::LayerWeights& lw = weights_.layers[static_cast<size_t>(layer)];
    LayerState& ls = state.layers[static_cast<size_t>(layer)];

    // PLE adds hashed n-gram features to the stream before the mixer block.
    if (lw.ple) {
      ple_out.resize(stream.size());
      ple_block(c, *lw.ple, stream.data(), tokens, ls.ple, ple_out.data());
      for (size_t i = 0; i < stream.size(); ++i) stream[i] += ple_out[i];
    }

    // Token mixer: Gated DeltaNet or gated attention, read from and written back to the streams.
    hyper_connection_read(c, lw.attn_hc, stream.data(), T, x.data(), inject.data());
    if (lw.gdn) {
      // The reference steps token by token only for a single token with existing state.
      const bool chunked = !(T == 1 && ls.gdn.has_previous);
      gated_delta_net(c, *lw.gdn, x.data(), T, ls.gdn, chunked, y.data());
    } else {
      attention(c, *lw.attention, rope_, x.data(), T, state.length, ls.attention, y.data());
    }
    hyper_connection_write(c, y.data(), inject.data(), T, stream.data());

    // Channel mixer: sparse MoE with the shared expert.
    hyper_connection_read(c, lw.mlp_hc, stream.data(), T, x.data(), inject.data());
    moe_block(c, lw.moe, x.data(), T, y.data());
    hyper_connection_write(c, y.data(), inject.data(), T, stream.data());
  }
  state.length += T;

  // Final mixer read (no norm after it), then the LM head for the rows asked for.
  const int64_t first_row = all_rows ? 0 : T - 1;
  const int64_t rows = T - first_row;
  std::vector<float> hidden(static_cast<size_t>(rows * d));
  hyper_connection_read(c, weights_.mixer, stream.data() + first_row * width, rows, hidden.data(), nullptr);
  std::vector<float> logits(static_cast<size_t>(rows * c.vocab_size));
  linear(weights_.lm_head, hidden.data(), rows, logits.data());
  return logits;
}

}  // namespace imp::cpu
