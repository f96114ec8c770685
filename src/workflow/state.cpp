// SPDX-License-Identifier: MIT
#include "workflow/state.hpp"

#include "protocol/json_int.hpp"
#include "workflow/spec.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace zkd::workflow {

namespace json = boost::json;
using protocol::codec_result;
using protocol::decode_error;
using protocol::integer_in;

namespace {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

/// The document as an object with "v":1, or why not.
codec_result<json::object> open_doc(std::string_view data, std::string_view what) {
    boost::system::error_code ec;
    auto v = protocol::parse_json(data, ec);
    if (ec || !v.is_object()) {
        return decode_error{std::string(what) + " is not a JSON object"};
    }
    auto& o = v.get_object();
    const auto* ver = o.if_contains("v");
    const auto n = ver == nullptr ? std::nullopt : protocol::as_integer(*ver);
    if (!n) {
        return decode_error{std::string(what) + " has no format version \"v\"", "v"};
    }
    if (*n != protocol::format_version) {
        return decode_error{"unsupported format version " + std::to_string(*n), "v"};
    }
    return std::move(o);
}

bool valid_step_char(char c) noexcept {
    return c == '-' || c == 'r' || c == 's' || c == 'f' || c == 'k' || c == 'c';
}

}  // namespace

std::string encode_header(const workflow_header& h) {
    json::object o;
    o["v"] = protocol::format_version;
    if (!h.name.empty()) {
        o["name"] = h.name;
    }
    o["steps"] = h.steps;
    o["chunks"] = h.chunks;
    o["spec_bytes"] = h.spec_bytes;
    o["created_ms"] = h.created_ms;
    if (!h.submitted_by.empty()) {
        o["submitted_by"] = h.submitted_by;
    }
    return protocol::to_text(o);
}

codec_result<workflow_header> decode_header(std::string_view data) {
    auto doc = open_doc(data, "a workflow header");
    if (!doc) {
        return doc.error();
    }
    const auto& o = *doc;
    workflow_header h;
    const auto steps = integer_in(o, "steps", 1, static_cast<std::int64_t>(max_steps));
    const auto chunks = integer_in(o, "chunks", 1, static_cast<std::int64_t>(max_spec_chunks));
    const auto bytes = integer_in(o, "spec_bytes", 0, static_cast<std::int64_t>(max_spec_bytes));
    const auto created = integer_in(o, "created_ms", 0, int64_max);
    if (!steps) {
        return decode_error{"\"steps\" must be an integer from 1 to 50000", "steps"};
    }
    if (!chunks) {
        return decode_error{"\"chunks\" must be an integer from 1 to 64", "chunks"};
    }
    if (!bytes || *bytes > *chunks * static_cast<std::int64_t>(spec_chunk_bytes)) {
        return decode_error{"\"spec_bytes\" does not fit its chunks", "spec_bytes"};
    }
    if (!created) {
        return decode_error{"\"created_ms\" is missing or out of range", "created_ms"};
    }
    h.steps = static_cast<std::size_t>(*steps);
    h.chunks = static_cast<std::size_t>(*chunks);
    h.spec_bytes = static_cast<std::size_t>(*bytes);
    h.created_ms = *created;
    if (const auto* n = o.if_contains("name"); n != nullptr && n->is_string()) {
        h.name = std::string(n->get_string());
    }
    if (const auto* n = o.if_contains("submitted_by"); n != nullptr && n->is_string()) {
        h.submitted_by = std::string(n->get_string());
    }
    return h;
}

std::string chunk_name(std::size_t i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "spec-%04zu", i);
    return buf;
}

std::vector<std::string_view> split_chunks(std::string_view text) {
    std::vector<std::string_view> out;
    do {
        out.push_back(text.substr(0, spec_chunk_bytes));
        text.remove_prefix(out.back().size());
    } while (!text.empty());
    return out;
}

std::string_view to_string(step_status s) noexcept {
    switch (s) {
    case step_status::waiting:
        return "waiting";
    case step_status::running:
        return "running";
    case step_status::succeeded:
        return "succeeded";
    case step_status::failed:
        return "failed";
    case step_status::skipped:
        return "skipped";
    case step_status::cancelled:
        return "cancelled";
    }
    return "unknown";
}

bool is_decided(step_status s) noexcept {
    return s == step_status::succeeded || s == step_status::failed || s == step_status::skipped ||
           s == step_status::cancelled;
}

std::string_view to_string(workflow_status s) noexcept {
    switch (s) {
    case workflow_status::running:
        return "running";
    case workflow_status::succeeded:
        return "succeeded";
    case workflow_status::failed:
        return "failed";
    case workflow_status::cancelled:
        return "cancelled";
    }
    return "unknown";
}

