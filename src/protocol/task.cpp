// SPDX-License-Identifier: MIT
// The codecs of every node kind of docs/protocol.md §2 (task, result and a bundle's entries,
// member, meta, epoch, cancel). Over 700 lines because they share one reader, one set of
// limits and one validation of args and values: split by node kind, each part would
// declare them again.
#include "protocol/task.hpp"

#include "protocol/ids.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/throw_exception.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace zkd::protocol {

namespace json = boost::json;

json::value parse_json(
    std::string_view text, boost::system::error_code& ec, std::size_t extra_levels
) {
    json::parse_options options;
    options.max_depth = max_json_depth + extra_levels;
    return json::parse(json::string_view(text.data(), text.size()), ec, {}, options);
}

namespace {
bool holds_double(const json::value& v);
void append_json(std::string& out, const json::value& v);
void append_object(std::string& out, const json::object& o);
}  // namespace

std::string to_text(const json::value& v) {
    if (!holds_double(v)) {
        return json::serialize(v);
    }
    std::string out;
    append_json(out, v);
    return out;
}

std::string to_text(const json::object& o) {
    const bool doubles =
        std::any_of(o.begin(), o.end(), [](const auto& kv) { return holds_double(kv.value()); });
    if (!doubles) {
        return json::serialize(o);
    }
    std::string out;
    append_object(out, o);
    return out;
}

void throw_exception_from_error(const decode_error& e, const boost::source_location& loc) {
    boost::throw_exception(std::invalid_argument(e.message), loc);
}

namespace {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t int64_min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t int_max = std::numeric_limits<int>::max();

bool holds_double(const json::value& v) {
    switch (v.kind()) {
    case json::kind::double_:
        return true;
    case json::kind::array:
        return std::any_of(v.get_array().begin(), v.get_array().end(), holds_double);
    case json::kind::object:
        return std::any_of(v.get_object().begin(), v.get_object().end(), [](const auto& kv) {
            return holds_double(kv.value());
        });
    default:
        return false;
    }
}

void append_double(std::string& out, double d) {
    std::array<char, 32> buf{};
    const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), d);
    const std::string_view text(buf.data(), static_cast<std::size_t>(end - buf.data()));
    if (ec != std::errc() || !std::isfinite(d)) {
        out += json::serialize(json::value(d));  // not written by zkd (encoders refuse them)
        return;
    }
    out += text;
    if (text.find_first_of(".e") == std::string_view::npos) {
        out += ".0";  // read back as a double, not an integer
    }
}

void append_json(std::string& out, const json::value& v) {
    switch (v.kind()) {
    case json::kind::double_:
        append_double(out, v.get_double());
        return;
    case json::kind::array: {
        out += '[';
        const char* comma = "";
        for (const auto& e : v.get_array()) {
            out += comma;
            append_json(out, e);
            comma = ",";
        }
        out += ']';
        return;
    }
    case json::kind::object:
        append_object(out, v.get_object());
        return;
    default:
        out += json::serialize(v);
        return;
    }
}

void append_object(std::string& out, const json::object& o) {
    out += '{';
    const char* comma = "";
    for (const auto& kv : o) {
        out += comma;
        out += json::serialize(kv.key());
        out += ':';
        append_json(out, kv.value());
        comma = ",";
    }
    out += '}';
}

// A value for an error message: serialized, and cut short so garbage can't flood a log.
std::string brief(const json::value& v) {
    constexpr std::size_t limit = 40;
    std::string s = json::serialize(v);
    if (s.size() > limit) {
        s.resize(limit);
        s += "...";
    }
    return s;
}

std::string quoted(std::string_view key) {
    std::string s = "field \"";
    s.append(key).append("\"");
    return s;
}

bool is_non_finite(const json::value& v) noexcept;

// Reads fields of one object, keeping the first failure. A null field counts as absent.
class reader {
public:
    explicit reader(json::object& obj) noexcept : obj_(obj) {}

    bool ok() const noexcept { return !error_; }
    decode_error error() const { return error_.value_or(decode_error{}); }

    void fail(std::string message) {
        if (!error_)
            error_ = decode_error{std::move(message)};
    }

    json::value* find(std::string_view key) noexcept {
        auto* v = obj_.if_contains(key);
        return v == nullptr || v->is_null() ? nullptr : v;
    }

    std::int64_t integer(
        std::string_view key,
        std::int64_t fallback,
        std::int64_t lo,
        std::int64_t hi,
        bool required = false
    ) {
        const auto* v = find(key);
        if (v == nullptr) {
            if (required)
                fail(quoted(key) + " is missing");
            return fallback;
        }
        const auto n = as_int64(*v);
        if (!n || *n < lo || *n > hi) {
            std::string m = quoted(key) + " must be an integer";
            if (lo != int64_min && hi != int64_max) {
                m += " from " + std::to_string(lo) + " to " + std::to_string(hi);
            } else if (lo != int64_min) {
                m += " >= " + std::to_string(lo);
            }
            fail(m + ", not " + brief(*v));
            return fallback;
        }
        return *n;
    }

    int small_integer(std::string_view key, int fallback, int lo, int hi, bool required = false) {
        return static_cast<int>(integer(key, fallback, lo, hi, required));
    }

    std::string string(std::string_view key, bool required = false) {
        const auto* v = find(key);
        if (v == nullptr) {
            if (required)
                fail(quoted(key) + " is missing");
            return {};
        }
        if (!v->is_string()) {
            fail(quoted(key) + " must be a string, not " + brief(*v));
            return {};
        }
        return std::string(v->get_string());
    }

    bool boolean(std::string_view key, bool fallback) {
        const auto* v = find(key);
        if (v == nullptr)
            return fallback;
        if (!v->is_bool()) {
            fail(quoted(key) + " must be true or false, not " + brief(*v));
            return fallback;
        }
        return v->get_bool();
    }

