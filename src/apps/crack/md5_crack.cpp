// SPDX-License-Identifier: MIT
#include "apps/crack/md5_crack.hpp"

#include "protocol/text.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>
#include <boost/uuid/detail/md5.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <stdexcept>

namespace zkd::crack {

namespace json = boost::json;
using handlers::handler_error;
using handlers::handler_result;
namespace codes = protocol::codes;

namespace {

using md5_words = std::array<std::uint32_t, 4>;

// Boost >= 1.71 leaves each 32-bit digest word holding four digest bytes most significant
// first (its name-based UUID generator swaps them back), whatever the host's byte order.
// The known-vector tests pin this down.
md5_words md5_of(std::string_view data) {
    boost::uuids::detail::md5 h;
    h.process_bytes(data.data(), data.size());
    boost::uuids::detail::md5::digest_type d;
    h.get_digest(d);
    return {d[0], d[1], d[2], d[3]};
}

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

std::optional<md5_words> parse_hash(std::string_view hex) {
    if (hex.size() != 32)
        return std::nullopt;
    md5_words words{};
    for (std::size_t i = 0; i < hex.size(); ++i) {
        const int v = hex_value(hex[i]);
        if (v < 0)
            return std::nullopt;
        words[i / 8] = (words[i / 8] << 4) | static_cast<std::uint32_t>(v);
    }
    return words;
}

// min(n^len, cap), and whether the cap was hit.
std::pair<std::uint64_t, bool> power_capped(std::uint64_t n, int len, std::uint64_t cap) {
    std::uint64_t p = 1;
    for (int i = 0; i < len; ++i) {
        if (p > cap / n)
            return {cap, true};
        p *= n;
    }
    return {std::min(p, cap), p > cap};
}

// Where candidate `index` of a keyspace starting at `min_len` sits: its length and its
// symbol indices, most significant first.
struct position {
    int length = 0;
    std::array<std::uint32_t, max_candidate_length> digits{};
};

position locate(std::uint64_t n, int min_len, std::uint64_t index) {
    for (int len = min_len; len <= max_candidate_length; ++len) {
        const auto [block, capped] =
            power_capped(n, len, std::numeric_limits<std::uint64_t>::max());
        // A capped block holds more than 2^64 - 1 candidates, so any index fits in it.
        if (capped || index < block) {
            position pos;
            pos.length = len;
            for (int i = len - 1; i >= 0; --i) {
                pos.digits[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(index % n);
                index /= n;
            }
            return pos;
        }
        index -= block;
    }
    throw std::out_of_range("md5-crack candidate index is past length 16");
}

void check_lengths(int min_len, int max_len) {
    if (min_len < 1 || max_len > max_candidate_length || min_len > max_len) {
        throw std::invalid_argument(
            "lengths must satisfy 1 <= min_len <= max_len <= 16, not " + std::to_string(min_len) +
            ".." + std::to_string(max_len)
        );
    }
}

handler_error bad_args(std::string message) {
    return handler_error{std::string(codes::bad_args), "md5-crack: " + std::move(message)};
}

handler_error cancelled(std::uint64_t tried) {
    return handler_error{
        std::string(codes::cancelled),
        "md5-crack cancelled after " + std::to_string(tried) + " candidates"};
}

json::value found(std::string_view preimage, std::uint64_t tried) {
    return json::object{
        {"found", true}, {"preimage", preimage}, {"tried", static_cast<std::int64_t>(tried)}};
}

json::value not_found(std::uint64_t tried) {
    return json::object{{"found", false}, {"tried", static_cast<std::int64_t>(tried)}};
}

// Reading the stop state is cheap next to an MD5, but per candidate is needlessly often:
// 1024 candidates take well under a millisecond.
constexpr std::uint64_t stop_check_interval = 1024;

bool should_stop(std::uint64_t tried, const std::stop_token& stop) {
    return tried % stop_check_interval == 0 && stop.stop_requested();
}

handler_result search_words(
    const md5_words& target, const json::value& words_value, const std::stop_token& stop
) {
    const json::array* words = words_value.if_array();
    if (words == nullptr)
        return bad_args("\"words\" must be an array of strings");
    for (std::size_t i = 0; i < words->size(); ++i) {
        if (!(*words)[i].is_string())
            return bad_args("words[" + std::to_string(i) + "] is not a string");
    }
    std::uint64_t tried = 0;
    for (const json::value& w : *words) {
        if (should_stop(tried, stop))
            return cancelled(tried);
        const json::string& word = w.get_string();
        ++tried;
        if (md5_of(word) == target)
            return found(word, tried);
    }
    return not_found(tried);
}

// Reads a required integer field.
boost::system::result<std::int64_t, handler_error> int_field(
    const json::object& args, std::string_view name
) {
    const json::value* v = args.if_contains(name);
    if (v == nullptr)
        return bad_args("missing \"" + std::string(name) + "\"");
    const auto n = protocol::as_int64(*v);
    if (!n)
        return bad_args("\"" + std::string(name) + "\" must be an integer");
    return *n;
}

handler_result search_range(
    const md5_words& target, const json::object& args, const std::stop_token& stop
) {
    const json::value* charset_value = args.if_contains("charset");
    if (charset_value == nullptr || !charset_value->is_string())
        return bad_args("\"charset\" must be a string");
    std::vector<std::string> symbols;
    try {
        symbols = charset_symbols(charset_value->get_string());
    } catch (const std::invalid_argument& e) {
        return bad_args(e.what());
    }

    const auto min_len = int_field(args, "min_len");
    if (!min_len)
        return min_len.error();
    const auto max_len = int_field(args, "max_len");
    if (!max_len)
        return max_len.error();
    const auto start = int_field(args, "start");
    if (!start)
        return start.error();
    const auto count = int_field(args, "count");
    if (!count)
        return count.error();
    if (*min_len < 1 || *max_len > max_candidate_length || *min_len > *max_len) {
        return bad_args(
            "lengths must satisfy 1 <= min_len <= max_len <= 16, not " + std::to_string(*min_len) +
            ".." + std::to_string(*max_len)
        );
    }
    if (*start < 0 || *count < 0)
        return bad_args(R"("start" and "count" must not be negative)");
    const auto first = static_cast<std::uint64_t>(*start);
    const auto n = static_cast<std::uint64_t>(*count);
    if (n > max_partition_count)
        return bad_args("\"count\" must be at most 2^40 (" + std::to_string(n) + " given)");
    const int lo = static_cast<int>(*min_len);
    const int hi = static_cast<int>(*max_len);
    const std::uint64_t size = keyspace_size(symbols.size(), lo, hi);
    if (first > size || n > size - first) {
        const auto what = size == keyspace_limit ? "the addressable 2^63" : std::to_string(size);
        return bad_args(
            "start + count (" + std::to_string(first) + " + " + std::to_string(n) +
            ") exceeds the keyspace of " + what + " candidates"
        );
    }

    if (n == 0)
        return not_found(0);  // start may then be the keyspace's end, which locate() rejects

    const auto base = static_cast<std::uint32_t>(symbols.size());
    position pos = locate(base, lo, first);
    std::string candidate;
    std::uint64_t tried = 0;
    while (tried < n) {
        if (should_stop(tried, stop))
            return cancelled(tried);
        candidate.clear();
        for (int i = 0; i < pos.length; ++i)
            candidate += symbols[pos.digits[static_cast<std::size_t>(i)]];
        ++tried;
        if (md5_of(candidate) == target)
            return found(candidate, tried);
        // Odometer step; rolling over every digit moves to the next length, all first symbols.
        int i = pos.length - 1;
        for (; i >= 0; --i) {
            auto& d = pos.digits[static_cast<std::size_t>(i)];
            if (++d < base)
                break;
            d = 0;
        }
        // Past max_len only after the last candidate, because start + count <= size.
        if (i < 0 && pos.length < max_candidate_length)
            ++pos.length;
    }
    return not_found(tried);
}

}  // namespace

std::string md5_hex(std::string_view data) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(32);
    for (const std::uint32_t word : md5_of(data)) {
        for (int shift = 28; shift >= 0; shift -= 4)
            out += digits[(word >> shift) & 0xF];
    }
    return out;
}

std::vector<std::string> charset_symbols(std::string_view charset) {
    if (charset.empty())
        throw std::invalid_argument("the charset is empty");
    std::vector<std::string> symbols;
    while (!charset.empty()) {
        const std::size_t len = protocol::utf8_char(charset, 0);
        if (len == 0)
            throw std::invalid_argument("the charset is not valid UTF-8");
        if (symbols.size() == max_charset_size)
            throw std::invalid_argument("the charset has more than 256 characters");
        symbols.emplace_back(charset.substr(0, len));
        charset.remove_prefix(len);
    }
    auto sorted = symbols;
    std::sort(sorted.begin(), sorted.end());
    const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end())
        throw std::invalid_argument("the charset repeats the character \"" + *dup + "\"");
    return symbols;
}

