// SPDX-License-Identifier: MIT
#include "schedule/spec.hpp"

#include "protocol/delay.hpp"
#include "protocol/ids.hpp"
#include "protocol/json_int.hpp"
#include "protocol/syntax.hpp"
#include "schedule/firing.hpp"

#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

namespace zkd::schedule {

namespace json = boost::json;
using protocol::codec_result;
using protocol::decode_error;

namespace {

constexpr std::array<std::string_view, 13> request_fields = {
    "name",       "every_ms",     "cron",    "tz",      "type",       "args",   "priority",
    "timeout_ms", "max_attempts", "retries", "misfire", "no_overlap", "paused",
};

std::string quoted(std::string_view s) {
    return "\"" + std::string(s) + "\"";
}

decode_error field_error(std::string_view field, std::string what) {
    return decode_error{std::move(what), std::string(field)};
}

/// An integer member in [lo, hi] or absent; an error names the field and the range.
codec_result<std::optional<std::int64_t>> integer_field(
    const json::object& o, std::string_view key, std::int64_t lo, std::int64_t hi
) {
    const auto* v = o.if_contains(key);
    if (v == nullptr) {
        return std::optional<std::int64_t>{};
    }
    auto n = protocol::as_integer(*v);
    if (!n || *n < lo || *n > hi) {
        return field_error(
            key, quoted(key) + " must be an integer from " + std::to_string(lo) + " to " +
                     std::to_string(hi)
        );
    }
    return std::optional<std::int64_t>{*n};
}

codec_result<std::optional<bool>> bool_field(const json::object& o, std::string_view key) {
    const auto* v = o.if_contains(key);
    if (v == nullptr) {
        return std::optional<bool>{};
    }
    if (!v->is_bool()) {
        return field_error(key, quoted(key) + " must be true or false");
    }
    return std::optional<bool>{v->get_bool()};
}

/// The fields a user sets (all but name and progress), from `o`; `s.name` is set.
codec_result<void> read_spec_fields(const json::object& o, schedule& s, const zone_loader& zones) {
    const auto* every = o.if_contains("every_ms");
    const auto* cron = o.if_contains("cron");
    if ((every == nullptr) == (cron == nullptr)) {
        return field_error(
            every == nullptr ? "every_ms" : "cron",
            R"(a schedule has exactly one of "every_ms" and "cron")"
        );
    }
    if (every != nullptr) {
        auto n = integer_field(o, "every_ms", min_every_ms, max_every_ms);
        if (!n) {
            return n.error();
        }
        s.every_ms = **n;
        if (o.contains("tz")) {
            return field_error("tz", R"("tz" goes with "cron" only)");
        }
    } else {
        if (!cron->is_string()) {
            return field_error("cron", "\"cron\" must be a string");
        }
        auto c = parse_cron(cron->get_string());
        if (!c) {
            return field_error("cron", c.error().message);
        }
        s.cron = std::string(cron->get_string());
        s.cron_parsed = *c;
        s.tz = "UTC";
        if (const auto* tz = o.if_contains("tz")) {
            if (!tz->is_string()) {
                return field_error("tz", "\"tz\" must be a string");
            }
            const std::string_view name = tz->get_string();
            if (name != "UTC") {
                if (!is_valid_zone_name(name)) {
                    return field_error(
                        "tz", quoted(name) + " is no time zone name (like Europe/Paris)"
                    );
                }
                auto z = zones ? zones(name) : nullptr;
                if (!z) {
                    return field_error(
                        "tz", "unknown time zone " + quoted(name) +
                                  " (the tz database's names, like Europe/Paris, or UTC)"
                    );
                }
                s.tz = std::string(name);
                s.zone_rules = std::move(z);
            }
        }
    }
    const auto* type = o.if_contains("type");
    if (type == nullptr) {
        return field_error("type", "\"type\" is required");
    }
    if (!type->is_string() || !protocol::is_valid_task_type(type->get_string())) {
        return field_error("type", "\"type\" must be 1 to 128 characters of [A-Za-z0-9_.:-]");
    }
    s.type = std::string(type->get_string());
    if (const auto* args = o.if_contains("args")) {
        s.args = *args;
    }
    auto prio = integer_field(o, "priority", protocol::min_priority, protocol::max_priority);
    auto timeout = integer_field(o, "timeout_ms", 0, protocol::max_due_ms);
    auto attempts = integer_field(o, "max_attempts", 1, protocol::max_attempts_limit);
    auto retries = integer_field(o, "retries", 0, protocol::max_retries_limit);
    for (const auto* r : {&prio, &timeout, &attempts, &retries}) {
        if (!*r) {
            return r->error();
        }
    }
    s.priority = static_cast<int>(prio->value_or(protocol::default_priority));
    s.timeout_ms = timeout->value_or(0);
    s.max_attempts = static_cast<int>(attempts->value_or(3));
    if (*retries) {
        s.retries = static_cast<int>(**retries);
    }
    if (const auto* m = o.if_contains("misfire")) {
        auto p = m->is_string() ? parse_misfire(m->get_string()) : std::nullopt;
        if (!p) {
            return field_error("misfire", R"("misfire" must be "once", "skip" or "all")");
        }
        s.misfire = *p;
    }
    auto no_overlap = bool_field(o, "no_overlap");
    auto paused = bool_field(o, "paused");
    if (!no_overlap) {
        return no_overlap.error();
    }
    if (!paused) {
        return paused.error();
    }
    s.no_overlap = no_overlap->value_or(false);
    s.paused = paused->value_or(false);
    // The task must be one: args nested too deep or too large are refused here, not at the
    // first firing.
    auto task = firing_task(s, 0);
    if (!task) {
        return field_error("args", task.error().message);
    }
    return {};
}

}  // namespace

std::string_view to_string(misfire_policy p) noexcept {
    switch (p) {
    case misfire_policy::skip:
        return "skip";
    case misfire_policy::all:
        return "all";
    case misfire_policy::once:
        break;
    }
    return "once";
}

std::optional<misfire_policy> parse_misfire(std::string_view s) noexcept {
    if (s == "once") {
        return misfire_policy::once;
    }
    if (s == "skip") {
        return misfire_policy::skip;
    }
    if (s == "all") {
        return misfire_policy::all;
    }
    return std::nullopt;
}

bool is_valid_name(std::string_view name) noexcept {
    if (name.empty() || name.size() > max_name_length || name.front() == '.') {
        return false;
    }
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
    });
}

