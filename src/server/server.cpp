#include "server/server.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include <httplib.h>

#include "core/error.h"
#include "core/log.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "runtime/stop_tokens.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/metrics.h"
#include "server/prompt.h"
#include "server/request.h"
#include "server/response_writer.h"

namespace imp::server {
namespace {

using Json = nlohmann::ordered_json;
using runtime::Clock;

constexpr auto kHeartbeat = std::chrono::milliseconds(500);  // how soon a vanished client is noticed
constexpr int kClientClosed = 499;                             // logged when the client left mid-answer

uint64_t random_u64() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

// One request's log line and metrics, written once when its answer is complete (or abandoned).
struct RequestRecord {
  std::string id;
  std::string endpoint;
  Clock::time_point start = Clock::now();
  std::atomic<int>* in_flight = nullptr;
  bool done = false;

  ~RequestRecord() { --*in_flight; }
};

class App {
 public:
  explicit App(const ServerOptions& options) : options_(options) {}

  void routes(httplib::Server& http);
  void load();
  void drain();
  int in_flight() const { return in_flight_.load(); }

 private:
  std::shared_ptr<RequestRecord> begin(const std::string& endpoint);
  void end(RequestRecord& record, int status, int64_t prompt = 0, int64_t completion = 0, double ttft = -1);
  void answer_error(httplib::Response& res, const ApiError& error);
  void generate(const httplib::Request& req, httplib::Response& res, bool chat);
  Json model_card() const;

  ServerOptions options_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};
  std::unique_ptr<runtime::Engine> engine_;
  std::unique_ptr<ServedModel> model_;
  std::unique_ptr<runtime::Scheduler> scheduler_;
  Metrics metrics_;
  int64_t created_ = static_cast<int64_t>(std::time(nullptr));
};

std::shared_ptr<RequestRecord> App::begin(const std::string& endpoint) {
  ++in_flight_;
  auto record = std::make_shared<RequestRecord>();
  record->id = fmt::format("{:016x}", random_u64());
  record->endpoint = endpoint;
  record->in_flight = &in_flight_;
  return record;
}

void App::end(RequestRecord& record, int status, int64_t prompt, int64_t completion, double ttft) {
  if (record.done) return;
  record.done = true;
  const double duration = std::chrono::duration<double>(Clock::now() - record.start).count();
  metrics_.request_done(record.endpoint, status);
  if (completion > 0 || prompt > 0) {
    metrics_.tokens(prompt, completion);
    metrics_.request_duration(duration);
  }
  // No prompt or output text here, by design.
  log::info("request {} {} status={} prompt_tokens={} completion_tokens={} ttft={} duration={:.3f}s", record.id,
            record.endpoint, status, prompt, completion, ttft < 0 ? std::string("-") : fmt::format("{:.3f}s", ttft), duration);
}

void App::answer_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  if (error.status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump_json(error_body(error.status, error.what(), error.param, error.code)), "application/json");
}

Json App::model_card() const {
  return {{"id", model_->id}, {"object", "model"}, {"created", created_}, {"owned_by", "imp"},
          {"max_model_len", model_->max_context}};
}

void App::routes(httplib::Server& http) {
  // The API key guards /v1/*; /health and /metrics stay open for probes and scrapers.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || !req.path.starts_with("/v1/")) return httplib::Server::HandlerResponse::Unhandled;
    const std::string header = req.get_header_value("Authorization");
    const std::string expected = "Bearer " + options_.api_key;
    if (header == expected) return httplib::Server::HandlerResponse::Unhandled;
    auto record = begin(req.path);
    answer_error(res, ApiError(401, header.empty() ? "missing API key: send the header 'Authorization: Bearer KEY'"
                                                   : "invalid API key", "", "invalid_api_key"));
    end(*record, 401);
    return httplib::Server::HandlerResponse::Handled;
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const char* status = draining_ ? "draining" : ready_ ? "ok" : "loading";
    res.status = ready_ && !draining_ ? 200 : 503;
    res.set_content(dump_json({{"status", status}}), "application/json");
  });

  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const runtime::SchedulerStats stats = scheduler_ && ready_ ? scheduler_->stats() : runtime::SchedulerStats{};
    res.set_content(metrics_.render(stats, options_.backend), "text/plain; version=0.0.4");
  });

  http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    auto record = begin(req.path);
    if (!ready_) {
      answer_error(res, ApiError(503, "the model is still loading; retry shortly", "", "model_loading"));
      return end(*record, 503);
    }
    res.set_content(dump_json({{"object", "list"}, {"data", Json::array({model_card()})}}), "application/json");
    end(*record, 200);
  });

  http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto record = begin("/v1/models/{id}");
    if (!ready_) {
      answer_error(res, ApiError(503, "the model is still loading; retry shortly", "", "model_loading"));
      return end(*record, 503);
    }
    if (req.matches[1] != model_->id) {
      answer_error(res, ApiError(404, fmt::format("model '{}' is not served here (this server serves '{}')",
                                                  req.matches[1].str(), model_->id), "model", "model_not_found"));
      return end(*record, 404);
    }
    res.set_content(dump_json(model_card()), "application/json");
    end(*record, 200);
  });

  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, true); });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, false); });

  // Errors httplib produces itself (unknown path, body too large, bad request line) get an OpenAI body too.
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string message = res.status == 404 ? fmt::format("no route for {} {}", req.method, req.path)
                                : res.status == 413 ? std::string("the request body is too large")
                                                    : fmt::format("HTTP error {}", res.status);
    res.set_content(dump_json(error_body(res.status, message)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = fmt::format("internal error: {}", e.what());
    } catch (...) {
    }
    log::warn("{}", message);
    res.status = 500;
    res.set_content(dump_json(error_body(500, message)), "application/json");
  });
}