    /// A finite number >= 0 (integers included).
    double finite(std::string_view key, double fallback) {
        const auto* v = find(key);
        if (v == nullptr)
            return fallback;
        if (!v->is_number() || is_non_finite(*v) || v->to_number<double>() < 0) {
            fail(quoted(key) + " must be a number >= 0, not " + brief(*v));
            return fallback;
        }
        return v->to_number<double>();
    }

private:
    json::object& obj_;
    std::optional<decode_error> error_;
};

// Visits every value under `root`, itself included, with its depth (root: 0). Iterative: a
// deep value must not overflow the stack here either.
template <class Value, class Visit>
void walk(Value& root, Visit visit) {
    std::vector<std::pair<Value*, std::size_t>> todo{{&root, 0}};
    while (!todo.empty()) {
        const auto [v, depth] = todo.back();
        todo.pop_back();
        visit(*v, depth);
        if (v->is_array()) {
            for (auto& e : v->as_array())
                todo.emplace_back(&e, depth + 1);
        } else if (v->is_object()) {
            for (auto& kv : v->as_object())
                todo.emplace_back(&kv.value(), depth + 1);
        }
    }
}

bool is_non_finite(const json::value& v) noexcept {
    return v.is_double() && !std::isfinite(v.get_double());
}

struct json_shape {
    std::size_t depth = 0;  ///< levels of arrays and objects; 0 for a scalar
    bool finite = true;     ///< no infinite number anywhere
};

json_shape shape_of(const json::value& root) {
    json_shape shape;
    walk(root, [&](const json::value& v, std::size_t depth) {
        if (v.is_array() || v.is_object())
            shape.depth = std::max(shape.depth, depth + 1);
        if (is_non_finite(v))
            shape.finite = false;
    });
    return shape;
}

// Boost.JSON parses 1e999 as infinity but writes it as `Infinity`, which is not JSON: encoders
// write null instead, so whatever they produce parses.
json::value finite(const json::value& v) {
    if (shape_of(v).finite)
        return v;
    json::value copy = v;
    walk(copy, [](json::value& x, std::size_t) {
        if (is_non_finite(x))
            x = nullptr;
    });
    return copy;
}

// What validate() says of a JSON field (args, value) that sits `levels` down in its document.
std::optional<decode_error> field_problem(
    std::string_view key, const json::value& v, std::size_t levels = 1
) {
    const auto shape = shape_of(v);
    if (shape.depth + levels > max_json_depth) {
        return decode_error{
            quoted(key) + " is nested more than " + std::to_string(max_json_depth - levels) +
                " levels deep",
            std::string(key)};
    }
    if (!shape.finite)
        return decode_error{quoted(key) + " holds an infinite number", std::string(key)};
    return std::nullopt;
}

// Parses a document of the format: a JSON object whose "v" is `version`.
codec_result<json::object> parse_document(
    std::string_view data, std::int64_t version = format_version
) {
    boost::system::error_code ec;
    json::value doc = parse_json(data, ec);
    if (ec)
        return decode_error{"not JSON: " + ec.message()};
    if (!shape_of(doc).finite)
        return decode_error{"not JSON: a number is out of range"};
    if (!doc.is_object())
        return decode_error{"not a JSON object"};
    auto& obj = doc.get_object();
    const auto* v = obj.if_contains("v");
    if (v == nullptr)
        return decode_error{"no format version (\"v\")"};
    if (!v->is_number())
        return decode_error{"format version is not a number: " + brief(*v)};
    if (const auto n = as_int64(*v)) {
        if (*n == version)
            return std::move(obj);
        if (*n > version) {
            return decode_error{"unsupported format version " + std::to_string(*n)};
        }
        return decode_error{"invalid format version " + std::to_string(*n)};
    }
    // Not a whole number, or out of int64's range.
    const bool newer =
        v->is_uint64() || (v->is_double() && v->get_double() > static_cast<double>(version));
    return decode_error{
        (newer ? "unsupported format version " : "invalid format version ") + brief(*v)};
}

json::object new_document() {
    json::object o;
    o["v"] = format_version;
    return o;
}

// Reads field `key`: an array of at most `most` strings for which `valid` holds (`what`
// names one, for the message), returned sorted and unique; empty when absent.
template <class Valid>
std::vector<std::string> read_names(
    reader& r, std::string_view key, std::string_view what, std::size_t most, Valid valid
) {
    std::vector<std::string> names;
    const auto* v = r.find(key);
    if (v == nullptr)
        return names;
    if (!v->is_array() || v->get_array().size() > most) {
        r.fail(
            quoted(key) + " must be an array of at most " + std::to_string(most) + " " +
            std::string(what) + "s, not " + brief(*v)
        );
        return names;
    }
    for (const auto& e : v->get_array()) {
        if (!e.is_string() || !valid(std::string_view(e.get_string()))) {
            r.fail(quoted(key) + " holds an invalid " + std::string(what) + ": " + brief(e));
            return {};
        }
        names.emplace_back(e.get_string());
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

// "types": the task types a worker serves.
std::vector<std::string> read_types(reader& r) {
    constexpr std::size_t most_types = 100'000;
    return read_names(r, "types", "task type", most_types, [](std::string_view t) {
        return is_valid_task_type(t);
    });
}

// "features": the rules a member follows beyond the format (names this zkd does not know
// are kept: readers look for the ones they know).
std::vector<std::string> read_features(reader& r) {
    return read_names(r, "features", "feature", max_features, [](std::string_view f) {
        return !f.empty() && f.size() <= 64;
    });
}

// "suspects": the workers /master names (1 to 256 bytes each, any node name).
std::vector<std::string> read_suspects(reader& r) {
    return read_names(r, "suspects", "worker id", max_suspects_named, [](std::string_view id) {
        return !id.empty() && id.size() <= 256;
    });
}

}  // namespace

// --- states ----------------------------------------------------------------------------------

namespace {
constexpr std::array<std::pair<task_state, std::string_view>, 10> state_names{{
    {task_state::delayed, "delayed"},
    {task_state::pending, "pending"},
    {task_state::assigned, "assigned"},
    {task_state::running, "running"},
    {task_state::succeeded, "succeeded"},
    {task_state::failed, "failed"},
    {task_state::timed_out, "timed_out"},
    {task_state::cancelled, "cancelled"},
    {task_state::lost, "lost"},
    {task_state::unknown, "unknown"},
}};
}  // namespace

std::string_view to_string(task_state s) noexcept {
    for (const auto& [state, name] : state_names) {
        if (state == s)
            return name;
    }
    return "unknown";
}

std::optional<task_state> parse_task_state(std::string_view s) noexcept {
    for (const auto& [state, name] : state_names) {
        if (name == s)
            return state;
    }
    return std::nullopt;
}

bool is_result_state(task_state s) noexcept {
    switch (s) {
    case task_state::succeeded:
    case task_state::failed:
    case task_state::timed_out:
    case task_state::cancelled:
    case task_state::lost:
        return true;
    case task_state::delayed:
    case task_state::pending:
    case task_state::assigned:
    case task_state::running:
    case task_state::unknown:
        return false;
    }
    return false;
}

// --- task ------------------------------------------------------------------------------------

bool is_valid_task_type(std::string_view type) noexcept {
    if (type.empty() || type.size() > max_task_type_length)
        return false;
    return std::all_of(type.begin(), type.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == ':' || c == '-';
    });
}

