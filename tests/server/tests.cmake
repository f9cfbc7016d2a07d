# The OpenAI-compatible server: C++ unit tests (request parser, stop strings, sampler extras, scheduler)
# and the pytest suite that drives `imp serve` on tests/fixtures/chat_tiny through the official `openai`
# SDK (tests/requirements.txt). CTest label unit, so scripts/test.sh runs both.
find_package(Python3 REQUIRED COMPONENTS Interpreter)

file(GLOB IMP_SERVER_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*_test.cpp)
add_executable(imp_server_tests ${IMP_SERVER_TESTS})
target_link_libraries(imp_server_tests PRIVATE imp_server GTest::gtest_main)
target_compile_definitions(imp_server_tests PRIVATE IMP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
gtest_discover_tests(imp_server_tests PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)

add_test(NAME server_openai_sdk
  COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR})
# Alone: its lifecycle tests measure how a server reacts in time (cancel, drain, refuse), and on the 2-core CI
# machine the fuzz target's clang build beside it once stalled a refusal for 2.8 s.
set_tests_properties(server_openai_sdk PROPERTIES LABELS unit TIMEOUT 600
  ENVIRONMENT "IMP_BINARY=$<TARGET_FILE:imp>" RUN_SERIAL TRUE)

# The request-parser fuzz target (clang, libFuzzer + ASan/UBSan) builds and survives a short run.
add_test(NAME fuzz_request_parser_smoke
  COMMAND bash ${PROJECT_SOURCE_DIR}/fuzz/smoke.sh ${CMAKE_BINARY_DIR}/fuzz 20)
set_tests_properties(fuzz_request_parser_smoke PROPERTIES LABELS unit TIMEOUT 600)

# A short load test (the full one: scripts/load_test.py with its defaults; numbers in docs/server.md).
add_test(NAME server_load_smoke
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/load_test.py --clients 16 --requests 5)
set_tests_properties(server_load_smoke PROPERTIES LABELS unit TIMEOUT 600 ENVIRONMENT "IMP_BINARY=$<TARGET_FILE:imp>"
  RUN_SERIAL TRUE)
