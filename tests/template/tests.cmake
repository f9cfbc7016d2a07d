# Chat template parity with Python jinja2 set up as Hugging Face's apply_chat_template does.
# template_references renders the expected prompts into the build folder (needs python3 with
# jinja2 from tests/requirements.txt); imp_template_tests compares imp's renderings with them.
find_package(Python3 REQUIRED COMPONENTS Interpreter)

set(IMP_QWEN3_TOKENIZER_DIR "${PROJECT_SOURCE_DIR}/../shared/data/qwen3-tokenizer")
get_filename_component(IMP_QWEN3_TOKENIZER_DIR "${IMP_QWEN3_TOKENIZER_DIR}" ABSOLUTE)
if(NOT EXISTS "${IMP_QWEN3_TOKENIZER_DIR}/tokenizer_config.json")
  message(WARNING "Qwen3 tokenizer not found at ${IMP_QWEN3_TOKENIZER_DIR}: the template parity tests will fail")
endif()
set(IMP_TEMPLATE_REFS "${CMAKE_BINARY_DIR}/template_refs")

add_test(NAME template_references
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/render_reference.py
    --out ${IMP_TEMPLATE_REFS}
    --conversations ${PROJECT_SOURCE_DIR}/tests/fixtures/templates/conversations
    --template qwen3=${IMP_QWEN3_TOKENIZER_DIR}
    --template flash_next=${PROJECT_SOURCE_DIR}/tests/fixtures/templates/flash_next
    --template features=${PROJECT_SOURCE_DIR}/tests/fixtures/templates/features)
set_tests_properties(template_references PROPERTIES FIXTURES_SETUP template_refs LABELS unit)

add_executable(imp_template_tests ${CMAKE_CURRENT_LIST_DIR}/parity_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/chat_template_test.cpp)
target_link_libraries(imp_template_tests PRIVATE imp_lib GTest::gtest_main)
target_compile_definitions(imp_template_tests PRIVATE
  IMP_SOURCE_DIR="${PROJECT_SOURCE_DIR}" IMP_BINARY="$<TARGET_FILE:imp>"
  IMP_TEMPLATE_REFS="${IMP_TEMPLATE_REFS}" IMP_QWEN3_TOKENIZER_DIR="${IMP_QWEN3_TOKENIZER_DIR}")
add_dependencies(imp_template_tests imp)
gtest_discover_tests(imp_template_tests
  PROPERTIES LABELS unit FIXTURES_REQUIRED template_refs DISCOVERY_TIMEOUT 60)