codec_result<void> validate(const task_spec& t) {
    if (!is_valid_task_type(t.type)) {
        return decode_error{
            "field \"type\" must be 1 to 128 characters of [A-Za-z0-9_.:-], not " +
                brief(json::value(json::string_view(t.type.data(), t.type.size()))),
            "type"};
    }
    if (t.priority < min_priority || t.priority > max_priority) {
        return decode_error{
            "field \"priority\" must be from 0 to 9, not " + std::to_string(t.priority),
            "priority"};
    }
    if (t.timeout.count() < 0) {
        return decode_error{
            "field \"timeout_ms\" must be >= 0, not " + std::to_string(t.timeout.count()),
            "timeout_ms"};
    }
    if (t.max_attempts < 1 || t.max_attempts > max_attempts_limit) {
        return decode_error{
            "field \"max_attempts\" must be from 1 to " + std::to_string(max_attempts_limit) +
                ", not " + std::to_string(t.max_attempts),
            "max_attempts"};
    }
    // The task object itself is one level: args may use the rest.
    if (auto problem = field_problem("args", t.args))
        return std::move(*problem);
    if (t.bundle.size() > max_bundle_tasks) {
        return decode_error{
            "field \"bundle\" holds more than " + std::to_string(max_bundle_tasks) + " tasks"};
    }
    if (!t.bundle.empty() && !t.args.is_null()) {
        return decode_error{R"(a bundle has no field "args" (its tasks' are in "bundle"))"};
    }
    for (const auto& args : t.bundle) {
        // The task object and the bundle array: two levels.
        if (auto problem = field_problem("bundle", args, 2))
            return std::move(*problem);
    }
    return {};
}

codec_result<void> validate(const task_node& n) {
    if (auto ok = validate(n.task); !ok) {
        return ok;
    }
    if (n.assigned.attempt < 1) {
        return decode_error{
            "field \"attempt\" must be >= 1, not " + std::to_string(n.assigned.attempt), "attempt"};
    }
    return {};
}

task_head head_of(const task_node& n) {
    return task_head{
        n.task.type, n.task.priority, n.task.bundle.size(), n.assigned.attempt,
        n.task.submitted_ms};
}

namespace {

enum class part { task, assignment, progress };

// The part a node's member belongs to, by its key. Any member that is neither the
// assignment's nor the progress' is the task's: its submitted fields, §4.3's `due_ms`,
// `retries`, `backoff_ms`, `backoff_max_ms`, and a retried try's `try` and `errors` (which a
// stamp must keep: they are the task's next try as the worker wrote it, §6 T4 "Retry"), and
// any member of a newer writer. A member added to the assignment or the progress goes here.
part part_of(std::string_view key) noexcept {
    if (key == "attempt" || key == "epoch" || key == "assigned_ms" || key == "worker")
        return part::assignment;
    if (key == "running_ms" || key == "progress")
        return part::progress;
    return part::task;
}

// The members of each part, as encode() writes them, in its order.
void put_task(json::object& o, const task_spec& t) {
    o["type"] = json::string_view(t.type.data(), t.type.size());
    if (t.bundle.empty()) {
        o["args"] = finite(t.args);
    } else {
        json::array bundle;
        bundle.reserve(t.bundle.size());
        for (const auto& args : t.bundle)
            bundle.push_back(finite(args));
        o["bundle"] = std::move(bundle);
    }
    o["priority"] = t.priority;
    o["timeout_ms"] = static_cast<std::int64_t>(t.timeout.count());
    o["max_attempts"] = t.max_attempts;
    o["submitted_ms"] = t.submitted_ms;
    if (!t.client.empty())
        o["client"] = json::string_view(t.client.data(), t.client.size());
    if (!t.bundle.empty() && t.entry_results)
        o["entry_results"] = true;
    // §4.3's members, after the others: a key the task writes itself, or one of the
    // assignment's or the progress', is not the timing's to write.
    for (const auto& [key, value] : t.timing) {
        if (part_of(key) == part::task && !o.contains(key))
            o[key] = value;
    }
}

// A pending task carries its attempt only once requeued (§6 T6); an assignment always, but
// for a direct placement's stamp (attempt 0).
void put_assignment(json::object& o, const assignment& a) {
    if (a.attempt > 0 && (a.assigned() || a.attempt != 1))
        o["attempt"] = a.attempt;
    if (a.epoch != 0)
        o["epoch"] = a.epoch;
    if (a.assigned_ms != 0)
        o["assigned_ms"] = a.assigned_ms;
    if (!a.worker.empty())
        o["worker"] = json::string_view(a.worker.data(), a.worker.size());
}

void put_progress(json::object& o, const progress& p) {
    if (p.running_ms != 0)
        o["running_ms"] = p.running_ms;
    if (p.fraction >= 0) {
        o["progress"] = {
            {"fraction", std::min(p.fraction, 1.0)},
            {"message", json::string_view(p.message.data(), p.message.size())},
            {"at_ms", p.at_ms}};
    }
}

}  // namespace