codec_result<schedule> parse_request(const json::value& request, const zone_loader& zones) {
    if (!request.is_object()) {
        return decode_error{"a schedule is a JSON object"};
    }
    const auto& o = request.get_object();
    for (const auto& kv : o) {
        const std::string_view key = kv.key();
        if (std::find(request_fields.begin(), request_fields.end(), key) == request_fields.end()) {
            auto best = protocol::nearest(key, request_fields, 2);
            return field_error(
                key, "unknown field " + quoted(key) +
                         (best.empty() ? std::string{} : " (did you mean " + quoted(best) + "?)")
            );
        }
    }
    schedule s;
    const auto* name = o.if_contains("name");
    if (name == nullptr || !name->is_string() || !is_valid_name(name->get_string())) {
        return field_error(
            "name",
            "a schedule's \"name\" is 1 to 64 characters of [A-Za-z0-9_.-], not starting with '.'"
        );
    }
    s.name = std::string(name->get_string());
    if (auto ok = read_spec_fields(o, s, zones); !ok) {
        return ok.error();
    }
    if (s.every_ms == 0 && !cron_next(s.cron_parsed, protocol::now_ms())) {
        return field_error(
            "cron", "the cron expression " + quoted(s.cron) + " never matches a date"
        );
    }
    return s;
}

