// SPDX-License-Identifier: MIT
#include "apps/crack/crack_job.hpp"

#include "reactor/task_group.hpp"
#include "protocol/ids.hpp"
#include "apps/crack/md5_crack.hpp"
#include "roles/task_client.hpp"
#include "zkco/deadline.hpp"
#include "zkco/retry.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <boost/uuid/detail/sha1.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

namespace asio = boost::asio;
namespace json = boost::json;

namespace zkd::crack {

namespace {

class crack_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "zkd.crack"; }
    std::string message(int value) const override {
        switch (static_cast<crack_errc>(value)) {
        case crack_errc::bad_hash:
            return "the hash must be an MD5 digest: 32 hex digits";
        case crack_errc::bad_search:
            return "give either a charset (with a maximum length) or a word list, not both";
        case crack_errc::bad_charset:
            return "the charset must be 1 to 256 distinct characters of valid UTF-8";
        case crack_errc::bad_lengths:
            return "lengths must satisfy 1 <= minimum length <= maximum length <= 16";
        case crack_errc::empty_word_list:
            return "the word list has no words";
        case crack_errc::bad_word:
            return "a word of the list is not valid UTF-8";
        case crack_errc::bad_partitions:
            return "partitions must be 0 (automatic) to " + std::to_string(max_crack_partitions);
        case crack_errc::bad_task_options:
            return "priority must be 0-9, the partition timeout >= 0 and max attempts >= 1";
        case crack_errc::keyspace_too_large:
            return "the keyspace is too large: over " + std::to_string(max_crack_partitions) +
                   " partitions of 2^40 candidates; shorten the maximum length or the charset";
        case crack_errc::job_too_large:
            return "the job is too large: its partitions must fit one ZooKeeper transaction (" +
                   std::to_string(max_crack_multi_bytes) +
                   " bytes); split the word list into smaller lists";
        case crack_errc::garbage_job:
            return "the job node does not hold a crack job";
        case crack_errc::spec_conflict:
            return "the job node of this id describes a different search (an id collision)";
        case crack_errc::job_vanished:
            return "the job node was deleted while it was being followed";
        }
        return "unknown crack error";
    }
};

constexpr auto confirm_delay = std::chrono::seconds(1);
constexpr auto cancel_timeout = std::chrono::seconds(10);

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

/// The hash, lowercased, if it is 32 hex digits.
std::optional<std::string> normalize_hash(std::string_view h) {
    if (h.size() != 32) {
        return std::nullopt;
    }
    std::string out;
    for (const char c : h) {
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
            out += c;
        } else if (c >= 'A' && c <= 'F') {
            out += static_cast<char>(c - 'A' + 'a');
        } else {
            return std::nullopt;
        }
    }
    return out;
}

/// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) noexcept {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1FU;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0FU;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07U;
        } else {
            return false;
        }
        if (len > s.size() - i) {
            return false;
        }
        for (std::size_t k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0U) != 0x80U) {
                return false;
            }
            cp = (cp << 6U) | (cc & 0x3FU);
        }
        if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) {
            return false;
        }
        if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) {
            return false;
        }
        i += len;
    }
    return true;
}

/// A validated spec and what follows from it.
struct plan {
    std::string hash;
    bool words_mode = false;
    std::string charset;
    int min_len = 1;
    int max_len = 0;
    std::vector<std::string> words;
    std::uint64_t size = 0;
    json::object canonical;  ///< the job node's "spec"
    std::string job_id;
};

