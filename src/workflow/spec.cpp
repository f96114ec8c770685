// SPDX-License-Identifier: MIT
#include "workflow/spec.hpp"

#include "protocol/json_int.hpp"
#include "protocol/syntax.hpp"

#include <boost/json/array.hpp>
#include <boost/json/error.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <utility>

namespace zkd::workflow {

namespace json = boost::json;
using protocol::codec_result;
using protocol::decode_error;

namespace {

constexpr std::array<std::string_view, 8> step_fields = {
    "type", "args", "after", "map", "continue_on_failure", "priority", "timeout_ms", "max_attempts",
};
constexpr std::array<std::string_view, 2> top_fields = {"steps", "name"};

std::string quoted(std::string_view s) {
    std::string out = "\"";
    out += s;
    out += '"';
    return out;
}

/// " (did you mean "x"?)" for the nearest of `known` within 2 edits, or "".
template <class Names>
std::string did_you_mean(std::string_view name, const Names& known) {
    auto best = protocol::nearest(name, known, 2);
    return best.empty() ? std::string{} : " (did you mean " + quoted(best) + "?)";
}

using protocol::as_integer;

decode_error step_error(std::string_view step, std::string_view field, std::string what) {
    return decode_error{"step " + quoted(step) + ": " + std::move(what), std::string(field)};
}

/// A step as written, before names are resolved to indexes.
struct raw_step {
    step_spec spec;
    std::vector<std::string> after;
    std::string map;
};

codec_result<raw_step> read_step(std::string_view name, const json::value& v) {
    raw_step out;
    out.spec.name = std::string(name);
    if (!v.is_object()) {
        return step_error(name, "", "a step is an object with at least \"type\"");
    }
    const auto& o = v.get_object();
    for (const auto& kv : o) {
        const std::string_view key = kv.key();
        if (std::find(step_fields.begin(), step_fields.end(), key) == step_fields.end()) {
            return step_error(
                name, key, "unknown field " + quoted(key) + did_you_mean(key, step_fields)
            );
        }
    }
    const auto* type = o.if_contains("type");
    if (type == nullptr) {
        return step_error(name, "type", "\"type\" is required");
    }
    if (!type->is_string() || !protocol::is_valid_task_type(type->get_string())) {
        return step_error(name, "type", "\"type\" must be 1 to 128 characters of [A-Za-z0-9_.:-]");
    }
    out.spec.type = std::string(type->get_string());
    if (const auto* args = o.if_contains("args")) {
        out.spec.args = *args;
    }
    if (const auto* after = o.if_contains("after")) {
        if (!after->is_array()) {
            return step_error(name, "after", "\"after\" must be an array of step names");
        }
        for (const auto& a : after->get_array()) {
            if (!a.is_string()) {
                return step_error(name, "after", "\"after\" must be an array of step names");
            }
            out.after.emplace_back(a.get_string());
        }
    }
    if (const auto* map = o.if_contains("map")) {
        if (!map->is_string()) {
            return step_error(name, "map", "\"map\" must be the name of a step");
        }
        out.map = std::string(map->get_string());
        if (!out.spec.args.is_null() && !out.spec.args.is_object()) {
            return step_error(
                name, "args",
                "the \"args\" of a map step must be an object (each task gets it with \"item\" "
                "and \"index\") or absent (each task gets its element as args)"
            );
        }
    }
    if (const auto* c = o.if_contains("continue_on_failure")) {
        if (!c->is_bool()) {
            return step_error(
                name, "continue_on_failure", "\"continue_on_failure\" must be true or false"
            );
        }
        out.spec.continue_on_failure = c->get_bool();
    }
    if (const auto* p = o.if_contains("priority")) {
        const auto n = as_integer(*p);
        if (!n || *n < protocol::min_priority || *n > protocol::max_priority) {
            return step_error(name, "priority", "\"priority\" must be an integer from 0 to 9");
        }
        out.spec.priority = static_cast<int>(*n);
    }
    if (const auto* t = o.if_contains("timeout_ms")) {
        const auto n = as_integer(*t);
        if (!n || *n < 0) {
            return step_error(
                name, "timeout_ms",
                "\"timeout_ms\" must be a whole number of milliseconds, 0 or more"
            );
        }
        out.spec.timeout = std::chrono::milliseconds(*n);
    }
    if (const auto* m = o.if_contains("max_attempts")) {
        const auto n = as_integer(*m);
        if (!n || *n < 1 || *n > protocol::max_attempts_limit) {
            return step_error(
                name, "max_attempts", "\"max_attempts\" must be an integer from 1 to 1000"
            );
        }
        out.spec.max_attempts = static_cast<int>(*n);
    }
    // What a task of the step must be (the codec's own rules: args that decode, and so on).
    protocol::task_spec task;
    task.type = out.spec.type;
    task.args = out.spec.args;
    task.priority = out.spec.priority;
    task.timeout = out.spec.timeout;
    task.max_attempts = out.spec.max_attempts;
    if (auto ok = protocol::validate(task); !ok) {
        return step_error(name, ok.error().field, ok.error().message);
    }
    return out;
}

/// The cycle through the steps Kahn's algorithm could not order (each of them waits for
/// another of them), written in the order the steps would run: "a -> b -> c -> a".
std::string describe_cycle(const workflow_spec& s, const std::vector<std::size_t>& indegree) {
    std::size_t at = 0;
    while (at < indegree.size() && indegree[at] == 0) {
        ++at;
    }
    // Walk backwards to a predecessor still in the cycle's part until a step comes again.
    std::vector<std::size_t> walk;
    std::vector<std::size_t> seen_at(s.steps.size(), std::numeric_limits<std::size_t>::max());
    while (seen_at[at] == std::numeric_limits<std::size_t>::max()) {
        seen_at[at] = walk.size();
        walk.push_back(at);
        const auto& after = s.steps[at].after;
        const auto next = std::find_if(after.begin(), after.end(), [&](std::size_t p) {
            return indegree[p] > 0;
        });
        at = *next;  // every step left waits for another step left
    }
    std::vector<std::size_t> cycle(
        walk.begin() + static_cast<std::ptrdiff_t>(seen_at[at]), walk.end()
    );
    std::reverse(cycle.begin(), cycle.end());
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
    std::string out;
    for (const auto i : cycle) {
        out += s.steps[i].name;
        out += " -> ";
    }
    out += s.steps[cycle.front()].name;
    return out;
}

}  // namespace

bool is_valid_step_name(std::string_view name) noexcept {
    if (name.empty() || name.size() > max_step_name_length) {
        return false;
    }
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
    });
}