std::string encode(const task_spec& t) {
    json::object o = new_document();
    put_task(o, t);
    return to_text(o);
}

std::string encode(const task_node& n) {
    json::object o = new_document();
    put_task(o, n.task);
    put_assignment(o, n.assigned);
    put_progress(o, n.run);
    return to_text(o);
}

codec_result<task_node> decode_task_node(std::string_view data) {
    auto doc = parse_document(data);
    if (!doc)
        return doc.error();
    reader r(*doc);
    task_node n;
    task_spec& t = n.task;
    t.type = r.string("type", true);
    if (auto* args = r.find("args"))
        t.args = std::move(*args);
    if (auto* bundle = r.find("bundle")) {
        if (!bundle->is_array() || bundle->get_array().empty()) {
            return decode_error{
                "field \"bundle\" must be a non-empty array, not " + brief(*bundle)};
        }
        auto& tasks = bundle->get_array();
        t.bundle.assign(
            std::make_move_iterator(tasks.begin()), std::make_move_iterator(tasks.end())
        );
    }
    t.priority = r.small_integer("priority", default_priority, min_priority, max_priority);
    t.timeout = std::chrono::milliseconds(r.integer("timeout_ms", 0, 0, int64_max));
    t.max_attempts = r.small_integer("max_attempts", 3, 1, max_attempts_limit);
    t.submitted_ms = r.integer("submitted_ms", 0, int64_min, int64_max);
    t.client = r.string("client");
    // Only a bundle carries it, and anything but true is its absence (§4.1).
    if (const auto* er = r.find("entry_results"); er != nullptr && !t.bundle.empty())
        t.entry_results = er->is_bool() && er->get_bool();
    assignment& a = n.assigned;
    a.attempt = r.small_integer("attempt", 1, 1, int_max);
    a.epoch = r.integer("epoch", 0, 0, int64_max);
    a.assigned_ms = r.integer("assigned_ms", 0, int64_min, int64_max);
    a.worker = r.string("worker");
    n.run.running_ms = r.integer("running_ms", 0, int64_min, int64_max);
    // Progress is advisory: a report of the wrong shape is dropped, the task stays valid.
    if (const auto* p = r.find("progress"); p != nullptr && p->is_object()) {
        const auto* f = p->get_object().if_contains("fraction");
        const auto* m = p->get_object().if_contains("message");
        const auto* at = p->get_object().if_contains("at_ms");
        if (f != nullptr && f->is_number() && f->to_number<double>() >= 0 &&
            f->to_number<double>() <= 1) {
            n.run.fraction = f->to_number<double>();
            n.run.message = m != nullptr && m->is_string() ? std::string(m->get_string()) : "";
            n.run.at_ms = at != nullptr && at->is_int64() ? at->get_int64() : 0;
        }
    }
    // Kept as they are for the writers that rewrite the task (protocol/delay.hpp reads them).
    for (const auto* key : {"due_ms", "retries", "backoff_ms", "backoff_max_ms", "try", "errors"}) {
        if (const auto* v = r.find(key)) {
            t.timing[key] = *v;
        }
    }
    if (!r.ok())
        return r.error();
    if (auto valid = validate(n); !valid)
        return valid.error();
    return n;
}

codec_result<task_node> decode_task_node(std::string_view tid, std::string_view data) {
    auto n = decode_task_node(data);
    if (n && n->task.bundle.size() != bundle_size(tid)) {  // §4.1: the id gives the size
        return decode_error{
            "the node holds a bundle of " + std::to_string(n->task.bundle.size()) +
            " tasks where its id says " + std::to_string(bundle_size(tid))};
    }
    return n;
}

// --- stamp -----------------------------------------------------------------------------------
//
// A stamp finds the boundaries of the node's top-level members and nothing more: a member is
// its key (a JSON string) and its value, whose extent a scan of brackets and strings gives
// without parsing numbers, checking UTF-8 or building anything. Keeping `args` as raw text in
// a decoded node instead would have every reader (the worker runs the args, inspect shows
// them) parse it twice, and would not serve the master, which holds only bytes and a head.
// The scan is linear and allocates only the list of members; on data that is not a JSON
// object it stops with an error. Keys are compared unescaped (a newer or foreign writer may
// escape them), and members of the part stamped are dropped wherever they stand, duplicates
// included, so a node stamped twice, or by writers of other orders, comes out the same.

namespace {

struct member_span {
    std::size_t begin = 0;  // the key's opening quote
    std::size_t end = 0;    // just past the value
    part of = part::task;
};

class member_scanner {
public:
    explicit member_scanner(std::string_view s) noexcept : s_(s) {}

    // The top-level members of the object `s` holds, in order; nullopt if it holds none.
    std::optional<std::vector<member_span>> members() {
        std::vector<member_span> out;
        skip_space();
        if (!eat('{'))
            return std::nullopt;
        skip_space();
        if (!eat('}')) {
            for (;;) {
                skip_space();
                member_span m;
                m.begin = at_;
                const auto key_end = string_end(at_);
                if (!key_end)
                    return std::nullopt;
                m.of = part_of_key(m.begin, *key_end);
                at_ = *key_end;
                skip_space();
                if (!eat(':'))
                    return std::nullopt;
                skip_space();
                const auto value_end = value(at_);
                if (!value_end)
                    return std::nullopt;
                at_ = m.end = *value_end;
                out.push_back(m);
                skip_space();
                if (eat(','))
                    continue;
                if (eat('}'))
                    break;
                return std::nullopt;
            }
        }
        skip_space();
        if (at_ != s_.size())
            return std::nullopt;
        return out;
    }

private:
    static bool space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

