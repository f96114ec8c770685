// SPDX-License-Identifier: MIT
#include "apps/crack/plan.hpp"

#include "apps/crack/md5_crack.hpp"
#include "apps/crack/words.hpp"
#include "protocol/ids.hpp"
#include "protocol/task.hpp"
#include "protocol/text.hpp"

#include <boost/json/array.hpp>
#include <boost/json/string.hpp>
#include <boost/uuid/detail/sha1.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <stdexcept>

namespace json = boost::json;

namespace zkd::crack {

namespace {

std::string hex8(std::uint32_t v) {
    std::array<char, 9> buf{};
    std::snprintf(buf.data(), buf.size(), "%08x", v);
    return {buf.data(), 8};
}

std::string sha1_hex(std::string_view data) {
    boost::uuids::detail::sha1 h;
    h.process_bytes(data.data(), data.size());
    boost::uuids::detail::sha1::digest_type d;
    h.get_digest(d);
    std::string out;
    for (const unsigned int word : d) {
        out += hex8(word);
    }
    return out;
}

}  // namespace

zkco::result<crack_plan> make_plan(const crack_spec& s) {
    crack_plan p;
    auto hash = normalize_hash(s.hash);
    if (!hash) {
        return zkco::error_code(crack_errc::bad_hash);
    }
    p.hash = std::move(*hash);
    if (s.charset.has_value() == s.words.has_value()) {
        return zkco::error_code(crack_errc::bad_search);
    }
    if (s.priority < protocol::min_priority || s.priority > protocol::max_priority ||
        s.partition_timeout.count() < 0 || s.max_attempts < 1) {
        return zkco::error_code(crack_errc::bad_task_options);
    }
    if (s.partitions < 0 || s.partitions > max_crack_partitions) {
        return zkco::error_code(crack_errc::bad_partitions);
    }
    std::string key;  // what the job id hashes (docs/crack.md)
    if (s.charset) {
        std::vector<std::string> symbols;
        try {
            symbols = charset_symbols(*s.charset);
        } catch (const std::invalid_argument&) {
            return zkco::error_code(crack_errc::bad_charset);
        }
        if (s.min_len < 1 || s.max_len > max_candidate_length || s.min_len > s.max_len) {
            return zkco::error_code(crack_errc::bad_lengths);
        }
        p.charset = *s.charset;
        p.min_len = s.min_len;
        p.max_len = s.max_len;
        p.size = keyspace_size(symbols.size(), s.min_len, s.max_len);
        const std::uint64_t needed = (p.size + max_partition_count - 1) / max_partition_count;
        if (p.size >= keyspace_limit || needed > static_cast<std::uint64_t>(max_crack_partitions)) {
            return zkco::error_code(crack_errc::keyspace_too_large);
        }
        p.canonical =
            json::object{{"charset", p.charset}, {"min_len", p.min_len}, {"max_len", p.max_len}};
        key = "charset\n" + std::to_string(p.min_len) + "\n" + std::to_string(p.max_len) + "\n" +
              p.charset;
    } else {
        if (s.words->empty()) {
            return zkco::error_code(crack_errc::empty_word_list);
        }
        std::string framed;
        for (const auto& w : *s.words) {
            if (!protocol::is_utf8(w)) {
                return zkco::error_code(crack_errc::bad_word);
            }
            framed += std::to_string(w.size());
            framed += ':';
            framed += w;
        }
        p.words_mode = true;
        p.words = *s.words;
        p.size = p.words.size();
        const std::string digest = sha1_hex(framed);
        p.canonical =
            json::object{{"words", static_cast<std::int64_t>(p.size)}, {"words_sha1", digest}};
        key = "words\n" + std::to_string(p.size) + "\n" + digest;
    }
    p.job_id = "crack-" + p.hash + "-" + hex8(protocol::fnv1a32(key));
    return p;
}

json::value partition_args(const crack_plan& p, std::pair<std::uint64_t, std::uint64_t> range) {
    json::object args{{"hash", p.hash}};
    if (p.words_mode) {
        json::array words;
        words.reserve(static_cast<std::size_t>(range.second));
        const auto first = static_cast<std::size_t>(range.first);
        const auto last = first + static_cast<std::size_t>(range.second);
        for (std::size_t i = first; i < last; ++i) {
            words.emplace_back(p.words[i]);
        }
        args["words"] = std::move(words);
    } else {
        args["charset"] = p.charset;
        args["min_len"] = p.min_len;
        args["max_len"] = p.max_len;
        args["start"] = static_cast<std::int64_t>(range.first);
        args["count"] = static_cast<std::int64_t>(range.second);
    }
    return args;
}

protocol::task_spec partition_task(
    const crack_plan& p, const crack_spec& s, std::pair<std::uint64_t, std::uint64_t> range
) {
    protocol::task_spec t;
    t.type = std::string(md5_crack_type);
    t.args = partition_args(p, range);
    t.priority = s.priority;
    t.timeout = s.partition_timeout;
    t.max_attempts = s.max_attempts;
    return t;
}

bool fits_one_multi(const std::vector<zkco::multi_op>& ops) {
    std::size_t bytes = 0;
    for (const auto& op : ops) {
        bytes += zkco::estimated_size(op);
    }
    return ops.size() <= 1000 && bytes <= max_crack_multi_bytes;
}

zkco::result<std::string> crack_job_id(const crack_spec& spec) {
    auto p = make_plan(spec);
    if (!p) {
        return p.error();
    }
    return std::move(p->job_id);
}

std::uint64_t partition_count(const crack_plan& p, int requested, int live_capacity) {
    std::uint64_t parts = 0;
    if (requested > 0) {
        parts = static_cast<std::uint64_t>(requested);
    } else {
        parts = static_cast<std::uint64_t>(
            std::clamp(4 * live_capacity, default_crack_partitions, max_crack_partitions)
        );
        const std::uint64_t unit =
            p.words_mode ? min_auto_partition_words : min_auto_partition_candidates;
        parts = std::min(parts, std::max<std::uint64_t>(1, (p.size + unit - 1) / unit));
    }
    if (!p.words_mode) {
        parts = std::max(parts, (p.size + max_partition_count - 1) / max_partition_count);
    }
    return std::min(parts, p.size);
}

}  // namespace zkd::crack
