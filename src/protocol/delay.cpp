// SPDX-License-Identifier: MIT
#include "protocol/delay.hpp"

#include "protocol/syntax.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>

namespace zkd::protocol {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds one_day{24L * 3600 * 1000};

/// Days since 1970-01-01 of a civil date (proleptic Gregorian; Howard Hinnant's algorithm).
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
    y -= m <= 2 ? 1 : 0;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const auto yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct civil {
    std::int64_t y;
    unsigned m;
    unsigned d;
};

constexpr civil civil_from_days(std::int64_t z) noexcept {
    z += 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const auto doe = static_cast<unsigned>(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    return {y + (m <= 2 ? 1 : 0), m, d};
}

bool is_leap(std::int64_t y) noexcept {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned days_in_month(std::int64_t y, unsigned m) noexcept {
    constexpr std::array<unsigned, 12> days{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days.at(m - 1);
}

/// Reads exactly `n` digits at `pos` of `s`, advancing it.
std::optional<unsigned> digits(std::string_view s, std::size_t& pos, std::size_t n) {
    if (pos + n > s.size()) {
        return std::nullopt;
    }
    unsigned v = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const char c = s[pos + i];
        if (c < '0' || c > '9') {
            return std::nullopt;
        }
        v = v * 10 + static_cast<unsigned>(c - '0');
    }
    pos += n;
    return v;
}

bool expect(std::string_view s, std::size_t& pos, char c) {
    if (pos < s.size() && s[pos] == c) {
        ++pos;
        return true;
    }
    return false;
}

std::optional<std::int64_t> parse_rfc3339(std::string_view s) {
    std::size_t pos = 0;
    const auto y = digits(s, pos, 4);
    if (!y || !expect(s, pos, '-')) {
        return std::nullopt;
    }
    const auto mo = digits(s, pos, 2);
    if (!mo || *mo < 1 || *mo > 12 || !expect(s, pos, '-')) {
        return std::nullopt;
    }
    const auto d = digits(s, pos, 2);
    if (!d || *d < 1 || *d > days_in_month(*y, *mo)) {
        return std::nullopt;
    }
    if (pos >= s.size() || (s[pos] != 'T' && s[pos] != 't' && s[pos] != ' ')) {
        return std::nullopt;
    }
    ++pos;
    const auto h = digits(s, pos, 2);
    if (!h || *h > 23 || !expect(s, pos, ':')) {
        return std::nullopt;
    }
    const auto mi = digits(s, pos, 2);
    if (!mi || *mi > 59 || !expect(s, pos, ':')) {
        return std::nullopt;
    }
    const auto sec = digits(s, pos, 2);
    // 60: a leap second, taken as the next second's start (no clock zkd reads shows it).
    if (!sec || *sec > 60) {
        return std::nullopt;
    }
    std::int64_t frac_ms = 0;
    if (expect(s, pos, '.')) {
        std::size_t n = 0;
        std::int64_t scale = 100;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
            frac_ms += scale * (s[pos] - '0');
            scale /= 10;  // digits past milliseconds are dropped (truncated)
            ++pos;
            ++n;
        }
        if (n == 0) {
            return std::nullopt;
        }
    }
    std::int64_t offset_min = 0;
    if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
        ++pos;
    } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
        const int sign = s[pos] == '-' ? -1 : 1;
        ++pos;
        const auto oh = digits(s, pos, 2);
        if (!oh || *oh > 23 || !expect(s, pos, ':')) {
            return std::nullopt;
        }
        const auto om = digits(s, pos, 2);
        if (!om || *om > 59) {
            return std::nullopt;
        }
        offset_min = sign * static_cast<std::int64_t>(*oh * 60 + *om);
    } else {
        return std::nullopt;  // RFC 3339 requires the offset
    }
    if (pos != s.size()) {
        return std::nullopt;
    }
    const std::int64_t days = days_from_civil(*y, *mo, *d);
    const std::int64_t secs = days * 86400 + static_cast<std::int64_t>(*h) * 3600 +
                              static_cast<std::int64_t>(*mi) * 60 + *sec - offset_min * 60;
    return secs * 1000 + frac_ms;
}

}  // namespace

std::optional<std::int64_t> parse_time(std::string_view text) {
    if (text.empty()) {
        return std::nullopt;
    }
    std::optional<std::int64_t> ms;
    if (text.find_first_not_of("0123456789") == std::string_view::npos) {
        if (text.size() > 13) {
            return std::nullopt;
        }
        std::int64_t v = 0;
        for (const char c : text) {
            v = v * 10 + (c - '0');
        }
        ms = v;
    } else {
        ms = parse_rfc3339(text);
    }
    if (!ms || *ms < 0 || *ms > max_due_ms) {
        return std::nullopt;
    }
    return ms;
}

