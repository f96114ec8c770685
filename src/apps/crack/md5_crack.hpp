// SPDX-License-Identifier: MIT
// The `md5-crack` task: one partition of a distributed MD5 preimage search (design.md §4),
// plus the pure keyspace arithmetic the job splitter shares with it.
//
// The keyspace of (charset, min_len, max_len) lists every string of min_len symbols in
// charset order ("aa", "ab", ... for charset "ab..."), then every string of min_len + 1
// symbols, and so on up to max_len. A symbol is one UTF-8 character of the charset, so a
// charset with non-ASCII letters yields candidates (and preimages) that are valid UTF-8.
#pragma once

#include "handlers/registry.hpp"

#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkd::crack {

/// The task type md5_crack is registered under.
inline constexpr std::string_view md5_crack_type = "md5-crack";
/// Longest candidate, in symbols.
inline constexpr int max_candidate_length = 16;
/// Largest charset, in symbols.
inline constexpr std::size_t max_charset_size = 256;
/// Largest `count` one task may search: split bigger keyspaces into more partitions.
inline constexpr std::uint64_t max_partition_count = std::uint64_t{1} << 40;
/// keyspace_size() saturates here: only the first 2^63 candidates of a keyspace are
/// addressable, and a task's start + count may not pass this.
inline constexpr std::uint64_t keyspace_limit = std::uint64_t{1} << 63;

/// MD5 of `data` as 32 lowercase hex digits.
[[nodiscard]] std::string md5_hex(std::string_view data);

/// The symbols (UTF-8 characters) of `charset`, in order. Throws std::invalid_argument if it
/// is empty, not UTF-8, repeats a symbol, or has more than max_charset_size symbols.
[[nodiscard]] std::vector<std::string> charset_symbols(std::string_view charset);

/// Number of candidates of `charset_size` symbols and lengths min_len..max_len, saturated at
/// keyspace_limit (a result of keyspace_limit means "at least 2^63"). Throws
/// std::invalid_argument unless 1 <= charset_size <= 256 and 1 <= min_len <= max_len <= 16.
[[nodiscard]] std::uint64_t keyspace_size(std::size_t charset_size, int min_len, int max_len);

/// Candidate number `index` (from 0) of the keyspace starting at length `min_len`. Throws
/// std::invalid_argument for a bad charset (charset_symbols) or min_len outside 1..16, and
/// std::out_of_range if the candidate would be longer than 16 symbols.
[[nodiscard]] std::string candidate_at(std::string_view charset, int min_len, std::uint64_t index);

/// Splits [0, size) into min(partitions, size) contiguous (start, count) ranges, in order,
/// whose counts differ by at most one (the larger first). Empty for size 0. Throws
/// std::invalid_argument if partitions is 0.
[[nodiscard]] std::vector<std::pair<std::uint64_t, std::uint64_t>> split_keyspace(
    std::uint64_t size, std::uint64_t partitions
);

/// The md5-crack handler. Args: {"hash": 32 hex digits, any case} plus either
/// {"charset": s, "min_len": a, "max_len": b, "start": i, "count": n} (candidates i..i+n-1;
/// 1 <= a <= b <= 16, n <= 2^40, i + n within the keyspace) or {"words": [strings]}.
/// Yields {"found": true, "preimage": p, "tried": k} or {"found": false, "tried": k}, where
/// k counts candidates hashed; bad_args for bad shapes; cancelled soon after `stop`.
[[nodiscard]] handlers::handler_result md5_crack(
    const boost::json::value& args, std::stop_token stop
);

/// Registers the crack application's task types with a worker's registry: md5_crack as
/// md5_crack_type. Throws std::invalid_argument if that type is registered already.
void add_handlers(handlers::registry& reg);

}  // namespace zkd::crack