    void skip_space() noexcept {
        while (at_ < s_.size() && space(s_[at_]))
            ++at_;
    }
    bool eat(char c) noexcept {
        if (at_ < s_.size() && s_[at_] == c) {
            ++at_;
            return true;
        }
        return false;
    }

    // Just past the string opening at `i`.
    std::optional<std::size_t> string_end(std::size_t i) const noexcept {
        if (i >= s_.size() || s_[i] != '"')
            return std::nullopt;
        for (++i; i < s_.size(); ++i) {
            if (s_[i] == '\\') {
                ++i;  // the escaped character (a \u's digits are plain characters)
            } else if (s_[i] == '"') {
                return i + 1;
            }
        }
        return std::nullopt;
    }

    // Just past the value starting at `i`: a string, an array or object (brackets matched,
    // strings skipped), or a literal or number (up to the next delimiter).
    std::optional<std::size_t> value(std::size_t i) const {
        if (i >= s_.size())
            return std::nullopt;
        if (s_[i] == '"')
            return string_end(i);
        if (s_[i] == '{' || s_[i] == '[') {
            std::vector<char> closers;
            while (i < s_.size()) {
                const char c = s_[i];
                if (c == '"') {
                    const auto e = string_end(i);
                    if (!e)
                        return std::nullopt;
                    i = *e;
                    continue;
                }
                if (c == '{' || c == '[') {
                    closers.push_back(c == '{' ? '}' : ']');
                } else if (c == '}' || c == ']') {
                    if (closers.empty() || closers.back() != c)
                        return std::nullopt;
                    closers.pop_back();
                    if (closers.empty())
                        return i + 1;
                }
                ++i;
            }
            return std::nullopt;
        }
        const auto start = i;
        while (i < s_.size() && !space(s_[i]) && s_[i] != ',' && s_[i] != '}' && s_[i] != ']' &&
               s_[i] != '"' && s_[i] != '{' && s_[i] != '[' && s_[i] != ':') {
            ++i;
        }
        return i == start ? std::nullopt : std::optional<std::size_t>(i);
    }

    // The part of the member whose key spans [begin, end) (quotes included).
    part part_of_key(std::size_t begin, std::size_t end) const {
        const auto raw = s_.substr(begin + 1, end - begin - 2);
        if (raw.find('\\') == std::string_view::npos)
            return part_of(raw);
        boost::system::error_code ec;
        const auto key = parse_json(s_.substr(begin, end - begin), ec);
        if (ec || !key.is_string())
            return part::task;  // not a key of ours (the scan goes on; decoding refuses it)
        return part_of(std::string_view(key.get_string()));
    }

    std::string_view s_;
    std::size_t at_ = 0;
};

// The encoded members of `o` without its braces ("" when empty).
std::string inner_members(const json::object& o) {
    auto text = to_text(o);
    return text.substr(1, text.size() - 2);
}

// `data`'s members with those of part `replaced` swapped for `fresh` (encoded, no braces),
// the task's first, then the assignment's, then the progress'.
codec_result<std::string> restamp(std::string_view data, part replaced, const std::string& fresh) {
    const auto members = member_scanner(data).members();
    if (!members)
        return decode_error{"not a JSON object"};
    std::string out;
    out.reserve(data.size() + fresh.size() + 2);
    out += '{';
    const auto add = [&](std::string_view text) {
        if (text.empty())
            return;
        if (out.size() > 1)
            out += ',';
        out += text;
    };
    for (const part p : {part::task, part::assignment, part::progress}) {
        if (p == replaced) {
            add(fresh);
            continue;
        }
        for (const auto& m : *members) {
            if (m.of == p)
                add(data.substr(m.begin, m.end - m.begin));
        }
    }
    out += '}';
    // In place: a decode_error is constructible from a string too.
    return codec_result<std::string>(boost::system::in_place_value, std::move(out));
}

}  // namespace

codec_result<std::string> stamp(std::string_view encoded_task, const assignment& a) {
    json::object o;
    put_assignment(o, a);
    return restamp(encoded_task, part::assignment, inner_members(o));
}

codec_result<std::string> stamp(std::string_view encoded_task, const progress& p) {
    json::object o;
    put_progress(o, p);
    return restamp(encoded_task, part::progress, inner_members(o));
}

bool task_size_ok(std::string_view encoded, std::size_t limit) noexcept {
    return encoded.size() <= std::min(limit, max_task_bytes);
}

// --- result ----------------------------------------------------------------------------------

task_error_exception::task_error_exception(task_error e)
    : std::runtime_error(e.code + ": " + e.message), error_(std::move(e)) {}

void throw_exception_from_error(const task_error& e, const boost::source_location& loc) {
    boost::throw_with_location(task_error_exception(e), loc);
}

bool is_known_error_code(std::string_view code) noexcept {
    constexpr std::array known{
        codes::handler_error,    codes::unknown_type, codes::bad_args,  codes::malformed_task,
        codes::result_too_large, codes::timeout,      codes::cancelled, codes::attempts_exhausted,
        codes::output_too_large, codes::memory_limit, codes::cpu_limit, codes::process_limit,
        codes::open_files_limit};
    return std::find(known.begin(), known.end(), code) != known.end();
}