std::optional<std::size_t> workflow_spec::index_of(std::string_view step) const {
    const auto it = std::lower_bound(
        steps.begin(), steps.end(), step,
        [](const step_spec& s, std::string_view n) { return s.name < n; }
    );
    if (it == steps.end() || it->name != step) {
        return std::nullopt;
    }
    return static_cast<std::size_t>(it - steps.begin());
}

std::vector<std::size_t> workflow_spec::sinks() const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        if (dependants[i].empty()) {
            out.push_back(i);
        }
    }
    return out;
}

codec_result<workflow_spec> parse_spec(std::string_view text) {
    if (text.size() > max_spec_bytes) {
        return decode_error{
            "the spec is " + std::to_string(text.size()) + " bytes, over the limit of " +
            std::to_string(max_spec_bytes) + " bytes"};
    }
    boost::system::error_code ec;
    // A spec nests its args two levels below the task's own: "steps", then the step.
    auto doc = protocol::parse_json(text, ec, 2);
    if (ec == boost::json::error::too_deep) {
        return decode_error{
            "the spec nests too deeply: a step's args may nest at most " +
            std::to_string(protocol::max_json_depth - 1) + " levels"};
    }
    if (ec) {
        return decode_error{"the spec is not JSON: " + ec.message()};
    }
    return spec_from_json(doc);
}

