// SPDX-License-Identifier: MIT
// UTF-8, the one check of it: what every string that goes into JSON must be. Strict, as JSON
// parsers check: no overlong forms, no surrogates, nothing past U+10FFFF.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zkd::protocol {

/// The length of the UTF-8 character at s[i] (i < s.size()), or 0 if the bytes there are
/// not one.
[[nodiscard]] std::size_t utf8_char(std::string_view s, std::size_t i) noexcept;

/// True when the whole of `s` is UTF-8.
[[nodiscard]] bool is_utf8(std::string_view s) noexcept;

/// `s` with each byte that is not part of a UTF-8 character replaced by `replacement`, so
/// that it can sit in JSON.
[[nodiscard]] std::string printable_utf8(std::string_view s, std::string_view replacement = "?");

/// Cuts `s` to at most `n` bytes without splitting a UTF-8 character.
void cut_utf8(std::string& s, std::size_t n);

}  // namespace zkd::protocol