std::optional<workflow_status> parse_workflow_status(std::string_view s) noexcept {
    for (auto w :
         {workflow_status::running, workflow_status::succeeded, workflow_status::failed,
          workflow_status::cancelled}) {
        if (to_string(w) == s) {
            return w;
        }
    }
    return std::nullopt;
}

std::string encode_state(const workflow_state& s) {
    json::object o;
    o["v"] = protocol::format_version;
    o["status"] = to_string(s.status);
    o["steps"] = s.steps;
    o["next"] = s.next;
    if (!s.maps.empty()) {
        json::array maps;
        for (const auto& m : s.maps) {
            maps.emplace_back(json::object{
                {"step", m.step}, {"base", m.base}, {"count", m.count}, {"launched", m.launched}});
        }
        o["maps"] = std::move(maps);
    }
    if (!s.errors.empty()) {
        json::object errors;
        for (const auto& [step, e] : s.errors) {
            errors[step] = json::object{{"code", e.code}, {"message", e.message}};
        }
        o["errors"] = std::move(errors);
    }
    o["started_ms"] = s.started_ms;
    if (s.finished_ms != 0) {
        o["finished_ms"] = s.finished_ms;
    }
    return protocol::to_text(o);
}

codec_result<workflow_state> decode_state(std::string_view data, std::size_t steps) {
    auto doc = open_doc(data, "a workflow state");
    if (!doc) {
        return doc.error();
    }
    const auto& o = *doc;
    workflow_state s;
    const auto* status = o.if_contains("status");
    const auto st = status != nullptr && status->is_string()
                        ? parse_workflow_status(status->get_string())
                        : std::nullopt;
    if (!st) {
        return decode_error{"\"status\" must be running, succeeded, failed or cancelled", "status"};
    }
    s.status = *st;
    const auto* chars = o.if_contains("steps");
    if (chars == nullptr || !chars->is_string() || chars->get_string().size() != steps ||
        !std::all_of(chars->get_string().begin(), chars->get_string().end(), valid_step_char)) {
        return decode_error{
            "\"steps\" must hold one of -rsfkc per step (" + std::to_string(steps) + ")", "steps"};
    }
    s.steps = std::string(chars->get_string());
    const auto next = integer_in(o, "next", static_cast<std::int64_t>(steps), int64_max);
    if (!next) {
        return decode_error{"\"next\" must be an integer, at least the number of steps", "next"};
    }
    s.next = static_cast<std::uint64_t>(*next);
    if (const auto* maps = o.if_contains("maps")) {
        if (!maps->is_array()) {
            return decode_error{"\"maps\" must be an array", "maps"};
        }
        for (const auto& m : maps->get_array()) {
            const auto* mo = m.if_object();
            if (mo == nullptr) {
                return decode_error{"\"maps\" must hold objects", "maps"};
            }
            const auto step = integer_in(*mo, "step", 0, static_cast<std::int64_t>(steps) - 1);
            const auto base = integer_in(*mo, "base", static_cast<std::int64_t>(steps), int64_max);
            const auto count =
                integer_in(*mo, "count", 0, static_cast<std::int64_t>(max_map_elements));
            const auto launched = integer_in(*mo, "launched", 0, count.value_or(0));
            if (!step || !base || !count || !launched || *base + *count > *next ||
                (!s.maps.empty() && s.maps.back().step >= static_cast<std::size_t>(*step))) {
                return decode_error{"\"maps\" holds an entry that does not fit", "maps"};
            }
            s.maps.push_back(map_alloc{
                static_cast<std::size_t>(*step), static_cast<std::uint64_t>(*base),
                static_cast<std::uint64_t>(*count), static_cast<std::uint64_t>(*launched)});
        }
    }
    if (const auto* errors = o.if_contains("errors")) {
        if (!errors->is_object()) {
            return decode_error{"\"errors\" must be an object", "errors"};
        }
        for (const auto& kv : errors->get_object()) {
            const auto* eo = kv.value().if_object();
            const auto* code = eo == nullptr ? nullptr : eo->if_contains("code");
            const auto* msg = eo == nullptr ? nullptr : eo->if_contains("message");
            if (code == nullptr || !code->is_string() || msg == nullptr || !msg->is_string()) {
                return decode_error{"\"errors\" holds an entry without code and message", "errors"};
            }
            s.errors[std::string(kv.key())] = protocol::task_error{
                std::string(code->get_string()), std::string(msg->get_string())};
        }
    }
    s.started_ms = integer_in(o, "started_ms", 0, int64_max).value_or(0);
    s.finished_ms = integer_in(o, "finished_ms", 0, int64_max).value_or(0);
    return s;
}

}  // namespace zkd::workflow