void App::generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  auto record = begin(req.path);
  res.set_header("X-Request-Id", record->id);
  try {
    if (draining_) throw ApiError(503, "the server is shutting down", "", "shutting_down");
    if (!ready_) throw ApiError(503, "the model is still loading; retry shortly", "", "model_loading");

    const ResponseIds ids{.id = (chat ? "chatcmpl-" : "cmpl-") + record->id,
                          .created = static_cast<int64_t>(std::time(nullptr)), .model = model_->id};
    GenerationParams params;
    PreparedPrompt prompt;
    std::shared_ptr<ResponseWriter> writer;
    int top_logprobs = -1;
    if (chat) {
      ChatRequest request = parse_chat_request(req.body);
      params = request;
      if (params.model != model_->id) throw ApiError(400, fmt::format("model '{}' is not served here; use '{}'", params.model, model_->id), "model", "model_not_found");
      prompt = prepare_chat(*model_, request);
      writer = make_chat_writer(ids, request, model_->tokenizer);
      if (request.logprobs) top_logprobs = request.top_logprobs;
    } else {
      CompletionRequest request = parse_completion_request(req.body);
      params = request;
      if (params.model != model_->id) throw ApiError(400, fmt::format("model '{}' is not served here; use '{}'", params.model, model_->id), "model", "model_not_found");
      prompt = prepare_completion(*model_, request);
      writer = make_completion_writer(ids, request, model_->tokenizer);
      top_logprobs = request.logprobs;
    }

    runtime::GenerationRequest job_request;
    job_request.prompt = prompt.tokens;
    job_request.max_tokens = prompt.max_tokens;
    job_request.sampling = params.sampling;
    if (!params.ignore_eos) job_request.stop_tokens = model_->stop_tokens;
    job_request.top_logprobs = top_logprobs;
    if (!params.has_seed) job_request.sampling.seed = random_u64();
    job_request.deadline = record->start + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(options_.request_timeout_s));
    if (params.forced_output) {
      if (!options_.test_forced_output) {
        bad_request("imp_forced_output", "'imp_forced_output' is a test-only field; the server was not started with --test-forced-output");
      }
      job_request.forced_tokens = model_->encode(*params.forced_output);
    }

    runtime::Scheduler::Refusal refusal;
    std::shared_ptr<runtime::Job> job = scheduler_->submit(std::move(job_request), &refusal);
    if (!job) {
      throw ApiError(503, refusal == runtime::Scheduler::Refusal::draining ? "the server is shutting down"
                                                                            : "the server is at capacity (queue full); retry shortly",
                     "", "server_busy");
    }
    auto run = std::make_shared<GenerationRun>(model_->tokenizer, job, prompt.parser, params.stop, metrics_, record->start);
    const runtime::JobUpdate started = run->wait_started();
    if (started.state == runtime::JobState::refused) {
      throw ApiError(503, "the server is at capacity: the request waited past its deadline; retry shortly", "", "server_busy");
    }
    if (started.reason == runtime::FinishReason::error && started.tokens.empty()) {
      throw ApiError(500, fmt::format("the engine failed: {}", started.error), "", "generation_failed");
    }

    // From here the status is 200; a client that goes away is noticed by failed writes (heartbeats too).
    const bool streaming = writer->streaming();
    auto provider = [run, writer, streaming](size_t, httplib::DataSink& sink) {
      auto last_write = Clock::now();
      auto write = [&](const std::string& bytes) {
        if (bytes.empty()) return true;
        last_write = Clock::now();
        return sink.write(bytes.data(), bytes.size());
      };
      // Heartbeats: an SSE comment when streaming; leading whitespace (valid JSON) otherwise.
      auto heartbeat = [&] { return write(streaming ? ": keep-alive\n\n" : " "); };
      auto emit = [&](const Piece& piece) {
        const std::string bytes = writer->piece(piece);
        if (bytes.empty() && Clock::now() - last_write >= kHeartbeat) return heartbeat();
        return write(bytes);
      };
      const bool ok = run->run(emit, heartbeat, kHeartbeat) && write(writer->finish(run->outcome()));
      if (ok) sink.done();
      return ok;
    };
    auto releaser = [this, run, record](bool success) {
      const Outcome& outcome = run->outcome();
      const int status = !success || outcome.cancelled ? kClientClosed : outcome.error.empty() ? 200 : 500;
      end(*record, status, outcome.prompt_tokens, outcome.completion_tokens, outcome.ttft_s);
    };
    res.status = 200;
    // "; charset=utf-8" keeps httplib from gzip-compressing the body: its compressor buffers, which would
    // hold back the heartbeats that detect a vanished client.
    res.set_chunked_content_provider(streaming ? "text/event-stream" : "application/json; charset=utf-8", provider,
                                     releaser);
  } catch (const ApiError& error) {
    answer_error(res, error);
    end(*record, error.status);
  }
}