std::string format_time(std::int64_t ms) {
    ms = std::max<std::int64_t>(0, ms);
    const std::int64_t days = ms / 86'400'000;
    const std::int64_t rest = ms % 86'400'000;
    const auto c = civil_from_days(days);
    std::array<char, 40> buf{};
    std::snprintf(
        buf.data(), buf.size(), "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ",
        static_cast<long long>(c.y), c.m, c.d, static_cast<long long>(rest / 3'600'000),
        static_cast<long long>(rest / 60'000 % 60), static_cast<long long>(rest / 1000 % 60),
        static_cast<long long>(rest % 1000)
    );
    return buf.data();
}

std::optional<backoff_policy> parse_backoff(std::string_view text) {
    const auto colon = text.find(':');
    const auto base = parse_duration(text.substr(0, colon));
    if (!base || *base <= milliseconds(0) || *base > one_day) {
        return std::nullopt;
    }
    backoff_policy p;
    p.base = *base;
    if (colon == std::string_view::npos) {
        p.max = *base > one_day / 60 ? one_day : *base * 60;
        return p;
    }
    const auto max = parse_duration(text.substr(colon + 1));
    if (!max || *max < *base || *max > one_day) {
        return std::nullopt;
    }
    p.max = *max;
    return p;
}

milliseconds backoff_cap(const backoff_policy& p, int retry) noexcept {
    const auto base = std::max<std::int64_t>(0, p.base.count());
    const auto max = std::max<std::int64_t>(0, p.max.count());
    std::int64_t cap = base;
    for (int k = 1; k < retry && cap < max; ++k) {
        cap = cap > max / 2 ? max : cap * 2;
    }
    return milliseconds(std::min(cap, max));
}

milliseconds backoff_delay(const backoff_policy& p, int retry, std::uint64_t random) noexcept {
    const auto cap = static_cast<std::uint64_t>(backoff_cap(p, retry).count());
    // Uniform over [0, cap] (cap + 1 values); the modulo's bias is below 2^-40 for any cap a
    // day or shorter.
    return milliseconds(static_cast<std::int64_t>(random % (cap + 1)));
}

bool retryable(task_state state, std::string_view code) noexcept {
    if (state == task_state::timed_out) {
        return true;
    }
    if (state != task_state::failed) {
        return false;
    }
    return code != codes::malformed_task && code != codes::unknown_type && code != codes::bad_args;
}

std::string cut_utf8(std::string_view text, std::size_t most) {
    if (text.size() <= most) {
        return std::string(text);
    }
    std::size_t end = most;
    // Back off continuation bytes (10xxxxxx) so a character is never split.
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0U) == 0x80U) {
        --end;
    }
    return std::string(text.substr(0, end));
}

}  // namespace zkd::protocol

