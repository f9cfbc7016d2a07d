// imp serve: the OpenAI-compatible HTTP server (src/server/, docs/server.md).
#include <memory>

#include "server/server.h"
#include "tools/commands.h"

namespace imp::tools {
namespace {

void add_serve(CLI::App& app, std::function<int()>& run) {
  auto options = std::make_shared<server::ServerOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  cmd->add_option("--model", options->model_dir, "Model folder (config.json, safetensors, tokenizer)")->required();
  cmd->add_option("--backend", options->backend, "cpu or cuda")->capture_default_str();
  cmd->add_option("--host", options->host, "Address to listen on (loopback by default)")->capture_default_str();
  cmd->add_option("--port", options->port, "Port; 0 picks a free one (logged)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", options->api_key, "Require 'Authorization: Bearer KEY' on /v1/*");
  cmd->add_option("--served-model-name", options->served_name, "The model id clients use (default: the folder name)");
  cmd->add_option("--max-context", options->max_context, "Context length cap in tokens (default: max_position_embeddings)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--max-queue", options->max_queue, "Requests waiting; one more gets 503")->capture_default_str();
  cmd->add_option("--max-running", options->max_running, "Sequences decoded together (default: 4 on cpu, 16 on cuda)");
  cmd->add_option("--kv-budget-tokens", options->kv_budget_tokens,
                  "KV tokens (prompt + max_tokens) running requests may reserve (default: max-running x context)");
  cmd->add_option("--request-timeout", options->request_timeout_s, "Seconds a request may take, queue included")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--test-forced-output", options->test_forced_output,
                "TEST ONLY: honour the request field imp_forced_output (generate that text's tokens instead of sampling)");
  cmd->callback([&run, options] { run = [options] { return server::serve(*options); }; });
}

const Registration kRegistration(add_serve);

}  // namespace
}  // namespace imp::tools