void App::load() {
  const auto start = Clock::now();
  engine_ = runtime::load_engine(options_.model_dir, {.backend = options_.backend, .max_context = options_.max_context});
  const model::ModelConfig& config = engine_->config();
  if (options_.max_context > config.max_position_embeddings) {
    fail("--max-context {} exceeds the model's max_position_embeddings {}", options_.max_context, config.max_position_embeddings);
  }
  // The engine decides its context (the GPU backend from its memory plan); --max-context can only lower it.
  int64_t context = engine_->max_context();
  if (options_.max_context > 0) context = std::min(context, options_.max_context);
  const size_t running = options_.max_running > 0 ? options_.max_running : (options_.backend == "cpu" ? 4 : 16);
  int64_t budget = options_.kv_budget_tokens > 0 ? options_.kv_budget_tokens : static_cast<int64_t>(running) * context;
  if (const int64_t capacity = engine_->kv_capacity_tokens(); capacity > 0) {
    // KV pages round each sequence up: keep one page per running sequence spare.
    const int64_t usable = capacity - static_cast<int64_t>(running) * 64;
    if (budget > usable) {
      log::info("KV budget lowered from {} to {} tokens: the engine's KV cache holds {} tokens", budget, usable, capacity);
      budget = usable;
    }
  }
  if (budget < context) fail("--kv-budget-tokens {} is below the context length {}: no full request could run", budget, context);
  log::info("serving context {} tokens (max_position_embeddings {}, --max-context {}); {} sequences at once, "
            "KV budget {} tokens, queue {}, request timeout {:.0f} s",
            context, config.max_position_embeddings, options_.max_context, running, budget, options_.max_queue,
            options_.request_timeout_s);

  std::string id = options_.served_name;
  if (id.empty()) id = std::filesystem::absolute(options_.model_dir).lexically_normal().filename().string();
  if (id.empty()) id = std::filesystem::absolute(options_.model_dir).lexically_normal().parent_path().filename().string();
  model_ = ServedModel::load(options_.model_dir, id, runtime::load_stop_tokens(options_.model_dir, config), context,
                             config.vocab_size);
  scheduler_ = std::make_unique<runtime::Scheduler>(
      *engine_, runtime::SchedulerOptions{.max_queue = options_.max_queue, .max_running = running, .kv_budget_tokens = budget});
  ready_ = true;
  log::info("model '{}' ready on backend {} in {:.2f} s", id, engine_->backend_name(),
            std::chrono::duration<double>(Clock::now() - start).count());
}

void App::drain() {
  draining_ = true;
  if (scheduler_) scheduler_->drain();
  // Answers still being written (the last chunks, [DONE]) finish before the listener closes.
  const auto limit = Clock::now() + std::chrono::seconds(30);
  while (in_flight_ > 0 && Clock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace

int serve(const ServerOptions& options) {
  // Signals are taken synchronously by this thread (sigwait), never by the worker or HTTP threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client that vanished must not kill the server on write
  // Few malloc arenas: with one per HTTP thread, freed memory stays scattered and the footprint never
  // returns to its baseline after a burst of requests.
  mallopt(M_ARENA_MAX, 2);

  App app(options);
  httplib::Server http;
  // Every connection gets a thread, so a full queue is answered (503) rather than left waiting in httplib.
  const size_t threads = options.max_queue + std::max<size_t>(options.max_running, 16) + 32;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(32 << 20);
  http.set_keep_alive_timeout(5);
  app.routes(http);

  int port = options.port;
  if (port == 0) {
    port = http.bind_to_any_port(options.host);
    if (port < 0) fail("cannot listen on {}: no free port", options.host);
  } else if (!http.bind_to_port(options.host, port)) {
    fail("cannot listen on {}:{} (in use, or not an address of this machine?)", options.host, port);
  }
  std::thread listener([&http] { http.listen_after_bind(); });
  log::info("listening on http://{}:{} (loading the model; GET /health says when it is ready)", options.host, port);

  try {
    app.load();
  } catch (...) {
    http.stop();
    listener.join();
    throw;
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  log::info("{}: draining ({} requests in flight), then exiting", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
            app.in_flight());
  app.drain();
  http.stop();
  listener.join();
  log::info("stopped");
  return 0;
}

}  // namespace imp::server
