// SPDX-License-Identifier: MIT
// The crack job node's codec (docs/crack.md §2). Pure, no I/O: it builds, and is fuzzed
// (tests/fuzz), on its own.
#include "apps/crack/job.hpp"
#include "protocol/ids.hpp"

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <cmath>

namespace json = boost::json;

namespace zkd::crack {

namespace {

/// True for 32 lowercase hex digits (a normalized hash).
bool is_job_hash(std::string_view h) noexcept {
    return h.size() == 32 && std::all_of(h.begin(), h.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

/// True when no number in `v` is infinite (JSON text such as 1e999 reads as one, and cannot
/// be written back).
bool finite(const json::value& v) noexcept {
    if (v.is_double()) {
        return std::isfinite(v.get_double());
    }
    if (const auto* a = v.if_array()) {
        return std::all_of(a->begin(), a->end(), [](const json::value& e) { return finite(e); });
    }
    if (const auto* o = v.if_object()) {
        return std::all_of(o->begin(), o->end(), [](const auto& kv) { return finite(kv.value()); });
    }
    return true;
}

std::optional<std::uint64_t> as_count(const json::value* v) {
    if (v == nullptr) {
        return std::nullopt;
    }
    const auto n = protocol::as_int64(*v);
    if (!n || *n < 0) {
        return std::nullopt;
    }
    return static_cast<std::uint64_t>(*n);
}

}  // namespace

std::string_view to_string(crack_state s) noexcept {
    switch (s) {
    case crack_state::running:
        return "running";
    case crack_state::found:
        return "found";
    case crack_state::not_found:
        return "not_found";
    case crack_state::failed:
        return "failed";
    }
    return "running";
}

std::optional<crack_state> parse_crack_state(std::string_view s) noexcept {
    for (const auto st :
         {crack_state::running, crack_state::found, crack_state::not_found, crack_state::failed}) {
        if (to_string(st) == s) {
            return st;
        }
    }
    return std::nullopt;
}

bool is_terminal(crack_state s) noexcept {
    return s != crack_state::running;
}

int crack_job::done() const noexcept {
    return static_cast<int>(std::count_if(partitions.begin(), partitions.end(), [](char c) {
        return c != crack_partition::open;
    }));
}

std::string encode(const crack_job& j) {
    json::object o;
    o["v"] = protocol::format_version;
    o["hash"] = j.hash;
    o["spec"] = j.spec;
    o["size"] = static_cast<std::int64_t>(j.size);
    json::array tasks;
    tasks.reserve(j.tasks.size());
    for (const auto& t : j.tasks) {
        tasks.emplace_back(t);
    }
    o["tasks"] = std::move(tasks);
    o["partitions"] = j.partitions;
    o["state"] = to_string(j.state);
    o["done"] = j.done();
    o["tried"] = static_cast<std::int64_t>(j.tried);
    if (j.preimage) {
        o["preimage"] = *j.preimage;
    }
    if (j.found_partition >= 0) {
        o["found_partition"] = j.found_partition;
    }
    json::array failed;
    for (const auto& f : j.failed) {
        failed.emplace_back(json::object{
            {"partition", f.partition},
            {"task", f.task},
            {"state", to_string(f.state)},
            {"code", f.code},
            {"message", f.message}});
    }
    o["failed_partitions"] = std::move(failed);
    o["created_ms"] = j.created_ms;
    if (j.finished_ms != 0) {
        o["finished_ms"] = j.finished_ms;
    }
    o["client"] = j.client;
    o["retries"] = j.retries;
    return protocol::to_text(o);
}

protocol::codec_result<crack_job> decode_crack_job(std::string_view data) {
    boost::system::error_code ec;
    json::value parsed = protocol::parse_json(data, ec);
    if (ec) {
        return protocol::decode_error{"not JSON: " + ec.message()};
    }
    if (!finite(parsed)) {
        return protocol::decode_error{"not JSON: a number is out of range"};
    }
    const json::object* o = parsed.if_object();
    if (o == nullptr) {
        return protocol::decode_error{"not a JSON object"};
    }
    const json::value* v = o->if_contains("v");
    const auto version = v != nullptr ? protocol::as_int64(*v) : std::nullopt;
    if (!version) {
        return protocol::decode_error{"missing format version \"v\""};
    }
    if (*version != protocol::format_version) {
        return protocol::decode_error{"unsupported format version " + std::to_string(*version)};
    }
    crack_job j;
    const json::value* hash = o->if_contains("hash");
    if (hash == nullptr || !hash->is_string() || !is_job_hash(hash->get_string())) {
        return protocol::decode_error{"\"hash\" must be 32 lowercase hex digits"};
    }
    j.hash = std::string(hash->get_string());
    const json::value* spec = o->if_contains("spec");
    if (spec == nullptr || !spec->is_object()) {
        return protocol::decode_error{"\"spec\" must be an object"};
    }
    j.spec = spec->get_object();
    const auto size = as_count(o->if_contains("size"));
    if (!size) {
        return protocol::decode_error{"\"size\" must be a count"};
    }
    j.size = *size;
    const json::value* tasks = o->if_contains("tasks");
    if (tasks == nullptr || !tasks->is_array() || tasks->get_array().empty()) {
        return protocol::decode_error{"\"tasks\" must be a non-empty array of task ids"};
    }
    for (const auto& t : tasks->get_array()) {
        if (!t.is_string() || !protocol::is_valid_task_id(t.get_string())) {
            return protocol::decode_error{"\"tasks\" holds something that is not a task id"};
        }
        j.tasks.emplace_back(t.get_string());
    }
    const json::value* parts = o->if_contains("partitions");
    if (parts == nullptr || !parts->is_string() || parts->get_string().size() != j.tasks.size()) {
        return protocol::decode_error{
            "\"partitions\" must be a string with one character per task"};
    }
    j.partitions = std::string(parts->get_string());
    for (const char c : j.partitions) {
        if (c != crack_partition::open && c != crack_partition::searched &&
            c != crack_partition::found && c != crack_partition::failed &&
            c != crack_partition::cancelled) {
            return protocol::decode_error{"\"partitions\" holds an unknown character"};
        }
    }
    const json::value* state = o->if_contains("state");
    const auto st = state != nullptr && state->is_string() ? parse_crack_state(state->get_string())
                                                           : std::nullopt;
    if (!st) {
        return protocol::decode_error{"\"state\" must be running, found, not_found or failed"};
    }
    j.state = *st;
    const auto tried = as_count(o->if_contains("tried"));
    if (!tried) {
        return protocol::decode_error{"\"tried\" must be a count"};
    }
    j.tried = *tried;
    if (const json::value* pre = o->if_contains("preimage"); pre != nullptr && !pre->is_null()) {
        if (!pre->is_string()) {
            return protocol::decode_error{"\"preimage\" must be a string"};
        }
        j.preimage = std::string(pre->get_string());
    }
    if (j.state == crack_state::found && !j.preimage) {
        return protocol::decode_error{"a found job needs its \"preimage\""};
    }
    if (const auto fp = as_count(o->if_contains("found_partition")); fp && *fp < j.tasks.size()) {
        j.found_partition = static_cast<int>(*fp);
    }
    if (const json::value* failed = o->if_contains("failed_partitions");
        failed != nullptr && !failed->is_null()) {
        if (!failed->is_array()) {
            return protocol::decode_error{"\"failed_partitions\" must be an array"};
        }
        for (const auto& f : failed->get_array()) {
            const json::object* fo = f.if_object();
            const auto index =
                fo != nullptr ? as_count(fo->if_contains("partition")) : std::nullopt;
            if (!index || *index >= j.tasks.size()) {
                return protocol::decode_error{"\"failed_partitions\" holds a bad partition number"};
            }
            crack_failed_partition fp;
            fp.partition = static_cast<int>(*index);
            auto text = [&](std::string_view key) {
                const json::value* s = fo->if_contains(key);
                return s != nullptr && s->is_string() ? std::string(s->get_string())
                                                      : std::string();
            };
            fp.task = text("task");
            fp.state =
                protocol::parse_task_state(text("state")).value_or(protocol::task_state::unknown);
            fp.code = text("code");
            fp.message = text("message");
            j.failed.push_back(std::move(fp));
        }
    }
    j.created_ms = static_cast<std::int64_t>(as_count(o->if_contains("created_ms")).value_or(0));
    j.finished_ms = static_cast<std::int64_t>(as_count(o->if_contains("finished_ms")).value_or(0));
    if (const json::value* c = o->if_contains("client"); c != nullptr && c->is_string()) {
        j.client = std::string(c->get_string());
    }
    j.retries = static_cast<int>(std::min<std::uint64_t>(
        as_count(o->if_contains("retries")).value_or(0), static_cast<std::uint64_t>(1) << 30
    ));
    return j;
}

}  // namespace zkd::crack