zkco::result<plan> make_plan(const crack_spec& s) {
    plan p;
    auto hash = normalize_hash(s.hash);
    if (!hash) {
        return zkco::error_code(crack_errc::bad_hash);
    }
    p.hash = std::move(*hash);
    if (s.charset.has_value() == s.words.has_value()) {
        return zkco::error_code(crack_errc::bad_search);
    }
    if (s.priority < 0 || s.priority > 9 || s.partition_timeout.count() < 0 || s.max_attempts < 1) {
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
            if (!valid_utf8(w)) {
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

/// Partition i's md5-crack args, for the (start, count) range it covers.
json::value partition_args(const plan& p, std::pair<std::uint64_t, std::uint64_t> range) {
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

/// The pending-node create of one partition task (T1).
zkco::result<zkco::multi_op> partition_op(
    const plan& p,
    const crack_spec& s,
    const protocol::layout& l,
    std::pair<std::uint64_t, std::uint64_t> range,
    const std::string& tid,
    const std::string& client,
    std::int64_t now
) {
    protocol::task_spec t;
    t.type = std::string(md5_crack_type);
    t.args = partition_args(p, range);
    t.priority = s.priority;
    t.timeout = s.partition_timeout;
    t.max_attempts = s.max_attempts;
    t.submitted_ms = now;
    t.client = client;
    if (!validate(t)) {
        return zkco::error_code(crack_errc::bad_task_options);
    }
    auto encoded = encode(t);
    if (!protocol::task_size_ok(encoded)) {
        return zkco::error_code(crack_errc::job_too_large);
    }
    return zkco::multi_op(zkco::op::create{
        l.pending_task(tid), std::move(encoded), zkco::create_mode::persistent, {}});
}

bool fits_one_multi(const std::vector<zkco::multi_op>& ops) {
    std::size_t bytes = 0;
    for (const auto& op : ops) {
        bytes += zkco::estimated_size(op);
    }
    return ops.size() <= 1000 && bytes <= max_crack_multi_bytes;
}

// --- folding results into the job --------------------------------------------------------

/// A partition result read by a watcher, or a partition found to have vanished.
struct inbox_item {
    std::size_t partition = 0;
    std::string task;
    std::optional<std::string> data;  ///< the result node's data; nullopt: vanished
};

void mark_failed(
    crack_job& j, std::size_t i, protocol::task_state state, std::string code, std::string message
) {
    j.partitions[i] = crack_partition::failed;
    j.failed.push_back(crack_failed_partition{
        static_cast<int>(i), j.tasks[i], state, std::move(code), std::move(message)});
    std::sort(j.failed.begin(), j.failed.end(), [](const auto& a, const auto& b) {
        return a.partition < b.partition;
    });
}

/// Applies one item to `j`; false if it changes nothing (the partition is accounted for
/// already, or the result is of an older task of that partition).
bool apply(crack_job& j, const inbox_item& item) {
    const std::size_t i = item.partition;
    if (i >= j.tasks.size() || j.tasks[i] != item.task ||
        j.partitions[i] != crack_partition::open) {
        return false;
    }
    if (!item.data) {
        mark_failed(
            j, i, protocol::task_state::unknown, "vanished",
            "the task and its result are gone (consumed by another client or reaped)"
        );
        return true;
    }
    auto r = protocol::decode_result(*item.data);
    if (!r) {
        mark_failed(j, i, protocol::task_state::unknown, "garbage_result", r.error().message);
        return true;
    }
    switch (r->state) {
    case protocol::task_state::succeeded: {
        const json::object* v = r->value.if_object();
        const json::value* found = v != nullptr ? v->if_contains("found") : nullptr;
        const json::value* tried_value = v != nullptr ? v->if_contains("tried") : nullptr;
        // -1: absent or not a count (a plain integer keeps GCC's maybe-uninitialized quiet)
        const std::int64_t tried =
            tried_value != nullptr ? protocol::as_int64(*tried_value).value_or(-1) : -1;
        if (found == nullptr || !found->is_bool() || tried < 0) {
            mark_failed(
                j, i, protocol::task_state::succeeded, "bad_value",
                R"(the partition's value is not {"found":bool,"tried":n})"
            );
            return true;
        }
        if (found->get_bool()) {
            const json::value* pre = v->if_contains("preimage");
            if (pre == nullptr || !pre->is_string() ||
                md5_hex(std::string_view(pre->get_string())) != j.hash) {
                mark_failed(
                    j, i, protocol::task_state::succeeded, "bad_value",
                    "the partition's preimage does not hash to the job's hash"
                );
                return true;
            }
            j.partitions[i] = crack_partition::found;
            j.tried += static_cast<std::uint64_t>(tried);
            if (j.state == crack_state::running) {
                j.state = crack_state::found;
                j.preimage = std::string(pre->get_string());
                j.found_partition = static_cast<int>(i);
                j.finished_ms = protocol::now_ms();
            }
        } else {
            j.partitions[i] = crack_partition::searched;
            j.tried += static_cast<std::uint64_t>(tried);
        }
        return true;
    }
    case protocol::task_state::cancelled:
        if (j.state == crack_state::found) {
            j.partitions[i] = crack_partition::cancelled;
            return true;
        }
        break;
    default:
        break;
    }
    mark_failed(
        j, i, r->state, r->error ? r->error->code : std::string(),
        r->error ? r->error->message : std::string()
    );
    return true;
}

/// A running job with every partition accounted for ends not_found or failed.
bool settle(crack_job& j) {
    if (j.state != crack_state::running || j.done() != j.total()) {
        return false;
    }
    j.state = j.failed.empty() ? crack_state::not_found : crack_state::failed;
    j.finished_ms = protocol::now_ms();
    return true;
}

/// True once the calling coroutine got a cancellation it lets through. Code that turned
/// throw_if_cancelled off checks it before starting what a cancellation emitted earlier
/// would not interrupt.
asio::awaitable<bool> cancelled() {
    const auto cs = co_await asio::this_coro::cancellation_state;
    co_return cs.cancelled() != asio::cancellation_type::none;
}

/// After an error: true when retrying makes sense (the outcome was unknown, the session is
/// back) and the calling coroutine was not cancelled.
asio::awaitable<bool> retry_after(zkco::client& zk, zkco::error_code ec) {
    const bool stopped = co_await cancelled();
    if (stopped) {
        co_return false;
    }
    const bool again = co_await zkco::reconnected_after(zk, ec);
    co_return again;
}

// --- one run_crack call ------------------------------------------------------------------

class crack_run {
public:
    crack_run(
        zkco::client& zk,
        protocol::layout l,
        crack_spec spec,
        std::function<void(const crack_progress&)> on_progress
    )
        : zk_(zk),
          l_(l),
          spec_(std::move(spec)),
          on_progress_(std::move(on_progress)),
          tc_(zk, l),
          wake_(zk.get_executor()),
          watchers_(zk.get_executor()),
          cancels_(zk.get_executor()) {}

    asio::awaitable<zkco::result<crack_outcome>> run() {
        // Cancellation is checked where it matters and ends in an error, never an exception;
        // the caller's setting is restored on the way out.
        const bool saved = co_await asio::this_coro::throw_if_cancelled();
        co_await asio::this_coro::throw_if_cancelled(false);
        auto r = co_await run_job();
        // The cancels started on a find complete even when following ended in an error.
        co_await cancels_.async_wait(asio::as_tuple(asio::use_awaitable));
        co_await asio::this_coro::throw_if_cancelled(saved);
        co_return r;
    }

private:
    asio::awaitable<zkco::result<crack_outcome>> run_job() {
        start_ = std::chrono::steady_clock::now();
        auto p = make_plan(spec_);
        if (!p) {
            co_return p.error();
        }
        plan_ = std::move(*p);
        path_ = std::string(crack_jobs_dir) + "/" + plan_.job_id;
        bool have_job = false;
        for (int round = 0; round < 10 && !have_job; ++round) {
            auto node = co_await read_job();
            if (!node) {
                co_return node.error();
            }
            if (node->has_value()) {
                auto adopted = adopt_existing(**node);
                if (!adopted) {
                    co_return adopted.error();
                }
                have_job = true;
                continue;
            }
            auto created = co_await create_job();
            if (!created) {
                co_return created.error();
            }
            have_job = *created == creation::created;  // else it exists now: read it
        }
        if (!have_job) {
            co_return zkco::error_code(crack_errc::job_vanished);
        }
        spdlog::info(
            "crack {}: {} ({} partitions, {} candidates, state {})", plan_.job_id,
            joined_ ? "joined" : "created", job_.total(), job_.size, to_string(job_.state)
        );
        if (job_.state == crack_state::failed && spec_.retry_failed) {
            auto again = co_await resubmit_failed();
            if (!again) {
                co_return again.error();
            }
        }
        if (is_terminal(job_.state)) {
            if (job_.state == crack_state::found) {
                start_cancels();  // in case whoever found it could not
            }
            tried_at_start_ = job_.tried;
            report();
        } else {
            auto followed = co_await follow();
            if (!followed) {
                co_return followed.error();
            }
        }
        co_return outcome();
    }

    asio::awaitable<zkco::result<void>> ensure_jobs_dir() {
        const std::string dir(crack_jobs_dir);
        for (;;) {
            auto there = co_await zk_.exists(dir);
            if (there && *there) {
                co_return zkco::result<void>();
            }
            if (there) {
                auto made = co_await zk_.create(dir, "");
                if (made || made.error() == zkco::errc::node_exists) {
                    co_return zkco::result<void>();
                }
                const bool retry = co_await retry_after(zk_, made.error());
                if (!retry) {
                    co_return made.error();
                }
                continue;
            }
            const bool retry = co_await retry_after(zk_, there.error());
            if (!retry) {
                co_return there.error();
            }
        }
    }

    /// The job node, or nullopt if it does not exist.
    asio::awaitable<zkco::result<std::optional<zkco::node>>> read_job() {
        for (;;) {
            auto node = co_await zk_.get(path_);
            if (node) {
                co_return std::optional<zkco::node>(std::move(*node));
            }
            if (node.error() == zkco::errc::no_node) {
                co_return std::optional<zkco::node>();
            }
            const bool retry = co_await retry_after(zk_, node.error());
            if (!retry) {
                co_return node.error();
            }
        }
    }

    zkco::result<void> adopt_existing(const zkco::node& node) {
        auto doc = decode_crack_job(node.data);
        if (!doc) {
            spdlog::warn(
                "crack {}: the job node is garbage: {}", plan_.job_id, doc.error().message
            );
            return zkco::error_code(crack_errc::garbage_job);
        }
        if (doc->hash != plan_.hash || doc->spec != plan_.canonical || doc->size != plan_.size) {
            return zkco::error_code(crack_errc::spec_conflict);
        }
        // Our own multi, applied although its reply was lost, reads as created by us.
        joined_ = my_ids_.empty() || doc->tasks != my_ids_;
        job_ = std::move(*doc);
        version_ = node.stat.version;
        return {};
    }

    /// The partition count for a new job (crack_spec::partitions, docs/crack.md).
    asio::awaitable<std::uint64_t> choose_partitions() {
        std::uint64_t parts = 0;
        if (spec_.partitions > 0) {
            parts = static_cast<std::uint64_t>(spec_.partitions);
        } else {
            const int capacity = co_await live_capacity();
            parts = static_cast<std::uint64_t>(
                std::clamp(4 * capacity, default_crack_partitions, max_crack_partitions)
            );
            const std::uint64_t unit =
                plan_.words_mode ? min_auto_partition_words : min_auto_partition_candidates;
            parts = std::min(parts, std::max<std::uint64_t>(1, (plan_.size + unit - 1) / unit));
        }
        if (!plan_.words_mode) {
            parts = std::max(parts, (plan_.size + max_partition_count - 1) / max_partition_count);
        }
        co_return std::min(parts, plan_.size);
    }

    /// Capacity of the live workers that are not draining; 0 if it cannot be read.
    asio::awaitable<int> live_capacity() {
        auto kids = co_await zk_.get_children(protocol::layout::workers_dir());
        if (!kids) {
            co_return 0;
        }
        int capacity = 0;
        for (const auto& name : kids->names) {
            auto node = co_await zk_.get(protocol::layout::worker(name));
            if (!node) {
                continue;
            }
            auto w = protocol::decode_worker(node->data);
            if (w && !w->draining && w->capacity) {
                capacity += std::clamp(*w->capacity, 0, max_crack_partitions);
            }
        }
        co_return std::min(capacity, max_crack_partitions);
    }

    /// Creates the job node and all its partitions in one multi. Yields `exists` if the job
    /// node exists (another client made it, or our earlier attempt applied).
    enum class creation { created, exists };

    asio::awaitable<zkco::result<creation>> create_job() {
        const std::uint64_t parts = co_await choose_partitions();
        const std::int64_t now = protocol::now_ms();
        crack_job doc;
        doc.hash = plan_.hash;
        doc.spec = plan_.canonical;
        doc.size = plan_.size;
        doc.created_ms = now;
        doc.client = ids_.client_hex();
        const auto ranges = split_keyspace(plan_.size, parts);
        std::vector<zkco::multi_op> ops;
        ops.reserve(ranges.size() + 1);
        ops.emplace_back(zkco::op::create{path_, {}, zkco::create_mode::persistent, {}});
        for (const auto& range : ranges) {
            std::string tid = ids_.next(spec_.priority, now);
            auto op = partition_op(plan_, spec_, l_, range, tid, doc.client, now);
            if (!op) {
                co_return op.error();
            }
            ops.push_back(std::move(*op));
            doc.tasks.push_back(std::move(tid));
        }
        doc.partitions.assign(doc.tasks.size(), crack_partition::open);
        std::get<zkco::op::create>(ops.front()).data = encode(doc);
        if (!fits_one_multi(ops)) {
            co_return zkco::error_code(crack_errc::job_too_large);
        }
        my_ids_ = doc.tasks;
        auto dir = co_await ensure_jobs_dir();
        if (!dir) {
            co_return dir.error();
        }
        for (;;) {
            const bool stop = co_await cancelled();
            if (stop) {
                co_return zkco::error_code(asio::error::operation_aborted);
            }
            auto copy = ops;
            auto r = co_await zk_.multi(std::move(copy));
            if (r) {
                job_ = std::move(doc);
                version_ = 0;
                joined_ = false;
                co_return creation::created;
            }
            const auto failed = r.failed_op();
            if (failed && *failed < r.results.size()) {
                const auto ec = r.results[*failed].ec;
                if (*failed == 0 && ec == zkco::errc::node_exists) {
                    co_return creation::exists;
                }
                spdlog::warn(
                    "crack {}: cannot create the job (op {}): {}", plan_.job_id, *failed,
                    ec.message()
                );
                co_return ec;
            }
            const bool retry = co_await retry_after(zk_, r.ec);
            if (!retry) {
                co_return r.ec;
            }
        }
    }

    /// Joining a failed job: its failed partitions become new tasks, the job running again,
    /// in one multi checked against the job's version.
    asio::awaitable<zkco::result<void>> resubmit_failed() {
        for (int round = 0; round < 20 && job_.state == crack_state::failed; ++round) {
            const auto ranges = split_keyspace(plan_.size, job_.tasks.size());
            if (ranges.size() != job_.tasks.size()) {
                co_return zkco::error_code(crack_errc::spec_conflict);
            }
            crack_job doc = job_;
            const std::int64_t now = protocol::now_ms();
            std::vector<zkco::multi_op> ops;
            ops.emplace_back(zkco::op::set{path_, {}, version_});
            int redo = 0;
            for (std::size_t i = 0; i < doc.tasks.size(); ++i) {
                if (doc.partitions[i] != crack_partition::failed) {
                    continue;
                }
                std::string tid = ids_.next(spec_.priority, now);
                auto op = partition_op(plan_, spec_, l_, ranges[i], tid, ids_.client_hex(), now);
                if (!op) {
                    co_return op.error();
                }
                ops.push_back(std::move(*op));
                doc.tasks[i] = std::move(tid);
                doc.partitions[i] = crack_partition::open;
                ++redo;
            }
            if (redo == 0) {
                co_return zkco::result<void>();
            }
            doc.failed.clear();
            doc.state = crack_state::running;
            doc.finished_ms = 0;
            ++doc.retries;
            std::get<zkco::op::set>(ops.front()).data = encode(doc);
            if (!fits_one_multi(ops)) {
                co_return zkco::error_code(crack_errc::job_too_large);
            }
            auto r = co_await zk_.multi(std::move(ops));
            if (r) {
                const std::int32_t v = r.results.empty() ? version_ + 1 : r.results[0].stat.version;
                adopt(std::move(doc), v);
                resubmitted_ += redo;
                spdlog::info("crack {}: resubmitted {} failed partitions", plan_.job_id, redo);
                co_return zkco::result<void>();
            }
            const auto failed = r.failed_op();
            if (failed && (*failed != 0 || r.results[0].ec != zkco::errc::bad_version)) {
                co_return r.results[*failed].ec;
            }
            if (!failed) {
                const bool retry = co_await retry_after(zk_, r.ec);
                if (!retry) {
                    co_return r.ec;
                }
            }
            // Someone else changed the job (or our multi applied unseen): read it again.
            auto node = co_await read_job();
            if (!node) {
                co_return node.error();
            }
            if (!node->has_value()) {
                co_return zkco::error_code(crack_errc::job_vanished);
            }
            auto fresh = decode_crack_job((*node)->data);
            if (!fresh) {
                co_return zkco::error_code(crack_errc::garbage_job);
            }
            if (fresh->tasks == doc.tasks) {
                resubmitted_ += redo;  // ours applied
            }
            adopt(std::move(*fresh), (*node)->stat.version);
        }
        co_return zkco::result<void>();
    }

    /// Follows a running job until it is terminal (and, once found, its cancelled
    /// partitions have reported or cleanup_grace passed).
    asio::awaitable<zkco::result<void>> follow() {
        follow_start_ = std::chrono::steady_clock::now();
        tried_at_start_ = job_.tried;
        watchers_.spawn(watch_job(), "crack job " + plan_.job_id);
        sync_watchers();
        report();
        auto now = std::chrono::steady_clock::now();
        next_scan_ = joined_ ? now : now + spec_.reconcile_interval;
        auto cleanup_until = std::chrono::steady_clock::time_point::max();
        zkco::error_code failure;
        for (;;) {
            const bool unsettled =
                job_.state == crack_state::running && job_.done() == job_.total();
            if (!inbox_.empty() || unsettled) {
                auto folded = co_await fold();
                if (!folded) {
                    failure = folded.error();
                    break;
                }
            }
            now = std::chrono::steady_clock::now();
            if (job_dirty_) {
                job_dirty_ = false;
                sync_watchers();
                report();
                if (suspects_.empty()) {
                    next_scan_ = std::max(next_scan_, now + spec_.reconcile_interval);
                }
            }
            if (fatal_) {
                failure = fatal_;
                break;
            }
            if (job_.state == crack_state::not_found || job_.state == crack_state::failed) {
                break;
            }
            if (job_.state == crack_state::found) {
                if (!cancels_started_) {
                    start_cancels();
                    cleanup_until = now + spec_.cleanup_grace;
                }
                if (job_.done() == job_.total() || now >= cleanup_until) {
                    break;
                }
            } else if (now >= next_scan_) {
                co_await reconcile();
                continue;
            }
            const bool stop = co_await cancelled();
            if (stop) {
                failure = asio::error::operation_aborted;
                break;
            }
            if (!inbox_.empty() || job_dirty_ || fatal_) {
                continue;  // arrived while we were busy: nothing can run between here and the wait
            }
            wake_.expires_at(job_.state == crack_state::found ? cleanup_until : next_scan_);
            co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
            const bool stopped = co_await cancelled();
            if (stopped) {
                failure = asio::error::operation_aborted;
                break;
            }
        }
        watchers_.emit(asio::cancellation_type::terminal);
        co_await watchers_.async_wait(asio::as_tuple(asio::use_awaitable));
        if (failure) {
            co_return failure;
        }
        co_return zkco::result<void>();
    }

    /// Folds the inbox into the job node (versioned set, retried on bad_version against the
    /// node as it is then), then deletes the results it read (T5).
    asio::awaitable<zkco::result<void>> fold() {
        std::vector<inbox_item> items;
        items.swap(inbox_);
        crack_job doc = job_;
        std::int32_t version = version_;
        for (;;) {
            bool changed = false;
            for (const auto& item : items) {
                changed = apply(doc, item) || changed;
            }
            changed = settle(doc) || changed;
            if (!changed) {
                adopt(std::move(doc), version);
                break;
            }
            auto written = co_await zk_.set(path_, encode(doc), version);
            if (written) {
                adopt(std::move(doc), written->version);
                break;
            }
            if (written.error() == zkco::errc::no_node) {
                co_return zkco::error_code(crack_errc::job_vanished);
            }
            if (written.error() != zkco::errc::bad_version) {
                const bool retry = co_await retry_after(zk_, written.error());
                if (!retry) {
                    co_return written.error();
                }
            }
            // Another participant wrote first (or our write applied unseen): start again
            // from the node as it is; what is accounted for there is not applied twice.
            auto node = co_await read_job();
            if (!node) {
                co_return node.error();
            }
            if (!node->has_value()) {
                co_return zkco::error_code(crack_errc::job_vanished);
            }
            auto fresh = decode_crack_job((*node)->data);
            if (!fresh) {
                co_return zkco::error_code(crack_errc::garbage_job);
            }
            doc = std::move(*fresh);
            version = (*node)->stat.version;
        }
        for (const auto& item : items) {
            if (item.data) {
                zk_.async_remove(l_.result(item.task), zkco::any_version, [](zkco::error_code) {});
            }
        }
        co_return zkco::result<void>();
    }

    /// Takes `doc` if it is newer than what we hold.
    void adopt(crack_job doc, std::int32_t version) {
        if (version > version_) {
            job_ = std::move(doc);
            version_ = version;
            job_dirty_ = true;
        }
    }

    void fail(zkco::error_code ec) {
        if (!fatal_) {
            fatal_ = ec;
        }
        wake_.cancel();
    }

    /// A watcher's error ends the run with it, unless the watcher was cancelled (the run is
    /// stopping then anyway).
    asio::awaitable<void> fail_unless_cancelled(zkco::error_code ec) {
        const bool stopped = co_await cancelled();
        if (!stopped) {
            fail(ec);
        }
    }

    /// Starts a watcher for each open partition's current task that has none.
    void sync_watchers() {
        for (std::size_t i = 0; i < job_.tasks.size(); ++i) {
            if (job_.partitions[i] == crack_partition::open && !watched_.contains(job_.tasks[i])) {
                watched_.insert(job_.tasks[i]);
                watchers_.spawn(watch_result(i, job_.tasks[i]), job_.tasks[i]);
            }
        }
    }

    /// Waits (by watch) for the task's result and hands it to the main loop. A result
    /// someone else consumed first is seen in the job node instead; this watcher then waits
    /// until the end of the follow.
    asio::awaitable<void> watch_result(std::size_t partition, std::string tid) {
        co_await asio::this_coro::throw_if_cancelled(false);
        const std::string path = l_.result(tid);
        for (;;) {
            auto w = co_await zk_.watch_exists(path);
            if (!w) {
                const bool retry = co_await retry_after(zk_, w.error());
                if (retry) {
                    continue;
                }
                co_await fail_unless_cancelled(w.error());
                co_return;
            }
            if (w->value) {
                auto node = co_await zk_.get(path);
                if (node) {
                    inbox_.push_back(inbox_item{partition, tid, std::move(node->data)});
                    wake_.cancel();
                    co_return;
                }
                if (node.error() != zkco::errc::no_node) {
                    const bool retry = co_await retry_after(zk_, node.error());
                    if (!retry) {
                        co_return;
                    }
                }
                continue;  // consumed meanwhile: look again (arms a new watch)
            }
            auto ev = co_await w->watch.changed();
            if (!ev) {
                co_await fail_unless_cancelled(ev.error());
                co_return;
            }
        }
    }

    /// Keeps the job as the node says (other participants' folds, a find).
    asio::awaitable<void> watch_job() {
        co_await asio::this_coro::throw_if_cancelled(false);
        for (;;) {
            auto w = co_await zk_.watch_get(path_);
            if (!w) {
                if (w.error() == zkco::errc::no_node) {
                    fail(crack_errc::job_vanished);
                    co_return;
                }
                const bool retry = co_await retry_after(zk_, w.error());
                if (retry) {
                    continue;
                }
                co_await fail_unless_cancelled(w.error());
                co_return;
            }
            auto doc = decode_crack_job(w->value.data);
            if (!doc) {
                fail(crack_errc::garbage_job);
                co_return;
            }
            adopt(std::move(*doc), w->value.stat.version);
            wake_.cancel();
            auto ev = co_await w->watch.changed();
            if (!ev) {
                co_await fail_unless_cancelled(ev.error());
                co_return;
            }
        }
    }

    /// Looks for open partitions whose task is nowhere: not pending, not assigned, no
    /// result. Listing in the order tasks move (pending, assigned, result), a task moving on
    /// during the scan is still seen; only a requeue (assigned back to pending) can hide it,
    /// so a partition counts as vanished only if two scans a second apart both miss it.
    asio::awaitable<void> reconcile() {
        const auto now = std::chrono::steady_clock::now();
        next_scan_ = now + spec_.reconcile_interval;
        std::map<std::string, std::size_t> open;
        for (std::size_t i = 0; i < job_.tasks.size(); ++i) {
            if (job_.partitions[i] == crack_partition::open) {
                open.emplace(job_.tasks[i], i);
            }
        }
        std::set<std::string> seen;
        bool complete = !open.empty();
        for (const auto& shard : l_.pending_shard_paths()) {
            if (!complete) {
                break;
            }
            auto kids = co_await zk_.get_children(shard);
            if (!kids) {
                complete = false;
                break;
            }
            for (const auto& name : kids->names) {
                if (open.contains(name)) {
                    seen.insert(name);
                }
            }
        }
        if (complete) {
            auto workers = co_await zk_.get_children(protocol::layout::assign_dir());
            complete = static_cast<bool>(workers);
            for (const auto& w : workers ? workers->names : std::vector<std::string>{}) {
                auto kids = co_await zk_.get_children(protocol::layout::assign_dir(w));
                if (!kids) {
                    if (kids.error() == zkco::errc::no_node) {
                        continue;
                    }
                    complete = false;
                    break;
                }
                for (const auto& name : kids->names) {
                    if (open.contains(name)) {
                        seen.insert(name);
                    }
                }
            }
        }
        if (complete) {
            for (const auto& [tid, i] : open) {
                if (seen.contains(tid)) {
                    continue;
                }
                auto there = co_await zk_.exists(l_.result(tid));
                if (!there) {
                    complete = false;
                    break;
                }
                if (*there) {
                    seen.insert(tid);
                }
            }
        }
        if (!complete) {
            suspects_.clear();
            co_return;
        }
        std::set<std::string> missing;
        for (const auto& [tid, i] : open) {
            if (!seen.contains(tid)) {
                missing.insert(tid);
            }
        }
        if (suspects_.empty()) {
            suspects_ = std::move(missing);
            if (!suspects_.empty()) {
                next_scan_ = now + confirm_delay;
            }
            co_return;
        }
        for (const auto& tid : missing) {
            if (suspects_.contains(tid)) {
                spdlog::warn(
                    "crack {}: partition {} (task {}) vanished", plan_.job_id, open[tid], tid
                );
                inbox_.push_back(inbox_item{open[tid], tid, std::nullopt});
            }
        }
        suspects_.clear();
    }

    /// Asks the master to cancel every open partition (T7).
    void start_cancels() {
        cancels_started_ = true;
        for (std::size_t i = 0; i < job_.tasks.size(); ++i) {
            if (job_.partitions[i] == crack_partition::open) {
                cancels_.spawn(cancel_one(job_.tasks[i]), "cancel " + job_.tasks[i]);
            }
        }
    }

    asio::awaitable<void> cancel_one(std::string tid) {
        co_await asio::this_coro::throw_if_cancelled(false);
        for (int tries = 0; tries < 5; ++tries) {
            auto op = tc_.cancel(tid);
            auto r = co_await zkco::with_timeout(std::move(op), cancel_timeout);
            if (r) {
                co_return;
            }
            const bool retry = co_await retry_after(zk_, r.error());
            if (!retry) {
                spdlog::debug("crack: cannot cancel {}: {}", tid, r.error().message());
                co_return;
            }
        }
    }

    void report() {
        if (!on_progress_) {
            return;
        }
        crack_progress p;
        p.job = plan_.job_id;
        p.state = job_.state;
        p.total = job_.total();
        p.done = job_.done();
        p.size = job_.size;
        p.tried = job_.tried;
        const auto now = std::chrono::steady_clock::now();
        const double secs = std::chrono::duration<double>(now - follow_start_).count();
        if (job_.tried > tried_at_start_ && secs > 0) {
            p.rate = static_cast<double>(job_.tried - tried_at_start_) / secs;
        }
        p.preimage = job_.preimage;
        p.joined = joined_;
        p.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_);
        on_progress_(p);
    }

    crack_outcome outcome() const {
        crack_outcome o;
        o.job = plan_.job_id;
        o.state = job_.state;
        o.preimage = job_.preimage;
        o.joined = joined_;
        o.resubmitted = resubmitted_;
        o.total = job_.total();
        o.done = job_.done();
        o.size = job_.size;
        o.tried = job_.tried;
        o.failed = job_.failed;
        o.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - start_
        );
        return o;
    }

    zkco::client& zk_;
    protocol::layout l_;
    crack_spec spec_;
    std::function<void(const crack_progress&)> on_progress_;
    roles::task_client tc_;
    protocol::task_id_generator ids_;
    plan plan_;
    std::string path_;
    std::chrono::steady_clock::time_point start_;

    crack_job job_;
    std::int32_t version_ = -1;
    bool joined_ = false;
    int resubmitted_ = 0;
    std::vector<std::string> my_ids_;  // the task ids of our create multi

    // Following.
    std::chrono::steady_clock::time_point follow_start_;
    std::uint64_t tried_at_start_ = 0;
    asio::steady_timer wake_;  // the main loop's condition variable: cancel() wakes it
    std::vector<inbox_item> inbox_;
    bool job_dirty_ = false;
    zkco::error_code fatal_;
    std::set<std::string> watched_;
    std::set<std::string> suspects_;  // missing in the last scan
    std::chrono::steady_clock::time_point next_scan_;
    bool cancels_started_ = false;
    reactor::task_group watchers_;
    reactor::task_group cancels_;
};

}  // namespace

const boost::system::error_category& crack_category() noexcept {
    static const crack_category_impl instance;
    return instance;
}

zkco::error_code make_error_code(crack_errc e) noexcept {
    return {static_cast<int>(e), crack_category()};
}

std::optional<std::string> named_charset(std::string_view name) {
    static const std::map<std::string_view, std::string> sets = [] {
        std::string printable;
        for (char c = 0x20; c < 0x7f; ++c) {
            printable += c;
        }
        const std::string lower = "abcdefghijklmnopqrstuvwxyz";
        const std::string upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        const std::string digits = "0123456789";
        return std::map<std::string_view, std::string>{
            {"lower", lower},
            {"upper", upper},
            {"digits", digits},
            {"alpha", lower + upper},
            {"alnum", lower + upper + digits},
            {"hex", "0123456789abcdef"},
            {"printable", printable},
        };
    }();
    std::string out;
    std::set<char> have;
    while (!name.empty()) {
        const auto plus = name.find('+');
        const auto part = name.substr(0, plus);
        const auto it = sets.find(part);
        if (it == sets.end()) {
            return std::nullopt;
        }
        for (const char c : it->second) {
            if (have.insert(c).second) {
                out += c;
            }
        }
        if (plus == std::string_view::npos) {
            break;
        }
        name.remove_prefix(plus + 1);
        if (name.empty()) {
            return std::nullopt;  // a trailing '+'
        }
    }
    if (out.empty()) {
        return std::nullopt;
    }
    return out;
}

std::vector<std::string> parse_word_list(std::string_view text, std::size_t* skipped) {
    std::vector<std::string> words;
    std::size_t bad = 0;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        auto line = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        if (line.empty()) {
            continue;
        }
        if (!valid_utf8(line)) {
            ++bad;
            continue;
        }
        words.emplace_back(line);
    }
    if (skipped != nullptr) {
        *skipped = bad;
    }
    return words;
}

