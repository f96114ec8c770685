// SPDX-License-Identifier: MIT
// What a search is made of, as a user gives it: named charsets, word list files, and the
// hash; and the strict UTF-8 check that decides what a task's JSON can carry. Pure.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::crack {

/// A charset by name: lower, upper, digits, alpha, alnum, hex, printable (ASCII 0x20-0x7e),
/// or several joined by '+' ("lower+digits"); nullopt for anything else.
std::optional<std::string> named_charset(std::string_view name);

/// Splits a word list file's text into words: one per line ('\n', a trailing '\r' removed),
/// empty lines skipped; lines that are not valid UTF-8 are skipped and counted in `skipped`
/// (if not null), since a task's JSON cannot carry them.
std::vector<std::string> parse_word_list(std::string_view text, std::size_t* skipped = nullptr);

/// The hash, lowercased, if it is 32 hex digits; nullopt otherwise.
[[nodiscard]] std::optional<std::string> normalize_hash(std::string_view h);

}  // namespace zkd::crack