codec_result<schedule> decode(
    std::string_view name, std::string_view data, const zone_loader& zones
) {
    boost::system::error_code ec;
    auto doc = protocol::parse_json(data, ec);
    if (ec || !doc.is_object()) {
        return decode_error{"not a JSON object"};
    }
    const auto& o = doc.get_object();
    const auto* v = o.if_contains("v");
    if (v == nullptr || protocol::as_integer(*v) != std::optional<std::int64_t>{1}) {
        return decode_error{"no \"v\":1", "v"};
    }
    if (!is_valid_name(name)) {
        return decode_error{"invalid schedule name " + quoted(name)};
    }
    schedule s;
    s.name = std::string(name);
    if (auto ok = read_spec_fields(o, s, zones); !ok) {
        return ok.error();
    }
    const auto* client = o.if_contains("client");
    if (client == nullptr || !client->is_string() ||
        !protocol::is_client_id(client->get_string())) {
        return decode_error{"\"client\" must be 8 lowercase hex digits", "client"};
    }
    s.client = std::string(client->get_string());
    auto created = integer_field(o, "created_ms", 0, protocol::max_due_ms);
    auto last = integer_field(o, "last_due_ms", 0, protocol::max_due_ms);
    auto last_fired = integer_field(o, "last_fired_ms", 0, protocol::max_due_ms);
    auto fired = integer_field(o, "fired", 0, std::numeric_limits<std::int64_t>::max());
    auto skipped = integer_field(o, "skipped", 0, std::numeric_limits<std::int64_t>::max());
    auto missed = integer_field(o, "missed", 0, std::numeric_limits<std::int64_t>::max());
    for (const auto* r : {&created, &last, &last_fired, &fired, &skipped, &missed}) {
        if (!*r) {
            return r->error();
        }
    }
    if (!*created) {
        return decode_error{"\"created_ms\" is required", "created_ms"};
    }
    s.created_ms = **created;
    s.last_due_ms = std::max(s.created_ms, last->value_or(s.created_ms));
    s.last_fired_ms = last_fired->value_or(0);
    s.fired = static_cast<std::uint64_t>(fired->value_or(0));
    s.skipped = static_cast<std::uint64_t>(skipped->value_or(0));
    s.missed = static_cast<std::uint64_t>(missed->value_or(0));
    return s;
}

std::string encode(const schedule& s) {
    json::object o;
    o["v"] = 1;
    if (s.every_ms > 0) {
        o["every_ms"] = s.every_ms;
    } else {
        o["cron"] = s.cron;
        o["tz"] = s.tz;
    }
    o["type"] = s.type;
    if (!s.args.is_null()) {
        o["args"] = s.args;
    }
    o["priority"] = s.priority;
    o["timeout_ms"] = s.timeout_ms;
    o["max_attempts"] = s.max_attempts;
    if (s.retries) {
        o["retries"] = *s.retries;
    }
    o["misfire"] = to_string(s.misfire);
    o["no_overlap"] = s.no_overlap;
    o["paused"] = s.paused;
    o["client"] = s.client;
    o["created_ms"] = s.created_ms;
    o["last_due_ms"] = s.last_due_ms;
    if (s.last_fired_ms > 0) {
        o["last_fired_ms"] = s.last_fired_ms;
    }
    o["fired"] = s.fired;
    o["skipped"] = s.skipped;
    o["missed"] = s.missed;
    return protocol::to_text(o);
}

codec_result<std::string> firing_task(const schedule& s, std::int64_t now_ms) {
    protocol::task_spec t;
    t.type = s.type;
    t.args = s.args;
    t.priority = s.priority;
    t.timeout = std::chrono::milliseconds(s.timeout_ms);
    t.max_attempts = s.max_attempts;
    t.submitted_ms = now_ms;
    t.client = s.client.empty() ? std::string("00000000") : s.client;
    protocol::set_submit_fields(t.timing, std::nullopt, s.retries, std::nullopt);
    if (auto ok = protocol::validate(t); !ok) {
        return decode_error{"its task cannot be built: " + ok.error().message};
    }
    auto data = protocol::encode(t);
    if (!protocol::task_size_ok(data)) {
        return decode_error{
            "its task is " + std::to_string(data.size()) + " bytes, over the " +
            std::to_string(protocol::max_task_bytes) + " a task may hold"};
    }
    return codec_result<std::string>(boost::system::in_place_value, std::move(data));
}

json::object to_json(const schedule& s) {
    boost::system::error_code ec;
    auto doc = protocol::parse_json(encode(s), ec);
    json::object o = std::move(doc.get_object());
    o.erase("v");
    json::object out;
    out["name"] = s.name;
    for (auto& kv : o) {
        out[kv.key()] = std::move(kv.value());
    }
    if (!s.paused) {
        if (auto next = next_due(s, s.last_due_ms)) {
            out["next_ms"] = *next;
        }
    }
    return out;
}

}  // namespace zkd::schedule
