// The OpenAI-compatible HTTP server (cpp-httplib): routes, API key, request log, metrics, and the
// lifecycle: listen at once (GET /health says "loading"), load the model, serve, and on SIGTERM or SIGINT
// refuse new work, let in-flight requests finish, then exit. See docs/server.md.
#pragma once

#include <cstdint>
#include <string>

namespace imp::server {

struct ServerOptions {
  std::string model_dir;
  std::string backend = "cpu";
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;        // empty: no key needed
  std::string served_name;    // empty: the model folder's name
  int64_t max_context = 0;    // 0: the model's max_position_embeddings
  size_t max_queue = 64;
  size_t max_running = 0;     // 0: auto (see docs/server.md)
  int64_t kv_budget_tokens = 0;  // 0: auto
  double request_timeout_s = 600;  // each request's deadline, from arrival
  bool test_forced_output = false; // test-only: honour the request field imp_forced_output
};

// Serves until SIGTERM/SIGINT has drained the work; returns the exit status. Throws imp::Error when the
// port cannot be bound or the model cannot be loaded.
int serve(const ServerOptions& options);

}  // namespace imp::server