namespace zkd::protocol {

namespace {

namespace json = boost::json;

std::optional<std::int64_t> int_field(const json::object& o, std::string_view name) {
    const auto* v = o.if_contains(name);
    if (v == nullptr) {
        return std::nullopt;
    }
    return as_int64(*v);
}

std::optional<json::object> parse_object(std::string_view text) {
    boost::system::error_code ec;
    auto v = parse_json(text, ec);
    if (ec || !v.is_object()) {
        return std::nullopt;
    }
    return std::move(v.get_object());
}

constexpr std::int64_t day_ms = 24L * 3600 * 1000;

}  // namespace

std::optional<delay_fields> read_delay_fields(std::string_view task_json) {
    auto o = parse_object(task_json);
    if (!o) {
        return std::nullopt;
    }
    delay_fields f;
    if (const auto due = int_field(*o, "due_ms"); due && *due >= 0 && *due <= max_due_ms) {
        f.due_ms = *due;
    }
    if (const auto r = int_field(*o, "retries"); r && *r >= 0 && *r <= max_retries_limit) {
        f.retries = static_cast<int>(*r);
    }
    if (const auto base = int_field(*o, "backoff_ms"); base && *base > 0 && *base <= day_ms) {
        backoff_policy p;
        p.base = std::chrono::milliseconds(*base);
        p.max = std::chrono::milliseconds(std::min(*base * 60, day_ms));
        if (const auto max = int_field(*o, "backoff_max_ms");
            max && *max >= *base && *max <= day_ms) {
            p.max = std::chrono::milliseconds(*max);
        }
        f.backoff = p;
    }
    if (const auto t = int_field(*o, "try"); t && *t >= 1 && *t <= max_retries_limit + 1) {
        f.try_number = static_cast<int>(*t);
    }
    if (const auto* e = o->if_contains("errors"); e != nullptr && e->is_array()) {
        f.errors = e->get_array();
    }
    return f;
}

std::optional<std::int64_t> read_due_ms(std::string_view task_json) {
    auto f = read_delay_fields(task_json);
    return f ? f->due_ms : std::nullopt;
}

void set_submit_fields(
    json::object& task,
    std::optional<std::int64_t> due_ms,
    std::optional<int> retries,
    const std::optional<backoff_policy>& backoff
) {
    if (due_ms) {
        task["due_ms"] = *due_ms;
    }
    if (retries) {
        task["retries"] = *retries;
    }
    if (backoff) {
        task["backoff_ms"] = backoff->base.count();
        task["backoff_max_ms"] = backoff->max.count();
    }
}

namespace {

/// plan_retry() and plan_bundle_retry(): the retry node of the task `o` (its §4.3 fields
/// `f`), with `finished` set when not null (a bundle's).
std::optional<retry_plan> plan_retry_of(
    json::object o,
    delay_fields f,
    const task_error& error,
    std::int64_t finished_ms,
    const backoff_policy& defaults,
    std::uint64_t random,
    const json::array* finished
) {
    const int retries = f.retries.value_or(defaults.retries);
    if (f.try_number > retries) {
        return std::nullopt;  // that was the last try
    }
    backoff_policy p = f.backoff.value_or(defaults);
    p.retries = retries;
    const auto wait = backoff_delay(p, f.try_number, random);
    retry_plan plan;
    plan.next_try = f.try_number + 1;
    plan.due_ms = std::min(max_due_ms, std::max<std::int64_t>(0, finished_ms) + wait.count());
    // The task as submitted: the assignment and its progress go (§6 T4 "Retry").
    for (const auto* k : {"epoch", "assigned_ms", "worker", "running_ms", "progress"}) {
        o.erase(k);
    }
    o["attempt"] = 1;
    o["try"] = plan.next_try;
    o["due_ms"] = plan.due_ms;
    json::object e;
    e["try"] = f.try_number;
    e["code"] = json::string_view(error.code.data(), error.code.size());
    const auto message = cut_utf8(error.message, max_retry_message_bytes);
    e["message"] = json::string_view(message.data(), message.size());
    e["finished_ms"] = finished_ms;
    f.errors.emplace_back(std::move(e));
    // The node must stay within max_task_bytes: the oldest errors go first (the list then
    // starts at a later try); a task too large even without them is not retried.
    for (;;) {
        o["errors"] = f.errors;
        if (finished != nullptr) {
            o["finished"] = *finished;
        }
        plan.data = to_text(o);
        if (task_size_ok(plan.data)) {
            return plan;
        }
        if (f.errors.size() <= 1) {
            return std::nullopt;
        }
        f.errors.erase(f.errors.begin());
    }
}

}  // namespace

std::optional<retry_plan> plan_retry(
    std::string_view assignment_json,
    task_state state,
    const task_error& error,
    std::int64_t finished_ms,
    const backoff_policy& defaults,
    std::uint64_t random
) {
    if (!retryable(state, error.code)) {
        return std::nullopt;
    }
    auto o = parse_object(assignment_json);
    auto f = read_delay_fields(assignment_json);
    if (!o || !f) {
        return std::nullopt;
    }
    return plan_retry_of(
        std::move(*o), std::move(*f), error, finished_ms, defaults, random, nullptr
    );
}

std::vector<std::optional<task_result>> read_finished(std::string_view task_json, std::size_t n) {
    std::vector<std::optional<task_result>> out(n);
    const auto o = parse_object(task_json);
    const auto* field = o ? o->if_contains("finished") : nullptr;
    if (field == nullptr || !field->is_array() || field->get_array().size() != n) {
        return out;
    }
    const auto& entries = field->get_array();
    for (std::size_t k = 0; k < n; ++k) {
        if (entries[k].is_null()) {
            continue;
        }
        auto e = entries[k].is_object() ? decode_entry(entries[k].get_object())
                                        : codec_result<task_result>(decode_error{"not an object"});
        if (!e) {
            return std::vector<std::optional<task_result>>(n);  // not ours: run them all
        }
        out[k] = std::move(*e);
    }
    return out;
}

std::vector<task_result> close_bundle(
    std::string_view task_json, std::size_t n, task_state state, const task_error& error
) {
    auto finished = read_finished(task_json, n);
    if (std::none_of(finished.begin(), finished.end(), [](const auto& e) {
            return e.has_value();
        })) {
        return {};
    }
    std::vector<task_result> entries;
    entries.reserve(n);
    for (auto& e : finished) {
        if (e) {
            entries.push_back(std::move(*e));
            continue;
        }
        task_result open;
        open.state = state;
        open.value = nullptr;
        open.error = error;
        entries.push_back(std::move(open));
    }
    return entries;
}

bool read_entry_results(std::string_view task_json) {
    const auto o = parse_object(task_json);
    const auto* field = o ? o->if_contains("entry_results") : nullptr;
    return field != nullptr && field->is_bool() && field->get_bool() &&
           o->if_contains("bundle") != nullptr;
}

std::vector<std::size_t> read_published(
    std::string_view task_json, const std::vector<std::optional<task_result>>& finished
) {
    std::vector<std::size_t> out;
    const auto o = parse_object(task_json);
    const auto* field = o ? o->if_contains("published") : nullptr;
    if (field == nullptr || !field->is_array()) {
        return out;
    }
    for (const auto& e : field->get_array()) {
        const auto k = as_int64(e);
        if (!k) {
            return {};  // not ours
        }
        if (*k >= 0 && static_cast<std::uint64_t>(*k) < finished.size() &&
            finished[static_cast<std::size_t>(*k)]) {
            out.push_back(static_cast<std::size_t>(*k));
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

bool retry_left(std::string_view task_json, const backoff_policy& defaults) {
    const auto f = read_delay_fields(task_json);
    return f && f->try_number <= f->retries.value_or(defaults.retries);
}

std::optional<std::string> with_published(
    std::string_view task_json,
    std::size_t n,
    const std::vector<std::pair<std::size_t, task_result>>& entries
) {
    auto o = parse_object(task_json);
    if (!o) {
        return std::nullopt;
    }
    const auto finished = read_finished(task_json, n);
    auto published = read_published(task_json, finished);
    json::array field;
    field.reserve(n);
    for (const auto& e : finished) {
        field.emplace_back(e ? json::value(encode_entry(*e)) : json::value(nullptr));
    }
    for (const auto& [k, e] : entries) {
        if (k >= n) {
            return std::nullopt;
        }
        field[k] = encode_entry(e);
        published.push_back(k);
    }
    std::sort(published.begin(), published.end());
    published.erase(std::unique(published.begin(), published.end()), published.end());
    json::array listed;
    for (const auto k : published) {
        listed.emplace_back(static_cast<std::uint64_t>(k));
    }
    (*o)["finished"] = std::move(field);
    (*o)["published"] = std::move(listed);
    return to_text(*o);
}

void cancel_retryable_entries(
    std::vector<task_result>& entries, const std::set<std::size_t>& cancelled
) {
    for (const auto k : cancelled) {
        if (k >= entries.size()) {
            continue;
        }
        auto& e = entries[k];
        if (retryable(e.state, e.error ? std::string_view(e.error->code) : "")) {
            e.state = task_state::cancelled;
            e.value = nullptr;
            e.error = task_error{std::string(codes::cancelled), "cancelled after a failed try"};
        }
    }
}

std::optional<retry_plan> plan_bundle_retry(
    std::string_view assignment_json,
    const std::vector<task_result>& entries,
    const task_error& error,
    std::int64_t finished_ms,
    const backoff_policy& defaults,
    std::uint64_t random
) {
    // A task an earlier try finished (its node's `finished`: a published one too) is final
    // as it was then, whatever this worker's retry defaults say: it never runs again.
    const auto held = read_finished(assignment_json, entries.size());
    json::array finished;
    finished.reserve(entries.size());
    bool again = false;
    for (std::size_t k = 0; k < entries.size(); ++k) {
        const auto& e = entries[k];
        const bool rerun =
            !held[k] && retryable(e.state, e.error ? std::string_view(e.error->code) : "");
        again = again || rerun;
        finished.emplace_back(
            rerun     ? json::value(nullptr)
            : held[k] ? json::value(encode_entry(*held[k]))  // as it was published or kept
                      : json::value(encode_entry(e))
        );
    }
    if (!again) {
        return std::nullopt;
    }
    auto o = parse_object(assignment_json);
    auto f = read_delay_fields(assignment_json);
    if (!o || !f) {
        return std::nullopt;
    }
    return plan_retry_of(
        std::move(*o), std::move(*f), error, finished_ms, defaults, random, &finished
    );
}

std::string with_earlier_tries(std::string result_json, std::string_view assignment_json) {
    auto f = read_delay_fields(assignment_json);
    if (!f || (f->try_number == 1 && f->errors.empty())) {
        return result_json;
    }
    auto o = parse_object(result_json);
    if (!o) {
        return result_json;
    }
    (*o)["try"] = f->try_number;
    (*o)["errors"] = std::move(f->errors);
    return to_text(*o);
}

}  // namespace zkd::protocol
