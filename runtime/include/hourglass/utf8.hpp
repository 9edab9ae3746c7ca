// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
// The one validator behind metric label values and the JSON writer.
#pragma once

#include <cstddef>
#include <string_view>

namespace hourglass {

// The length (1 to 4) of the valid UTF-8 sequence that starts at s[i], or 0
// when the bytes there are not one. `i` must be below s.size().
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) noexcept;

bool valid_utf8(std::string_view s) noexcept;

}  // namespace hourglass
