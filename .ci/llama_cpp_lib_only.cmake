# Run at the end of llama.cpp's project() while .ci/install builds llama-cpp-python (CMAKE_PROJECT_llama.cpp_INCLUDE).
# llama-cpp-python forces LLAMA_BUILD_COMMON on, yet its binding loads only libllama and libggml: llama.cpp's
# common library (the CLI tools' chat parsers and HTTP client, 51 of 127 files) would only lengthen the compile.
# A normal variable here shadows the forced cache entry for llama.cpp's folder.
set(LLAMA_BUILD_COMMON OFF)
