// SPDX-License-Identifier: MIT
// Served exec types, pure: frames (docs/exec.md "Serve mode") and the pool's decisions.
#include "handlers/serve.hpp"
#include "protocol/text.hpp"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <array>
#include <cmath>

namespace json = boost::json;

namespace zkd::handlers::exec::serve {

// --- frames ----------------------------------------------------------------------------------

std::string encode(const task_frame& t) {
    json::object o;
    o["op"] = "task";
    o["id"] = t.id;
    o["attempt"] = t.attempt;
    o["epoch"] = t.epoch;
    o["type"] = t.type;
    o["args"] = t.args;
    o["deadline_ms"] = t.deadline_ms;
    std::string line = json::serialize(o);
    line += '\n';
    return line;
}

std::string encode_cancel(std::string_view id) {
    json::object o;
    o["op"] = "cancel";
    o["id"] = id;
    std::string line = json::serialize(o);
    line += '\n';
    return line;
}

namespace {

bool is_code_word(std::string_view s) {
    return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
}

std::string short_text(std::string_view s, std::size_t max) {
    std::string out(s.substr(0, max + 1));  // cut_utf8 looks at the first byte it drops
    protocol::cut_utf8(out, max);
    return protocol::printable_utf8(out);
}

/// A string member of a parsed frame cut to `max` bytes. The parser accepts only valid UTF-8
/// (a lone surrogate escape included: not JSON), and the cut keeps whole characters: it needs
/// no cleaning.
std::string member_text(std::string_view s, std::size_t max) {
    std::string out(s.substr(0, max + 1));
    protocol::cut_utf8(out, max);
    return out;
}

}  // namespace

std::variant<frame, std::string> parse_frame(std::string_view line, log_level logged) {
    // The parsed value lives in a buffer on the stack (the heap only past it): what the frame
    // keeps is copied out of it.
    std::array<unsigned char, 4096> buffer;  // NOLINT(cppcoreguidelines-pro-type-member-init)
    json::monotonic_resource scratch(buffer.data(), buffer.size());
    boost::system::error_code ec;
    const json::value v = json::parse(line, ec, &scratch);
    if (ec) {
        return "not JSON (" + ec.message() + "): " + short_text(line, 200);
    }
    if (!v.is_object()) {
        return "not a JSON object: " + short_text(line, 200);
    }
    const auto& o = v.get_object();
    const auto* op = o.if_contains("op");
    if (op == nullptr || !op->is_string()) {
        return std::string("no \"op\" string");
    }
    const std::string_view name = op->get_string();
    const auto string_member = [&](std::string_view key, std::string& out) -> bool {
        const auto* m = o.if_contains(key);
        if (m == nullptr) {
            return false;
        }
        if (!m->is_string()) {
            return false;
        }
        out = std::string(m->get_string());
        return true;
    };
    const auto id = [&](std::string& out) -> std::optional<std::string> {
        if (!string_member("id", out)) {
            return "a \"" + std::string(name) + R"(" frame without an "id" string)";
        }
        return std::nullopt;
    };
    if (name == "ready") {
        ready_frame r;
        if (const auto* p = o.if_contains("protocol"); p != nullptr && p->is_number()) {
            r.protocol = p->to_number<std::int64_t>();
        }
        return frame{r};
    }
    if (name == "progress") {
        progress_frame p;
        if (auto bad = id(p.id)) {
            return *bad;
        }
        const auto* f = o.if_contains("fraction");
        if (f == nullptr || !f->is_number() || !std::isfinite(f->to_number<double>())) {
            return std::string(R"(a "progress" frame without a "fraction" number)");
        }
        p.fraction = std::clamp(f->to_number<double>(), 0.0, 1.0);
        if (const auto* m = o.if_contains("message"); m != nullptr && m->is_string()) {
            p.message = member_text(m->get_string(), 200);
        }
        return frame{std::move(p)};
    }
    if (name == "log") {
        log_frame l;
        string_member("level", l.level);
        if (l.level != "debug" && l.level != "info" && l.level != "warn" && l.level != "error") {
            l.level = "info";
        }
        const log_level level = l.level == "debug"  ? log_level::debug
                                : l.level == "info" ? log_level::info
                                : l.level == "warn" ? log_level::warn
                                                    : log_level::error;
        if (level >= logged) {
            if (const auto* m = o.if_contains("message"); m != nullptr && m->is_string()) {
                l.message = member_text(m->get_string(), 4096);
            }
        }
        return frame{std::move(l)};
    }
    if (name == "result") {
        result_frame r;
        if (auto bad = id(r.id)) {
            return *bad;
        }
        const auto* value = o.if_contains("value");
        if (value == nullptr) {
            return std::string(R"(a "result" frame without a "value")");
        }
        r.value = *value;
        return frame{std::move(r)};
    }
    if (name == "error") {
        error_frame e;
        if (auto bad = id(e.id)) {
            return *bad;
        }
        std::string m;
        string_member("message", m);
        e.message = short_text(m, 4096);
        e.code = "handler_error";
        if (const auto* c = o.if_contains("code"); c != nullptr) {
            if (!c->is_string() || !is_code_word(c->get_string())) {
                return std::string(
                    "an \"error\" frame whose \"code\" is not a code word "
                    "([a-z0-9_]{1,64})"
                );
            }
            e.code = std::string(c->get_string());
        }
        return frame{std::move(e)};
    }
    return frame{unknown_frame{std::string(name)}};
}