codec_result<workflow_spec> spec_from_json(const json::value& doc) {
    if (!doc.is_object()) {
        return decode_error{R"(a spec is a JSON object: {"steps": {"NAME": {"type": ...}, ...}})"};
    }
    const auto& top = doc.get_object();
    for (const auto& kv : top) {
        const std::string_view key = kv.key();
        if (std::find(top_fields.begin(), top_fields.end(), key) == top_fields.end()) {
            return decode_error{
                "unknown field " + quoted(key) + " at the top of the spec" +
                    did_you_mean(key, top_fields),
                std::string(key)};
        }
    }
    workflow_spec out;
    if (const auto* name = top.if_contains("name")) {
        if (!name->is_string() || name->get_string().size() > max_workflow_name_length) {
            return decode_error{"\"name\" must be a string of at most 128 bytes", "name"};
        }
        out.name = std::string(name->get_string());
    }
    const auto* steps = top.if_contains("steps");
    if (steps == nullptr || !steps->is_object() || steps->get_object().empty()) {
        return decode_error{"\"steps\" must be an object of at least one step", "steps"};
    }
    const auto& so = steps->get_object();
    if (so.size() > max_steps) {
        return decode_error{
            "the spec has " + std::to_string(so.size()) + " steps, over the limit of " +
                std::to_string(max_steps),
            "steps"};
    }
    std::map<std::string, raw_step, std::less<>> raw;
    for (const auto& kv : so) {
        const std::string_view name = kv.key();
        if (!is_valid_step_name(name)) {
            return step_error(name, "steps", "a step name is 1 to 64 characters of [A-Za-z0-9_.-]");
        }
        if (raw.contains(name)) {
            return step_error(name, "steps", "named twice");
        }
        auto step = read_step(name, kv.value());
        if (!step) {
            return step.error();
        }
        raw.emplace(std::string(name), std::move(*step));
    }
    std::vector<std::string> names;
    names.reserve(raw.size());
    for (auto& [name, step] : raw) {
        names.push_back(name);
        out.steps.push_back(step.spec);
    }
    auto resolve = [&](std::string_view step, std::string_view field,
                       const std::string& ref) -> codec_result<std::size_t> {
        if (auto i = out.index_of(ref)) {
            return *i;
        }
        return step_error(
            step, field,
            quoted(field) + " names " + quoted(ref) + ", which is no step of the workflow" +
                did_you_mean(ref, names)
        );
    };
    std::size_t index = 0;
    for (auto& [name, step] : raw) {
        const std::size_t self = index++;
        auto& s = out.steps[self];
        for (const auto& a : step.after) {
            auto idx = resolve(name, "after", a);
            if (!idx) {
                return idx.error();
            }
            s.after.push_back(*idx);
        }
        if (!step.map.empty()) {
            auto idx = resolve(name, "map", step.map);
            if (!idx) {
                return idx.error();
            }
            if (out.steps[*idx].name == name) {
                return step_error(name, "map", "a step cannot map over its own result");
            }
            s.map = *idx;
            s.after.push_back(*idx);
        }
        std::sort(s.after.begin(), s.after.end());
        s.after.erase(std::unique(s.after.begin(), s.after.end()), s.after.end());
        if (std::binary_search(s.after.begin(), s.after.end(), self)) {
            return step_error(name, "after", "a step cannot wait for itself");
        }
    }
    out.dependants.assign(out.steps.size(), {});
    std::vector<std::size_t> indegree(out.steps.size());
    for (std::size_t k = 0; k < out.steps.size(); ++k) {
        indegree[k] = out.steps[k].after.size();
        for (const auto p : out.steps[k].after) {
            out.dependants[p].push_back(k);
        }
    }
    // Kahn: a step whose predecessors are all ordered is ordered; what stays holds a cycle.
    std::vector<std::size_t> ready;
    for (std::size_t k = 0; k < indegree.size(); ++k) {
        if (indegree[k] == 0) {
            ready.push_back(k);
        }
    }
    std::size_t ordered = 0;
    while (!ready.empty()) {
        const auto k = ready.back();
        ready.pop_back();
        ++ordered;
        for (const auto d : out.dependants[k]) {
            if (--indegree[d] == 0) {
                ready.push_back(d);
            }
        }
    }
    if (ordered != out.steps.size()) {
        return decode_error{
            "the steps form a cycle: " + describe_cycle(out, indegree) +
                " (each waits for the one before it)",
            "after"};
    }
    return out;
}

std::string encode_spec(const workflow_spec& s) {
    json::object top;
    if (!s.name.empty()) {
        top["name"] = s.name;
    }
    json::object steps;
    for (const auto& step : s.steps) {
        json::object o;
        o["type"] = step.type;
        if (!step.args.is_null()) {
            o["args"] = step.args;
        }
        json::array after;
        for (const auto p : step.after) {
            if (step.map != p) {
                after.emplace_back(s.steps[p].name);
            }
        }
        if (!after.empty()) {
            o["after"] = std::move(after);
        }
        if (step.map) {
            o["map"] = s.steps[*step.map].name;
        }
        if (step.continue_on_failure) {
            o["continue_on_failure"] = true;
        }
        if (step.priority != protocol::default_priority) {
            o["priority"] = step.priority;
        }
        if (step.timeout.count() != 0) {
            o["timeout_ms"] = step.timeout.count();
        }
        if (step.max_attempts != 3) {
            o["max_attempts"] = step.max_attempts;
        }
        steps[step.name] = std::move(o);
    }
    top["steps"] = std::move(steps);
    return protocol::to_text(top);
}

}  // namespace zkd::workflow