namespace {

// State, value and error: what a result and each entry of a bundle's result hold.
codec_result<void> validate_outcome(const task_result& r, std::size_t levels) {
    if (!is_result_state(r.state)) {
        return decode_error{"\"" + std::string(to_string(r.state)) + "\" is not a result state"};
    }
    if (r.state == task_state::succeeded) {
        if (auto problem = field_problem("value", r.value, levels))
            return std::move(*problem);
    } else if (!r.error) {
        return decode_error{
            "a result in state " + std::string(to_string(r.state)) + " needs an error"};
    }
    if (r.error && r.error->code.empty())
        return decode_error{"error: field \"code\" is empty"};
    return {};
}

void encode_outcome(const task_result& r, json::object& o) {
    const auto state = to_string(r.state);
    o["state"] = json::string_view(state.data(), state.size());
    if (r.state == task_state::succeeded)
        o["value"] = finite(r.value);
    if (r.error) {
        json::object e;
        e["code"] = json::string_view(r.error->code.data(), r.error->code.size());
        e["message"] = json::string_view(r.error->message.data(), r.error->message.size());
        o["error"] = std::move(e);
    }
}

codec_result<void> decode_outcome(reader& r, task_result& res) {
    const auto state_name = r.string("state", true);
    if (!r.ok())
        return r.error();
    const auto state = parse_task_state(state_name);
    if (!state || !is_result_state(*state)) {
        return decode_error{
            "field \"state\" is not a result state: " +
            brief(json::value(json::string_view(state_name)))};
    }
    res.state = *state;
    if (res.state == task_state::succeeded) {
        if (auto* value = r.find("value"))
            res.value = std::move(*value);
    }
    if (auto* e = r.find("error")) {
        if (!e->is_object())
            return decode_error{"field \"error\" must be an object"};
        reader er(e->get_object());
        task_error err;
        err.code = er.string("code", true);
        err.message = er.string("message");
        if (!er.ok())
            return decode_error{"error: " + er.error().message};
        if (err.code.empty())
            return decode_error{"error: field \"code\" is empty"};
        res.error = std::move(err);
    } else if (res.state != task_state::succeeded) {
        return decode_error{"a result in state " + std::string(state_name) + " needs an error"};
    }
    return {};
}

}  // namespace

json::object encode_entry(const task_result& entry) {
    json::object e;
    encode_outcome(entry, e);
    return e;
}

codec_result<task_result> decode_entry(const json::object& entry) {
    json::object copy = entry;
    reader er(copy);
    task_result res;
    res.state = task_state::failed;
    if (auto ok = decode_outcome(er, res); !ok) {
        return ok.error();
    }
    return res;
}

codec_result<void> validate_bundled(const task_result& entry) {
    return validate_outcome(entry, 3);
}

codec_result<void> validate(const task_result& r) {
    if (r.task.empty())
        return decode_error{"field \"task\" is empty"};
    if (auto ok = validate_outcome(r, 1); !ok)
        return ok;
    if (r.attempt < 0)
        return decode_error{"field \"attempt\" must be >= 0"};
    if (r.bundle.size() > max_bundle_tasks) {
        return decode_error{
            "field \"bundle\" holds more than " + std::to_string(max_bundle_tasks) + " results"};
    }
    for (const auto& entry : r.bundle) {
        // The result object, the bundle array, the entry: value sits three levels down.
        if (auto ok = validate_outcome(entry, 3); !ok)
            return ok;
    }
    return {};
}

std::string encode(const task_result& r) {
    json::object o = new_document();
    o["task"] = json::string_view(r.task.data(), r.task.size());
    encode_outcome(r, o);
    if (r.attempt != 0)
        o["attempt"] = r.attempt;
    if (!r.worker.empty())
        o["worker"] = json::string_view(r.worker.data(), r.worker.size());
    if (r.started_ms != 0)
        o["started_ms"] = r.started_ms;
    if (r.finished_ms != 0)
        o["finished_ms"] = r.finished_ms;
    if (r.try_number != 0)
        o["try"] = r.try_number;
    if (!r.errors.empty())
        o["errors"] = r.errors;
    if (!r.bundle.empty()) {
        json::array entries;
        entries.reserve(r.bundle.size());
        for (const auto& entry : r.bundle) {
            json::object e;
            encode_outcome(entry, e);
            entries.emplace_back(std::move(e));
        }
        o["bundle"] = std::move(entries);
    }
    if (!r.published.empty()) {
        json::array published;
        for (const auto i : r.published)
            published.emplace_back(static_cast<std::uint64_t>(i));
        o["published"] = std::move(published);
    }
    if (!r.consumed.empty()) {
        json::array consumed;
        for (const auto i : r.consumed)
            consumed.emplace_back(static_cast<std::uint64_t>(i));
        o["consumed"] = std::move(consumed);
    }
    return to_text(o);
}