zkco::result<std::string> crack_job_id(const crack_spec& spec) {
    auto p = make_plan(spec);
    if (!p) {
        return p.error();
    }
    return std::move(p->job_id);
}

asio::awaitable<zkco::result<crack_outcome>> run_crack(
    zkco::client& zk,
    protocol::layout l,
    crack_spec spec,
    std::function<void(const crack_progress&)> on_progress
) {
    crack_run job(zk, l, std::move(spec), std::move(on_progress));
    auto r = co_await job.run();
    co_return r;
}

asio::awaitable<zkco::result<std::vector<crack_job_info>>> crack_status(
    zkco::client& zk, std::string hash
) {
    const auto normalized = normalize_hash(hash);
    if (!normalized) {
        co_return zkco::error_code(crack_errc::bad_hash);
    }
    const std::string dir(crack_jobs_dir);
    std::vector<crack_job_info> out;
    auto kids = co_await zk.get_children(dir);
    if (!kids) {
        if (kids.error() == zkco::errc::no_node) {
            co_return out;
        }
        co_return kids.error();
    }
    const std::string prefix = "crack-" + *normalized + "-";
    for (const auto& name : kids->names) {
        if (name.rfind(prefix, 0) != 0) {
            continue;
        }
        std::string path = dir;
        path += '/';
        path += name;
        auto node = co_await zk.get(std::move(path));
        if (!node) {
            if (node.error() == zkco::errc::no_node) {
                continue;
            }
            co_return node.error();
        }
        crack_job_info info;
        info.id = name;
        info.version = node->stat.version;
        auto doc = decode_crack_job(node->data);
        if (doc) {
            info.job = std::move(*doc);
        } else {
            info.problem = doc.error().message;
        }
        out.push_back(std::move(info));
    }
    std::sort(out.begin(), out.end(), [](const crack_job_info& a, const crack_job_info& b) {
        const std::int64_t ta = a.job ? a.job->created_ms : 0;
        const std::int64_t tb = b.job ? b.job->created_ms : 0;
        return ta != tb ? ta < tb : a.id < b.id;
    });
    co_return out;
}

asio::awaitable<zkco::result<crack_forgotten>> crack_forget(zkco::client& zk,
                                                              std::string hash) {
    auto jobs = co_await crack_status(zk, std::move(hash));
    if (!jobs) {
        co_return jobs.error();
    }
    crack_forgotten out;
    for (auto& info : *jobs) {
        if (info.job && info.job->state == crack_state::running) {
            out.kept.push_back(std::move(info));
            continue;
        }
        auto removed = co_await zk.remove(std::string(crack_jobs_dir) + "/" + info.id, info.version);
        if (removed) {
            out.removed.push_back(std::move(info));
        } else if (removed.error() == zkco::errc::bad_version) {
            out.kept.push_back(std::move(info));  // changed meanwhile (a retry started)
        } else if (removed.error() != zkco::errc::no_node) {
            co_return removed.error();
        }
    }
    co_return out;
}

}  // namespace zkd::crack
