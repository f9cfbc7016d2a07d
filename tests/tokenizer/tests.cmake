# Tokenizer parity with Hugging Face `tokenizers` (CTest label unit) and the encode benchmark.
# The set-up test builds the corpus and the reference results with Python (tests/requirements.txt)
# from ../shared/data/qwen3-tokenizer; the C++ tests need it (CTest fixture tokenizer_parity).
set(IMP_TOKENIZER_DATA ${PROJECT_SOURCE_DIR}/../shared/data/qwen3-tokenizer)
set(IMP_TOKENIZER_PARITY_DIR ${CMAKE_BINARY_DIR}/tokenizer_parity)

add_test(NAME tokenizer_parity_corpus
         COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/make_corpus.py --out ${IMP_TOKENIZER_PARITY_DIR}
                 --tokenizer-dir ${IMP_TOKENIZER_DATA})
set_tests_properties(tokenizer_parity_corpus PROPERTIES FIXTURES_SETUP tokenizer_parity LABELS unit TIMEOUT 900)

add_executable(imp_tokenizer_tests ${CMAKE_CURRENT_LIST_DIR}/parity_test.cpp)
target_link_libraries(imp_tokenizer_tests PRIVATE imp_lib GTest::gtest_main)
target_compile_definitions(imp_tokenizer_tests PRIVATE IMP_TOKENIZER_PARITY_DIR="${IMP_TOKENIZER_PARITY_DIR}")
gtest_discover_tests(imp_tokenizer_tests PROPERTIES LABELS unit FIXTURES_REQUIRED tokenizer_parity
                     DISCOVERY_TIMEOUT 60)

# Not a test: bench/tokenizer_bench.cpp writes bench/results/tokenizer_encode.json when run.
add_executable(imp_tokenizer_bench ${PROJECT_SOURCE_DIR}/bench/tokenizer_bench.cpp)
target_link_libraries(imp_tokenizer_bench PRIVATE imp_lib)
target_compile_definitions(imp_tokenizer_bench PRIVATE IMP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
set_target_properties(imp_tokenizer_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