codec_result<task_result> decode_result(std::string_view data) {
    auto doc = parse_document(data);
    if (!doc)
        return doc.error();
    reader r(*doc);
    task_result res;
    res.task = r.string("task", true);
    res.attempt = r.small_integer("attempt", 0, 0, int_max);
    res.worker = r.string("worker");
    res.started_ms = r.integer("started_ms", 0, int64_min, int64_max);
    res.finished_ms = r.integer("finished_ms", 0, int64_min, int64_max);
    res.try_number = r.small_integer("try", 0, 0, int_max);
    if (!r.ok())
        return r.error();
    if (auto* errors = r.find("errors")) {
        if (!errors->is_array())
            return decode_error{"field \"errors\" must be an array"};
        res.errors = std::move(errors->get_array());
    }
    if (res.task.empty())
        return decode_error{"field \"task\" is empty"};
    if (auto ok = decode_outcome(r, res); !ok)
        return ok.error();
    if (auto* bundle = r.find("bundle")) {
        if (!bundle->is_array() || bundle->get_array().size() > max_bundle_tasks) {
            return decode_error{
                "field \"bundle\" must be an array of at most " + std::to_string(max_bundle_tasks) +
                " results"};
        }
        for (auto& e : bundle->get_array()) {
            if (!e.is_object())
                return decode_error{"field \"bundle\" holds a non-object"};
            reader er(e.get_object());
            task_result entry;
            entry.state = task_state::failed;
            if (auto ok = decode_outcome(er, entry); !ok) {
                return decode_error{"bundle: " + ok.error().message};
            }
            res.bundle.push_back(std::move(entry));
        }
    }
    for (const auto* name : {"consumed", "published"}) {
        auto* field = r.find(name);
        if (field == nullptr)
            continue;
        auto& out = std::string_view(name) == "consumed" ? res.consumed : res.published;
        if (!field->is_array())
            return decode_error{"field \"" + std::string(name) + "\" must be an array"};
        for (const auto& e : field->get_array()) {
            const auto n = as_int64(e);
            if (!n || *n < 0 || *n >= static_cast<std::int64_t>(max_bundle_tasks)) {
                return decode_error{"field \"" + std::string(name) + "\" holds " + brief(e)};
            }
            out.push_back(static_cast<std::size_t>(*n));
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
    }
    return res;
}

codec_result<task_result> bundled_result(
    const task_result& whole, std::size_t index, std::string id
) {
    task_result r;
    if (whole.bundle.empty()) {
        r = whole;
        r.consumed.clear();
        r.published.clear();
    } else if (index < whole.bundle.size()) {
        r = whole.bundle[index];
        r.attempt = whole.attempt;
        r.worker = whole.worker;
        r.started_ms = whole.started_ms;
        r.finished_ms = whole.finished_ms;
        r.try_number = whole.try_number;
        r.errors = whole.errors;
    } else {
        return decode_error{
            "the bundle's result holds " + std::to_string(whole.bundle.size()) +
            " results, none for task " + std::to_string(index)};
    }
    r.task = std::move(id);
    return r;
}

void summarize_bundle(task_result& r) {
    if (r.bundle.empty()) {
        return;
    }
    const auto& first = r.bundle.front();
    std::size_t failed = 0;
    bool uniform = true;
    for (const auto& e : r.bundle) {
        failed += e.state == task_state::succeeded ? 0 : 1;
        uniform = uniform && e.state == first.state;
    }
    r.value = nullptr;
    if (failed == 0) {
        r.state = task_state::succeeded;
        r.error.reset();
    } else if (uniform) {
        r.state = first.state;
        r.error = first.error ? *first.error : task_error{std::string(codes::handler_error), ""};
    } else {
        r.state = task_state::failed;
        r.error = task_error{
            std::string(codes::handler_error), std::to_string(failed) + " of " +
                                                   std::to_string(r.bundle.size()) +
                                                   " tasks of the bundle did not succeed"};
    }
}

bool result_size_ok(std::string_view encoded) noexcept {
    return encoded.size() <= max_result_bytes;
}

// --- members ---------------------------------------------------------------------------------

namespace {

// A member node's list of names (types, features, suspects), at most `most` of them.
json::array member_names(
    const std::vector<std::string>& names,
    std::size_t most = std::numeric_limits<std::size_t>::max()
) {
    json::array a;
    const auto n = std::min(names.size(), most);
    a.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        a.emplace_back(json::string_view(names[i].data(), names[i].size()));
    return a;
}

}  // namespace

std::vector<std::string> own_features() {
    return {std::string(feature_entry_results)};
}

std::string encode(const member_info& m) {
    json::object o = new_document();
    o["id"] = json::string_view(m.id.data(), m.id.size());
    if (m.epoch)
        o["epoch"] = *m.epoch;
    o["host"] = json::string_view(m.host.data(), m.host.size());
    o["pid"] = m.pid;
    if (m.since_ms != 0)
        o["since_ms"] = m.since_ms;
    if (m.capacity)
        o["capacity"] = *m.capacity;
    if (m.threads)
        o["threads"] = *m.threads;
    if (m.capacity || !m.types.empty())
        o["types"] = member_names(m.types);
    if (m.started_ms != 0)
        o["started_ms"] = m.started_ms;
    if (m.draining)
        o["draining"] = true;
    if (!m.unhealthy.empty())
        o["unhealthy"] = member_names(m.unhealthy);
    if (!m.features.empty())
        o["features"] = member_names(m.features);
    if (m.throughput)
        o["throughput"] = *m.throughput;
    if (m.max_pending)
        o["max_pending"] = *m.max_pending;
    if (!m.direct)
        o["direct"] = false;
    if (!m.suspects.empty())
        o["suspects"] = member_names(m.suspects, max_suspects_named);
    return to_text(o);
}

namespace {

enum class member_kind { any, worker, master };

codec_result<member_info> decode_member_as(std::string_view data, member_kind kind) {
    auto doc = parse_document(data);
    if (!doc)
        return doc.error();
    reader r(*doc);
    member_info m;
    m.id = r.string("id", true);
    m.host = r.string("host");
    m.pid = r.integer("pid", 0, int64_min, int64_max);
    const bool worker = kind == member_kind::worker;
    if (r.find("capacity") != nullptr || worker) {
        m.capacity = r.small_integer("capacity", 0, 0, int_max, worker);
    }
    if (r.find("threads") != nullptr)
        m.threads = r.small_integer("threads", 1, 1, int_max);
    // A worker must say what it serves, if only "nothing" ([]).
    if (worker && r.find("types") == nullptr)
        r.fail("field \"types\" is missing");
    m.types = read_types(r);
    m.started_ms = r.integer("started_ms", 0, int64_min, int64_max);
    if (r.find("epoch") != nullptr || kind == member_kind::master) {
        m.epoch = r.integer("epoch", 1, 1, int64_max, kind == member_kind::master);
    }
    m.since_ms = r.integer("since_ms", 0, int64_min, int64_max);
    m.draining = r.boolean("draining", false);
    m.unhealthy = read_names(r, "unhealthy", "task type", 100'000, [](std::string_view t) {
        return is_valid_task_type(t);
    });
    m.features = read_features(r);
    if (r.find("throughput") != nullptr) {
        // Information only: kept to 3 decimals within 0..1e12 tasks/s, so that it survives
        // encode + decode exactly (Boost.JSON 1.81 reads some 17-digit doubles back one ulp
        // off; a number of 15 digits or fewer it reads exactly).
        const double t = std::min(r.finite("throughput", 0.0), 1e12);
        m.throughput = std::round(t * 1000.0) / 1000.0;
    }
    if (r.find("max_pending") != nullptr)
        m.max_pending = r.integer("max_pending", 0, 0, int64_max);
    m.direct = r.boolean("direct", true);
    m.suspects = read_suspects(r);
    if (!r.ok())
        return r.error();
    if (m.id.empty())
        return decode_error{"field \"id\" is empty"};
    return m;
}

}  // namespace

