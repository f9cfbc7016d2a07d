// GPT-2's byte-level alphabet: every byte has a printable stand-in character, so that vocabularies
// and merges can be stored as text. imp keeps tokens as raw bytes internally and only uses this map
// at the edges (loading the vocabulary, id_to_token).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace imp::text::byte_level {

// The stand-in character of a byte.
char32_t byte_to_char(uint8_t byte);

// The bytes a byte-level token string stands for, or nullopt when it holds a character outside the
// alphabet (such a token can never come out of byte-level pre-tokenization).
std::optional<std::string> chars_to_bytes(std::string_view token);

// Raw bytes to their byte-level spelling (the form vocabulary keys are written in).
std::string bytes_to_chars(std::string_view bytes);

}  // namespace imp::text::byte_level
