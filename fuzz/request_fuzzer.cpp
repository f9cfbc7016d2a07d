// libFuzzer target: arbitrary bytes as the body of POST /v1/chat/completions and /v1/completions.
// The parser must either return a request or throw ApiError (a 400 naming the problem); anything else
// (another exception, a crash, a sanitizer report) is a bug. Build and run: see fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/api_error.h"
#include "server/request.h"

namespace {

template <typename Parse>
void check(Parse parse, std::string_view body) {
  try {
    const auto request = parse(body);
    // What the server does next with a parsed request must hold for every accepted one.
    if (request.model.empty()) std::abort();
    if (request.max_tokens && *request.max_tokens < 1) std::abort();
    if (request.stop.size() > 4) std::abort();
  } catch (const imp::server::ApiError& error) {
    if (error.status != 400) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  check([](std::string_view b) {
    auto r = imp::server::parse_chat_request(b);
    if (r.messages.empty()) std::abort();
    (void)r.messages.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);  // as the template sees it
    return r;
  }, body);
  check(imp::server::parse_completion_request, body);
  return 0;
}