std::uint64_t keyspace_size(std::size_t charset_size, int min_len, int max_len) {
    if (charset_size == 0 || charset_size > max_charset_size) {
        throw std::invalid_argument(
            "charset size must be 1..256, not " + std::to_string(charset_size)
        );
    }
    check_lengths(min_len, max_len);
    std::uint64_t total = 0;
    for (int len = min_len; len <= max_len; ++len) {
        const auto [block, capped] = power_capped(charset_size, len, keyspace_limit);
        if (capped || block > keyspace_limit - total)
            return keyspace_limit;
        total += block;
    }
    return total;
}

std::string candidate_at(std::string_view charset, int min_len, std::uint64_t index) {
    const auto symbols = charset_symbols(charset);
    check_lengths(min_len, max_candidate_length);
    const position pos = locate(symbols.size(), min_len, index);
    std::string out;
    for (int i = 0; i < pos.length; ++i)
        out += symbols[pos.digits[static_cast<std::size_t>(i)]];
    return out;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> split_keyspace(
    std::uint64_t size, std::uint64_t partitions
) {
    if (partitions == 0)
        throw std::invalid_argument("cannot split a keyspace into 0 partitions");
    const std::uint64_t parts = std::min(partitions, size);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    out.reserve(static_cast<std::size_t>(parts));
    const std::uint64_t base = parts == 0 ? 0 : size / parts;
    const std::uint64_t bigger = parts == 0 ? 0 : size % parts;
    std::uint64_t start = 0;
    for (std::uint64_t i = 0; i < parts; ++i) {
        const std::uint64_t count = base + (i < bigger ? 1 : 0);
        out.emplace_back(start, count);
        start += count;
    }
    return out;
}

handler_result md5_crack(const json::value& args, std::stop_token stop) {
    const json::object* obj = args.if_object();
    if (obj == nullptr)
        return bad_args("args must be an object");
    const json::value* hash = obj->if_contains("hash");
    if (hash == nullptr || !hash->is_string())
        return bad_args("\"hash\" must be a string of 32 hex digits");
    const auto target = parse_hash(hash->get_string());
    if (!target)
        return bad_args("\"hash\" must be exactly 32 hex digits");

    const json::value* words = obj->if_contains("words");
    const bool has_range = obj->contains("charset") || obj->contains("min_len") ||
                           obj->contains("max_len") || obj->contains("start") ||
                           obj->contains("count");
    if (words != nullptr && has_range)
        return bad_args("give either \"words\" or a charset range, not both");
    if (words != nullptr)
        return search_words(*target, *words, stop);
    if (!has_range) {
        return bad_args(
            R"(needs either "words" or "charset", "min_len", "max_len", "start", "count")"
        );
    }
    return search_range(*target, *obj, stop);
}

void add_handlers(handlers::registry& reg) {
    reg.add(std::string(md5_crack_type), md5_crack);
}

}  // namespace zkd::crack