void coalesce_progress(std::vector<frame>& frames) {
    // From the back: `later` is the nearest progress frame after the one at i with nothing but
    // log and unknown frames between. Kept frames move to the back; the room of the dropped
    // ones is erased at the end.
    const progress_frame* later = nullptr;
    std::size_t kept = frames.size();
    for (std::size_t i = frames.size(); i-- > 0;) {
        bool drop = false;
        if (const auto* p = std::get_if<progress_frame>(&frames[i])) {
            drop = later != nullptr && later->id == p->id;
        } else if (!std::holds_alternative<log_frame>(frames[i]) && !std::holds_alternative<unknown_frame>(frames[i])) {
            later = nullptr;
        }
        if (drop) {
            continue;
        }
        --kept;
        if (kept != i) {
            frames[kept] = std::move(frames[i]);
        }
        if (const auto* p = std::get_if<progress_frame>(&frames[kept])) {
            later = p;
        }
    }
    frames.erase(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(kept));
}

bool line_splitter::feed(std::string_view data, std::vector<std::string_view>& lines) {
    joined_.clear();
    if (!partial_.empty()) {
        // The line an earlier feed began: it ends here, or grows.
        const auto nl = data.find('\n');
        const std::string_view part = data.substr(0, nl);
        if (partial_.size() + part.size() > max_) {
            partial_.clear();
            return false;
        }
        partial_.append(part);
        if (nl == std::string_view::npos) {
            return true;
        }
        std::swap(joined_, partial_);
        partial_.clear();
        lines.emplace_back(joined_);
        data.remove_prefix(nl + 1);
    }
    for (;;) {
        const auto nl = data.find('\n');
        if (nl == std::string_view::npos) {
            if (data.size() > max_) {
                return false;
            }
            partial_.assign(data);
            return true;
        }
        if (nl > max_) {
            return false;
        }
        lines.push_back(data.substr(0, nl));
        data.remove_prefix(nl + 1);
    }
}

// --- the pool --------------------------------------------------------------------------------

pool_fsm::entry* pool_fsm::find(int proc) {
    for (auto& e : procs_) {
        if (e.proc == proc) {
            return &e;
        }
    }
    return nullptr;
}

const pool_fsm::entry* pool_fsm::find(int proc) const {
    for (const auto& e : procs_) {
        if (e.proc == proc) {
            return &e;
        }
    }
    return nullptr;
}

std::optional<pool_fsm::state> pool_fsm::state_of(int proc) const {
    if (const auto* e = find(proc)) {
        return e->st;
    }
    return std::nullopt;
}

int pool_fsm::live() const {
    return static_cast<int>(std::count_if(procs_.begin(), procs_.end(), [](const entry& e) {
        return e.st != state::retiring;
    }));
}

int pool_fsm::to_start() const {
    if (backing_off_) {
        return 0;
    }
    const int room = std::max(s_.concurrency, 1) - live();
    if (room <= 0) {
        return 0;
    }
    int starting = 0;
    int idle = 0;
    for (const auto& e : procs_) {
        starting += e.st == state::starting ? 1 : 0;
        idle += e.st == state::idle ? 1 : 0;
    }
    int want = std::max({unhealthy_ ? 0 : waiting_ - starting - idle, s_.warm - live(), 0});
    if (unhealthy_) {
        want = starting == 0 ? 1 : 0;  // one start at a time finds out if it heals
    } else if (failures_ > 0) {
        want = std::min(want, starting == 0 ? 1 : 0);  // after a failure, one at a time
    }
    return std::min(want, room);
}

std::chrono::milliseconds pool_fsm::backoff() const {
    if (failures_ == 0) {
        return std::chrono::milliseconds(0);
    }
    auto d = s_.backoff_min;
    for (int i = 1; i < failures_ && d < s_.backoff_max; ++i) {
        d *= 2;
    }
    return std::min(d, s_.backoff_max);
}

void pool_fsm::started(int proc) {
    procs_.push_back(entry{proc, state::starting});
}

void pool_fsm::ready(int proc) {
    if (auto* e = find(proc); e != nullptr && e->st == state::starting) {
        e->st = state::idle;
    }
    failed_starts_ = 0;
    unhealthy_ = false;
}

void pool_fsm::failure() {
    ++failures_;
    backing_off_ = true;
}

void pool_fsm::start_failed(int proc) {
    std::erase_if(procs_, [proc](const entry& e) { return e.proc == proc; });
    ++failed_starts_;
    if (failed_starts_ >= s_.crash_loop) {
        unhealthy_ = true;
    }
    failure();
}

std::optional<int> pool_fsm::assign() {
    if (waiting_ <= 0) {
        return std::nullopt;
    }
    for (auto& e : procs_) {
        if (e.st == state::idle) {
            e.st = state::busy;
            --waiting_;
            return e.proc;
        }
    }
    return std::nullopt;
}

bool pool_fsm::task_done(int proc, std::size_t rss) {
    auto* e = find(proc);
    if (e == nullptr || e->st != state::busy) {
        return false;
    }
    ++e->tasks;
    failures_ = 0;  // it worked: the next start needs no backoff
    const bool recycle = (s_.max_tasks > 0 && e->tasks >= s_.max_tasks) ||
                         (s_.max_memory > 0 && rss > s_.max_memory);
    e->st = recycle ? state::retiring : state::idle;
    return recycle;
}

void pool_fsm::retire(int proc) {
    if (auto* e = find(proc)) {
        e->st = state::retiring;
    }
}

void pool_fsm::exited(int proc, bool expected) {
    const auto* e = find(proc);
    if (e == nullptr) {
        return;
    }
    const bool crashed = !expected && e->st != state::retiring;
    std::erase_if(procs_, [proc](const entry& x) { return x.proc == proc; });
    if (crashed) {
        failure();
    }
}

}  // namespace zkd::handlers::exec::serve