codec_result<member_info> decode_member(std::string_view data) {
    return decode_member_as(data, member_kind::any);
}

codec_result<member_info> decode_worker(std::string_view data) {
    return decode_member_as(data, member_kind::worker);
}

codec_result<member_info> decode_master(std::string_view data) {
    return decode_member_as(data, member_kind::master);
}

// --- /meta, /epoch, /cancel ------------------------------------------------------------------

std::string encode(const meta_info& m) {
    json::object o;
    o["v"] = protocol_format;
    o["pending_shards"] = m.pending_shards;
    o["result_shards"] = m.result_shards;
    o["created_ms"] = m.created_ms;
    return to_text(o);
}

codec_result<meta_info> decode_meta(std::string_view data) {
    auto doc = parse_document(data, protocol_format);
    if (!doc) {
        for (std::int64_t older = 1; older < protocol_format; ++older) {
            if (parse_document(data, older)) {
                return decode_error{
                    "a namespace of zkd protocol format " + std::to_string(older) +
                    " (this zkd speaks format " + std::to_string(protocol_format) +
                    "): let its tasks finish with the zkd that made it, or use another "
                    "namespace"};
            }
        }
        return doc.error();
    }
    reader r(*doc);
    meta_info m;
    const auto shards = [&](std::string_view key) {
        return static_cast<std::uint32_t>(r.integer(key, 1, 1, max_shards, true));
    };
    m.pending_shards = shards("pending_shards");
    m.result_shards = shards("result_shards");
    m.created_ms = r.integer("created_ms", 0, int64_min, int64_max);
    if (!r.ok())
        return r.error();
    return m;
}

std::string encode(const epoch_info& e) {
    json::object o = new_document();
    if (!e.master.empty())
        o["master"] = json::string_view(e.master.data(), e.master.size());
    if (e.since_ms != 0)
        o["since_ms"] = e.since_ms;
    return to_text(o);
}

codec_result<epoch_info> decode_epoch(std::string_view data) {
    auto doc = parse_document(data);
    if (!doc)
        return doc.error();
    reader r(*doc);
    epoch_info e;
    e.master = r.string("master");
    e.since_ms = r.integer("since_ms", 0, int64_min, int64_max);
    if (!r.ok())
        return r.error();
    return e;
}

std::string encode(const cancel_info& c) {
    json::object o = new_document();
    o["requested_ms"] = c.requested_ms;
    return to_text(o);
}

codec_result<cancel_info> decode_cancel(std::string_view data) {
    auto doc = parse_document(data);
    if (!doc)
        return doc.error();
    reader r(*doc);
    cancel_info c;
    c.requested_ms = r.integer("requested_ms", 0, int64_min, int64_max);
    if (!r.ok())
        return r.error();
    return c;
}

std::string encode(const change_log& log) {
    json::array created;
    created.reserve(log.created.size());
    for (const auto& e : log.created) {
        json::object o;
        o["name"] = json::string_view(e.name.data(), e.name.size());
        if (e.data) {
            o["data"] = json::string_view(e.data->data(), e.data->size());
        }
        if (e.due_ms) {
            o["due_ms"] = *e.due_ms;
        }
        created.emplace_back(std::move(o));
    }
    json::object o = new_document();
    o["created"] = std::move(created);
    return to_text(o);
}

codec_result<change_log> decode_change_log(std::string_view data) {
    auto doc = parse_document(data);
    if (!doc)
        return doc.error();
    const auto* created = doc->if_contains("created");
    if (created == nullptr || !created->is_array())
        return decode_error{"field \"created\" must be an array"};
    const auto& entries = created->get_array();
    if (entries.size() > max_log_entries)
        return decode_error{"more than " + std::to_string(max_log_entries) + " entries"};
    change_log log;
    log.created.reserve(entries.size());
    for (const auto& v : entries) {
        const auto* o = v.if_object();
        const auto* name = o != nullptr ? o->if_contains("name") : nullptr;
        if (name == nullptr || !name->is_string())
            return decode_error{"an entry without a \"name\" string: " + brief(v)};
        const auto& n = name->get_string();
        if (n.empty() || n.size() > 255 || n.find('/') != json::string::npos)
            return decode_error{"not a child name: " + brief(*name)};
        log_entry e{std::string(n), std::nullopt};
        if (const auto* d = o->if_contains("data"); d != nullptr && !d->is_null()) {
            if (!d->is_string())
                return decode_error{"field \"data\" must be a string, not " + brief(*d)};
            e.data = std::string(d->get_string());
        }
        // Advisory: a due time of another shape is dropped (the node's data says it).
        if (const auto* due = o->if_contains("due_ms"); due != nullptr) {
            if (const auto ms = as_int64(*due); ms && *ms >= 0) {
                e.due_ms = *ms;
            }
        }
        log.created.push_back(std::move(e));
    }
    return log;
}

std::optional<std::int64_t> as_int64(const json::value& v) noexcept {
    switch (v.kind()) {
    case json::kind::int64:
        return v.get_int64();
    case json::kind::uint64:
        if (v.get_uint64() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            return std::nullopt;
        return static_cast<std::int64_t>(v.get_uint64());
    case json::kind::double_: {
        const double d = v.get_double();
        constexpr double exact_limit = 9007199254740992.0;  // 2^53
        if (!std::isfinite(d) || std::trunc(d) != d || std::fabs(d) > exact_limit)
            return std::nullopt;
        return static_cast<std::int64_t>(d);
    }
    default:
        return std::nullopt;
    }
}

}  // namespace zkd::protocol
