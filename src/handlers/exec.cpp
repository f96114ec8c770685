// SPDX-License-Identifier: MIT
// Exec task types: one child program's whole life (spawn with its fds, environment, user and
// process group; stdin/stdout/stderr/fd 3 and the pidfd as Asio operations; the kill
// escalation; reaping). Over 700 lines because those parts share the child's state and its
// invariants (every child reaped, no fd leaked, no signal to a pid that may be reused), which
// one file keeps in view; docs/exec.md is the contract.
#include "handlers/exec.hpp"

#include "protocol/syntax.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <list>
#include <memory>
#include <mutex>
#include <pwd.h>
#include <set>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;

namespace zkd::handlers::exec {

// --- configuration (pure) --------------------------------------------------------------------

std::vector<std::string> split_argv(std::string_view text) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) {
            ++i;
        }
        const std::size_t start = i;
        while (i < text.size() && text[i] != ' ' && text[i] != '\t') {
            ++i;
        }
        if (i > start) {
            out.emplace_back(text.substr(start, i - start));
        }
    }
    return out;
}

namespace {

[[noreturn]] void bad(const std::string& message) {
    throw std::invalid_argument(message);
}

std::chrono::milliseconds duration_setting(std::string_view key, std::string_view value) {
    const auto d = protocol::parse_duration(value);
    if (!d || *d > std::chrono::hours(24 * 365)) {
        bad("exec." + std::string(key) + " wants a duration up to 365 days (" +
            std::string(protocol::duration_forms) + "), not '" + std::string(value) + "'");
    }
    return *d;
}

constexpr std::array<std::string_view, 9> settings{"timeout",     "max-timeout", "max-output",
                                                   "concurrency", "output",      "env",
                                                   "dir",         "user",        "kill-grace"};

/// A config key's type name and setting ("img.v2.timeout": "img.v2" and "timeout"); the
/// setting is empty when the key defines the type. A known setting suffix wins over a dot in
/// the type name.
std::pair<std::string, std::string> split_key(std::string_view key) {
    for (const auto s : settings) {
        if (key.size() > s.size() + 1 && key.ends_with(s) &&
            key[key.size() - s.size() - 1] == '.') {
            return {std::string(key.substr(0, key.size() - s.size() - 1)), std::string(s)};
        }
    }
    return {std::string(key), {}};
}

std::vector<std::string> parse_env(std::string_view key, std::string_view value) {
    std::vector<std::string> env;
    std::size_t start = 0;
    while (start <= value.size()) {
        auto comma = value.find(',', start);
        if (comma == std::string_view::npos) {
            comma = value.size();
        }
        auto item = std::string(value.substr(start, comma - start));
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        const std::string var = item.substr(0, item.find('='));
        if (var.empty() || var.find_first_of(" \t") != std::string::npos) {
            if (!item.empty() || value.find_first_not_of(' ') != std::string_view::npos) {
                bad("exec." + std::string(key) +
                    " wants NAME or NAME=VALUE items separated by commas, not '" +
                    std::string(value) + "'");
            }
        } else {
            env.push_back(item);
        }
        start = comma + 1;
    }
    return env;
}

std::size_t size_setting(std::string_view key, std::string_view value) {
    const auto n = parse_size(value);
    if (!n || *n == 0 || *n > max_max_output) {
        bad("exec." + std::string(key) + " wants a size from 1 to 512KiB (e.g. 64KiB), not '" +
            std::string(value) + "'");
    }
    return *n;
}

int count_setting(std::string_view key, std::string_view value) {
    const auto n = parse_size(value);
    if (!n || value.find_first_not_of("0123456789") != std::string_view::npos || *n > 100'000) {
        bad("exec." + std::string(key) + " wants a whole number from 0 to 100000, not '" +
            std::string(value) + "'");
    }
    return static_cast<int>(*n);
}

output_mode output_setting(std::string_view key, std::string_view value) {
    if (value != "json" && value != "text") {
        bad("exec." + std::string(key) + " wants json or text, not '" + std::string(value) + "'");
    }
    return value == "json" ? output_mode::json : output_mode::text;
}

/// Sets `setting` (one of `settings`) of `c` from `key`'s value.
void set_setting(
    program_config& c, const std::string& setting, std::string_view key, std::string_view value
) {
    if (setting == "timeout") {
        c.timeout = duration_setting(key, value);
    } else if (setting == "max-timeout") {
        c.max_timeout = duration_setting(key, value);
    } else if (setting == "kill-grace") {
        c.kill_grace = duration_setting(key, value);
    } else if (setting == "max-output") {
        c.max_output = size_setting(key, value);
    } else if (setting == "concurrency") {
        c.concurrency = count_setting(key, value);
    } else if (setting == "output") {
        c.output = output_setting(key, value);
    } else if (setting == "env") {
        c.env = parse_env(key, value);
    } else if (setting == "dir") {
        c.dir = value;
    } else if (setting == "user") {
        c.user = value;
    }
}

/// Refuses `key`, a config key that defines a type, when it is a type of `defined` followed
/// by a dot and more: then the rest is a mistyped setting of that type, not a type of its own.
void refuse_unknown_setting(const std::string& key, const std::set<std::string>& defined) {
    for (auto dot = key.rfind('.'); dot != std::string::npos && dot > 0;
         dot = key.rfind('.', dot - 1)) {
        const std::string type = key.substr(0, dot);
        if (!defined.contains(type)) {
            continue;
        }
        const std::string setting = key.substr(dot + 1);
        const auto near = protocol::nearest(setting, settings, 3);
        std::string known;
        for (const auto s : settings) {
            known += (known.empty() ? "" : ", ") + std::string(s);
        }
        bad("exec." + key + ": unknown setting '" + setting + "' of exec type '" + type + "' (" +
            (near.empty() ? "settings: " + known : "did you mean '" + near + "'?") + ")");
    }
}

}  // namespace

std::optional<std::size_t> parse_size(std::string_view text) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        ++digits;
    }
    if (digits == 0 || digits > 12) {
        return std::nullopt;
    }
    const auto n = static_cast<std::size_t>(std::stoull(std::string(text.substr(0, digits))));
    const std::string_view unit = text.substr(digits);
    if (unit.empty() || unit == "B") {
        return n;
    }
    if (unit == "k" || unit == "K" || unit == "KiB") {
        return n * 1024;
    }
    if (unit == "M" || unit == "MiB") {
        return n * 1024 * 1024;
    }
    return std::nullopt;
}

program_config parse_exec_flag(std::string_view value) {
    const auto eq = value.find('=');
    if (eq == std::string_view::npos) {
        bad("--exec wants NAME=PROGRAM [ARG...], not '" + std::string(value) + "'");
    }
    program_config c;
    c.name = std::string(value.substr(0, eq));
    if (!is_valid_type_name(c.name)) {
        bad("--exec: '" + c.name + "' is not a task type name (1 to 128 of A-Z a-z 0-9 _ . : -)");
    }
    if (const auto [type, setting] = split_key(c.name); !setting.empty()) {
        bad("--exec " + c.name + ": a type name cannot end in '." + setting +
            "'; settings go in the config file (exec." + c.name + " = VALUE)");
    }
    c.argv = split_argv(value.substr(eq + 1));
    if (c.argv.empty()) {
        bad("--exec " + c.name + ": no program given");
    }
    return c;
}

void apply_setting(
    std::map<std::string, program_config>& types, std::string_view key, std::string_view value
) {
    const auto [name, setting] = split_key(key);
    if (!is_valid_type_name(name)) {
        bad("exec." + std::string(key) + ": '" + name + "' is not a task type name");
    }
    program_config& c = types[name];
    c.name = name;
    if (!setting.empty()) {
        set_setting(c, setting, key, value);
        return;
    }
    c.argv = split_argv(value);
    if (c.argv.empty()) {
        bad("exec." + name + ": no program given");
    }
}

std::map<std::string, program_config> configure(
    const std::vector<file_setting>& file, const std::vector<std::string>& flags
) {
    std::vector<program_config> given;
    std::set<std::string> defined;
    for (const auto& flag : flags) {
        auto c = parse_exec_flag(flag);
        if (!defined.insert(c.name).second) {
            bad("--exec " + c.name + ": the type is given twice");
        }
        given.push_back(std::move(c));
    }
    for (const auto& line : file) {
        defined.insert(split_key(line.key).first);
    }
    std::map<std::string, program_config> types;
    for (const auto& line : file) {
        try {
            if (split_key(line.key).second.empty()) {
                refuse_unknown_setting(line.key, defined);
            }
            apply_setting(types, line.key, line.value);
        } catch (const std::invalid_argument& e) {
            bad(line.where + ": " + e.what());
        }
    }
    for (auto& c : given) {
        auto& t = types[c.name];
        t.name = c.name;
        t.argv = std::move(c.argv);  // the command line wins over the file's program
    }
    return types;
}

// --- start-up checks -------------------------------------------------------------------------

namespace {

bool is_executable_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
}

identity look_up_user(const std::string& type, const std::string& user) {
    std::array<char, 16384> buf{};
    passwd pw{};
    passwd* found = nullptr;
    const int rc = ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc != 0 || found == nullptr) {
        bad("exec type '" + type + "': no such user '" + user + "'");
    }
    identity id;
    id.uid = pw.pw_uid;
    id.gid = pw.pw_gid;
    int n = 64;
    for (int tries = 0; tries < 4; ++tries) {
        id.groups.resize(static_cast<std::size_t>(n));
        int got = n;
        if (::getgrouplist(user.c_str(), pw.pw_gid, id.groups.data(), &got) >= 0) {
            id.groups.resize(static_cast<std::size_t>(got));
            break;
        }
        n = got > n ? got : n * 4;
    }
    return id;
}

}  // namespace

program resolve(program_config c, const env_lookup& lookup) {
    const std::string& t = c.name;
    if (!is_valid_type_name(t)) {
        bad("exec type '" + t + "': not a task type name (1 to 128 of A-Z a-z 0-9 _ . : -)");
    }
    if (c.argv.empty()) {
        bad("exec type '" + t + "': no program given (exec." + t + " = PROGRAM [ARG...])");
    }
    program p;
    const std::string& prog = c.argv.front();
    if (prog.find('/') != std::string::npos) {
        p.path = prog;
    } else {
        const auto path = lookup("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
        std::size_t start = 0;
        while (p.path.empty() && start <= path.size()) {
            auto colon = path.find(':', start);
            if (colon == std::string::npos) {
                colon = path.size();
            }
            std::string candidate = path.substr(start, colon - start);
            if (candidate.empty()) {
                candidate = ".";  // an empty entry is the current directory
            }
            candidate += '/';
            candidate += prog;
            if (is_executable_file(candidate)) {
                p.path = std::move(candidate);
            }
            start = colon + 1;
        }
        if (p.path.empty()) {
            bad("exec type '" + t + "': program '" + prog + "' is not in PATH");
        }
    }
    // Absolute, so that a working directory (`dir`) does not change which program runs.
    if (p.path.front() != '/') {
        std::array<char, PATH_MAX> cwd{};
        if (::getcwd(cwd.data(), cwd.size()) != nullptr) {
            p.path.insert(0, std::string(cwd.data()) + "/");
        }
    }
    if (!is_executable_file(p.path)) {
        struct stat st {};
        const bool exists = ::stat(p.path.c_str(), &st) == 0;
        bad("exec type '" + t + "': program '" + p.path + "' " +
            (!exists               ? "does not exist"
             : S_ISDIR(st.st_mode) ? "is a directory"
                                   : "is not executable"));
    }
    if (!c.dir.empty()) {
        struct stat st {};
        if (::stat(c.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            bad("exec type '" + t + "': working directory '" + c.dir + "' is not a directory");
        }
    }
    if (!c.user.empty()) {
        auto id = look_up_user(t, c.user);
        if (::geteuid() != 0 && id.uid != ::geteuid()) {
            bad("exec type '" + t + "': running as user '" + c.user + "' needs zkd to run as root");
        }
        if (::geteuid() == 0) {
            p.user = std::move(id);
        }
    }
    if (c.max_output == 0 || c.max_output > max_max_output) {
        bad("exec type '" + t + "': max-output must be from 1 byte to 512KiB");
    }
    for (const auto& e : c.env) {
        if (e.find('=') != std::string::npos) {
            p.env.push_back(e);
        } else if (auto v = lookup(e)) {
            p.env.push_back(e + "=" + *v);
        }
    }
    p.config = std::move(c);
    return p;
}

// --- results (pure) --------------------------------------------------------------------------

namespace {

/// The length of the UTF-8 character at s[i], or 0 if the bytes there are not one (strictly:
/// no overlong forms, surrogates or code points past U+10FFFF, as JSON parsers check).
std::size_t utf8_char(std::string_view s, std::size_t i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned c = b(0);
    std::size_t len = 0;
    unsigned lo = 0x80;
    unsigned hi = 0xBF;
    if (c < 0x80U) {
        return 1;
    }
    if (c >= 0xC2U && c <= 0xDFU) {
        len = 2;
    } else if (c >= 0xE0U && c <= 0xEFU) {
        len = 3;
        lo = c == 0xE0U ? 0xA0U : 0x80U;
        hi = c == 0xEDU ? 0x9FU : 0xBFU;
    } else if (c >= 0xF0U && c <= 0xF4U) {
        len = 4;
        lo = c == 0xF0U ? 0x90U : 0x80U;
        hi = c == 0xF4U ? 0x8FU : 0xBFU;
    } else {
        return 0;
    }
    if (i + len > s.size() || b(1) < lo || b(1) > hi) {
        return 0;
    }
    for (std::size_t k = 2; k < len; ++k) {
        if ((b(k) & 0xC0U) != 0x80U) {
            return 0;
        }
    }
    return len;
}

bool is_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t len = utf8_char(s, i);
        if (len == 0) {
            return false;
        }
        i += len;
    }
    return true;
}

/// `s` with bytes that are not valid UTF-8 replaced by '?', so that it can sit in JSON.
std::string printable_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t len = utf8_char(s, i);
        if (len == 0) {
            out += '?';
            ++i;
        } else {
            out.append(s.substr(i, len));
            i += len;
        }
    }
    return out;
}

std::string with_stderr(std::string message, const std::string& tail) {
    if (!tail.empty()) {
        std::string t = printable_utf8(tail);
        while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) {
            t.pop_back();
        }
        message += "; stderr: " + t;
    }
    return message;
}

std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
}

handler_error fail(std::string_view code, std::string message) {
    return handler_error{std::string(code), std::move(message)};
}

}  // namespace

handler_result classify(const program_config& c, const run_outcome& o) {
    if (!o.start_error.empty()) {
        return fail(codes::handler_error, "cannot start the program: " + o.start_error);
    }
    if (o.output_too_large) {
        return fail(
            codes::output_too_large, "the program wrote more than " + std::to_string(c.max_output) +
                                         " bytes on stdout (max-output); it was killed"
        );
    }
    if (o.signal != 0) {
        return fail(
            codes::handler_error,
            with_stderr(
                "the program was killed by signal " + std::to_string(o.signal) + " (" +
                    signal_name(o.signal) + ")",
                o.stderr_tail
            )
        );
    }
    if (o.exit_code != 0) {
        return fail(
            codes::handler_error,
            with_stderr(
                "the program exited with code " + std::to_string(o.exit_code), o.stderr_tail
            )
        );
    }
    if (c.output == output_mode::text) {
        if (!is_utf8(o.output)) {
            return fail(codes::handler_error, "the program's output is not UTF-8 text");
        }
        return json::value(json::string(o.output));
    }
    boost::system::error_code ec;
    json::value v = json::parse(o.output, ec);
    if (ec) {
        std::string head = printable_utf8(o.output.substr(0, 200));
        return fail(
            codes::handler_error,
            o.output.find_first_not_of(" \t\r\n") == std::string::npos
                ? std::string("the program printed no JSON on stdout")
                : "the program's output is not JSON (" + ec.message() + "): " + head
        );
    }
    return v;
}

std::optional<std::pair<double, std::string>> parse_progress_line(std::string_view line) {
    boost::system::error_code ec;
    const json::value v = json::parse(line, ec);
    if (ec || !v.is_object()) {
        return std::nullopt;
    }
    const json::value* p = v.get_object().if_contains("progress");
    if (p == nullptr || !p->is_number()) {
        return std::nullopt;
    }
    double f = p->to_number<double>();
    if (!std::isfinite(f)) {
        return std::nullopt;
    }
    f = std::clamp(f, 0.0, 1.0);
    std::string message;
    if (const json::value* m = v.get_object().if_contains("message");
        m != nullptr && m->is_string()) {
        message = printable_utf8(std::string_view(m->get_string()).substr(0, 200));
    }
    return std::pair{f, std::move(message)};
}

// --- running a program -----------------------------------------------------------------------

namespace {

class unique_fd {
public:
    unique_fd() = default;
    explicit unique_fd(int fd) : fd_(fd) {}
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    unique_fd& operator=(unique_fd&& o) noexcept {
        reset(std::exchange(o.fd_, -1));
        return *this;
    }
    ~unique_fd() { reset(); }
    [[nodiscard]] int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

struct pipe_ends {
    unique_fd read;
    unique_fd write;
};

bool make_pipe(pipe_ends& p) {
    std::array<int, 2> fds{-1, -1};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
        return false;
    }
    p.read.reset(fds[0]);
    p.write.reset(fds[1]);
    return true;
}

/// Where the child failed, sent to the parent with errno on the error pipe.
enum class stage : int { pgid = 1, pdeathsig, fds, dir, groups, gid, uid, exec };

const char* stage_text(stage s) {
    switch (s) {
    case stage::pgid:
        return "setpgid";
    case stage::pdeathsig:
        return "prctl(PR_SET_PDEATHSIG)";
    case stage::fds:
        return "setting up its file descriptors";
    case stage::dir:
        return "chdir to its working directory";
    case stage::groups:
        return "setgroups";
    case stage::gid:
        return "setgid";
    case stage::uid:
        return "setuid";
    case stage::exec:
        return "execve";
    }
    return "?";
}

/// Everything the child needs, prepared before fork(): the child may call only
/// async-signal-safe functions (the worker has other threads).
struct child_plan {
    const char* path = nullptr;
    char* const* argv = nullptr;
    char* const* envp = nullptr;
    const char* dir = nullptr;
    const identity* user = nullptr;
    pid_t parent = 0;
    std::array<int, 4> fds{};  // becomes 0 (stdin), 1, 2, 3 (progress)
    int error = -1;            // the error pipe's write end (close-on-exec)
};

[[noreturn]] void child_fail(int fd, stage s) {
    const std::array<int, 2> msg{static_cast<int>(s), errno};
    [[maybe_unused]] const auto n = ::write(fd, msg.data(), sizeof msg);
    ::_exit(127);
}

[[noreturn]] void run_child(const child_plan& p) {
    int err = p.error;
    // Its own process group, so that a stop reaches whatever it started; and it dies with
    // the thread that forked it (the loop thread). If the worker is already gone, so are we.
    if (::setpgid(0, 0) != 0) {
        child_fail(err, stage::pgid);
    }
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        child_fail(err, stage::pdeathsig);
    }
    if (::getppid() != p.parent) {
        ::_exit(127);
    }
    // Ignored signals (SIGPIPE in the worker) would stay ignored across execve.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;  // NOLINT(cppcoreguidelines-pro-type-union-access)
    for (int sig = 1; sig < NSIG; ++sig) {
        ::sigaction(sig, &dfl, nullptr);
    }
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Move every end out of 0..4 first: one of them may have such a number already.
    std::array<int, 5> high{};
    for (std::size_t i = 0; i < 4; ++i) {
        high[i] = ::fcntl(p.fds[i], F_DUPFD_CLOEXEC, 10);
        if (high[i] < 0) {
            child_fail(err, stage::fds);
        }
    }
    high[4] = ::fcntl(err, F_DUPFD_CLOEXEC, 10);
    if (high[4] < 0) {
        child_fail(err, stage::fds);
    }
    err = high[4];
    for (int i = 0; i < 4; ++i) {
        if (::dup2(high[static_cast<std::size_t>(i)], i) != i) {  // dup2 clears close-on-exec
            child_fail(err, stage::fds);
        }
    }
    if (::dup3(high[4], 4, O_CLOEXEC) != 4) {
        child_fail(err, stage::fds);
    }
    err = 4;
    // Nothing else of the worker's reaches the program, close-on-exec or not.
    if (::syscall(SYS_close_range, 5U, ~0U, 0U) != 0) {
        for (int fd = 5; fd < 65536; ++fd) {
            ::close(fd);
        }
    }
    if (p.dir != nullptr && ::chdir(p.dir) != 0) {
        child_fail(err, stage::dir);
    }
    if (p.user != nullptr) {
        if (::setgroups(p.user->groups.size(), p.user->groups.data()) != 0) {
            child_fail(err, stage::groups);
        }
        if (::setgid(p.user->gid) != 0) {
            child_fail(err, stage::gid);
        }
        if (::setuid(p.user->uid) != 0) {
            child_fail(err, stage::uid);
        }
    }
    ::execve(p.path, p.argv, p.envp);
    child_fail(err, stage::exec);
}

/// A started child and its pipes (the parent's ends), on the loop's executor.
struct child : std::enable_shared_from_this<child> {
    explicit child(const asio::any_io_executor& ex)
        : in(ex),
          out(ex),
          err(ex),
          progress(ex),
          error(ex),
          pidfd(ex),
          kill_timer(ex),
          drain_timer(ex) {}

    pid_t pid = 0;
    asio::posix::stream_descriptor in, out, err, progress, error, pidfd;
    asio::steady_timer kill_timer;   // SIGTERM → SIGKILL
    asio::steady_timer drain_timer;  // after exit: pipes held by escaped processes
    std::chrono::milliseconds grace{0};
    bool reaped = false;  // never signal its group after: the pid may be reused
    bool term_sent = false;
    int readers = 3;  // stdout, stderr, progress: until EOF
    run_outcome outcome;

    void signal_group(int sig) const {
        if (!reaped) {
            ::kill(-pid, sig);
        }
    }

    void terminate() {
        if (reaped || term_sent) {
            return;
        }
        term_sent = true;
        signal_group(SIGTERM);
        kill_timer.expires_after(grace);
        kill_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (!ec) {
                self->signal_group(SIGKILL);
            }
        });
    }

    void reader_done() {
        if (--readers == 0) {
            drain_timer.cancel();
        }
    }
};

std::vector<char*> c_strings(const std::vector<std::string>& v) {
    std::vector<char*> out;
    out.reserve(v.size() + 1);
    for (const auto& s : v) {
        out.push_back(const_cast<char*>(s.c_str())
        );  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    }
    out.push_back(nullptr);
    return out;
}

/// Forks and execs `p`; the child's outcome gets start_error if a step before exec failed
/// (reported asynchronously on the error pipe).
std::shared_ptr<child> spawn(
    const asio::any_io_executor& ex,
    const program& p,
    const std::vector<std::string>& env,
    std::string& error
) {
    std::array<pipe_ends, 5> pipes;  // stdin, stdout, stderr, progress, exec error
    for (auto& pe : pipes) {
        if (!make_pipe(pe)) {
            error = std::string("pipe2: ") + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
            return nullptr;
        }
    }
    auto argv = c_strings(p.config.argv);
    auto envp = c_strings(env);
    child_plan plan;
    plan.path = p.path.c_str();
    plan.argv = argv.data();
    plan.envp = envp.data();
    plan.dir = p.config.dir.empty() ? nullptr : p.config.dir.c_str();
    plan.user = p.user ? &*p.user : nullptr;
    plan.parent = ::getpid();
    plan.fds = {
        pipes[0].read.get(), pipes[1].write.get(), pipes[2].write.get(), pipes[3].write.get()};
    plan.error = pipes[4].write.get();

    const pid_t pid = ::fork();
    if (pid < 0) {
        error = std::string("fork: ") + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
        return nullptr;
    }
    if (pid == 0) {
        run_child(plan);
    }
    // Also here, so that the group exists before we may signal it.
    ::setpgid(pid, pid);
    auto c = std::make_shared<child>(ex);
    c->pid = pid;
    c->grace = p.config.kill_grace;
    c->in.assign(pipes[0].write.release());
    c->out.assign(pipes[1].read.release());
    c->err.assign(pipes[2].read.release());
    c->progress.assign(pipes[3].read.release());
    c->error.assign(pipes[4].read.release());
    const auto pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // close-on-exec
    if (pidfd >= 0) {
        c->pidfd.assign(pidfd);
    }
    return c;  // the child's ends close here
}

asio::awaitable<void> feed(std::shared_ptr<child> c, std::string input) {
    // A program that exits (or closes stdin) before reading everything: EPIPE, ignored.
    co_await asio::async_write(c->in, asio::buffer(input), asio::as_tuple(asio::use_awaitable));
    boost::system::error_code ignored;
    c->in.close(ignored);
}

asio::awaitable<void> read_stdout(std::shared_ptr<child> c, std::size_t limit) {
    std::array<char, 65536> buf{};
    for (;;) {
        auto [ec, n] =
            co_await c->out.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
        if (!c->outcome.output_too_large) {
            if (c->outcome.output.size() + n > limit) {
                c->outcome.output_too_large = true;
                c->outcome.output.clear();
                c->signal_group(SIGKILL);
            } else {
                c->outcome.output.append(buf.data(), n);
            }
        }
        if (ec) {
            break;
        }
    }
    c->reader_done();
}

asio::awaitable<void> read_stderr(std::shared_ptr<child> c) {
    std::array<char, 16384> buf{};
    std::string& tail = c->outcome.stderr_tail;
    for (;;) {
        auto [ec, n] =
            co_await c->err.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
        tail.append(buf.data(), n);
        if (tail.size() > 2 * stderr_tail_bytes) {
            tail.erase(0, tail.size() - stderr_tail_bytes);
        }
        if (ec) {
            break;
        }
    }
    if (tail.size() > stderr_tail_bytes) {
        tail.erase(0, tail.size() - stderr_tail_bytes);
    }
    c->reader_done();
}

asio::awaitable<void> read_progress(std::shared_ptr<child> c, progress_fn progress) {
    constexpr std::size_t max_line = 4096;
    std::array<char, 4096> buf{};
    std::string line;
    bool skipping = false;  // inside a line too long to be one
    for (;;) {
        auto [ec, n] = co_await c->progress.async_read_some(
            asio::buffer(buf), asio::as_tuple(asio::use_awaitable)
        );
        for (std::size_t i = 0; i < n; ++i) {
            if (buf[i] != '\n') {
                if (!skipping && line.size() < max_line) {
                    line += buf[i];
                } else {
                    skipping = true;
                    line.clear();
                }
                continue;
            }
            if (!skipping && progress) {
                if (auto p = parse_progress_line(line)) {
                    progress(p->first, std::move(p->second));
                }
            }
            skipping = false;
            line.clear();
        }
        if (ec) {
            break;
        }
    }
    c->reader_done();
}

asio::awaitable<void> wait_exit(std::shared_ptr<child> c) {
    // EOF on the error pipe: execve succeeded (the pipe is close-on-exec).
    std::array<int, 2> msg{};
    auto [eec, got] =
        co_await asio::async_read(c->error, asio::buffer(msg), asio::as_tuple(asio::use_awaitable));
    if (got == sizeof msg) {
        c->outcome.start_error = std::string(stage_text(static_cast<stage>(msg[0]))) + ": " +
                                 std::strerror(msg[1]);  // NOLINT(concurrency-mt-unsafe)
    }
    boost::system::error_code ignored;
    c->error.close(ignored);

    // Readiness may be spurious (a stale event for a reused descriptor number): whatever
    // wakes us, the child must have exited, checked without reaping, before we signal its
    // group. Without a pidfd (an old kernel), poll.
    asio::steady_timer poll(c->pidfd.get_executor());
    siginfo_t info{};
    for (;;) {
        if (c->pidfd.is_open()) {
            auto [wec] = co_await c->pidfd.async_wait(
                asio::posix::descriptor_base::wait_read, asio::as_tuple(asio::use_awaitable)
            );
            if (wec) {
                boost::system::error_code ignored_close;
                c->pidfd.close(ignored_close);  // poll instead of spinning on a failing wait
            }
        } else {
            poll.expires_after(std::chrono::milliseconds(10));
            co_await poll.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        info = {};
        const int rc =
            ::waitid(P_PID, static_cast<id_t>(c->pid), &info, WEXITED | WNOHANG | WNOWAIT);
        if ((rc != 0 && errno != EINTR) || (rc == 0 && info.si_pid == c->pid)) {
            break;
        }
    }
    // What it left behind in its group dies with it (still a zombie: the pid is not reused).
    c->signal_group(SIGKILL);
    info = {};
    while (::waitid(P_PID, static_cast<id_t>(c->pid), &info, WEXITED) != 0 && errno == EINTR) {
    }
    c->reaped = true;
    c->kill_timer.cancel();
    c->pidfd.close(ignored);
    if (info.si_code == CLD_EXITED) {
        c->outcome.exit_code = info.si_status;
    } else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
        c->outcome.signal = info.si_status;
    }
    // A process that left the group may hold the pipes: give it a moment, then stop reading.
    if (c->readers > 0) {
        c->drain_timer.expires_after(std::chrono::seconds(1));
        auto [dec] = co_await c->drain_timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (!dec) {
            c->out.close(ignored);
            c->err.close(ignored);
            c->progress.close(ignored);
        }
    }
    c->in.close(ignored);  // a write into a pipe nobody reads
}

}  // namespace

asio::awaitable<run_outcome> run_program(
    const program& p,
    std::string input,
    std::stop_token stop,
    progress_fn progress,
    std::vector<std::string> extra_env
) {
    // Only `stop` stops a program: an abandoned wait would leave it running unreaped.
    co_await asio::this_coro::reset_cancellation_state([](asio::cancellation_type) {
        return asio::cancellation_type::none;
    });
    const auto ex = co_await asio::this_coro::executor;
    run_outcome o;
    if (stop.stop_requested()) {
        o.stopped = true;
        o.start_error = "stopped before it started";
        co_return o;
    }
    std::vector<std::string> env = p.env;
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    auto c = spawn(ex, p, env, o.start_error);
    if (!c) {
        co_return o;
    }
    {
        const std::stop_callback on_stop(stop, [c] {
            asio::post(c->pidfd.get_executor(), [c] {
                c->outcome.stopped = true;
                c->terminate();
            });
        });
        using namespace asio::experimental::awaitable_operators;
        co_await (
            feed(c, std::move(input)) && read_stdout(c, p.config.max_output) && read_stderr(c) &&
            read_progress(c, std::move(progress)) && wait_exit(c)
        );
    }
    o = std::move(c->outcome);
    o.stopped = o.stopped || stop.stop_requested();
    co_return o;
}

// --- the handler -----------------------------------------------------------------------------

namespace {

/// At most `max` runs at once (0: no limit); waiters go in order. Shared by every worker
/// that uses the registry, whatever thread runs it.
class limiter {
public:
    explicit limiter(int max) : max_(max) {}

    /// True with a place taken, false if `stop` came first.
    asio::awaitable<bool> acquire(std::stop_token stop) {
        const auto ex = co_await asio::this_coro::executor;
        auto w = std::make_shared<waiter>(ex);
        {
            const std::lock_guard lock(mutex_);
            if (max_ <= 0 || (running_ < max_ && queue_.empty())) {
                ++running_;
                co_return true;
            }
            queue_.push_back(w);
        }
        {
            const std::stop_callback on_stop(stop, [w] {
                asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
            });
            for (;;) {
                {
                    const std::lock_guard lock(mutex_);
                    if (w->granted) {
                        co_return true;
                    }
                    if (stop.stop_requested()) {
                        queue_.remove(w);
                        co_return false;
                    }
                }
                co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
            }
        }
    }

    void release() {
        const std::lock_guard lock(mutex_);
        if (queue_.empty()) {
            --running_;
            return;
        }
        auto w = queue_.front();
        queue_.pop_front();
        w->granted = true;  // the place passes on: running_ stays
        asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
    }

private:
    struct waiter {
        explicit waiter(const asio::any_io_executor& ex)
            : timer(ex, asio::steady_timer::time_point::max()) {}
        asio::steady_timer timer;
        bool granted = false;
    };

    std::mutex mutex_;
    int max_;
    int running_ = 0;
    std::list<std::shared_ptr<waiter>> queue_;
};

void ignore_sigpipe() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction old {};
        if (::sigaction(SIGPIPE, nullptr, &old) == 0 &&
            old.sa_handler == SIG_DFL) {  // NOLINT(cppcoreguidelines-pro-type-union-access)
            ::signal(SIGPIPE, SIG_IGN);
        }
    });
}

}  // namespace

void add_exec_type(registry& reg, program p) {
    ignore_sigpipe();
    auto prog = std::make_shared<const program>(std::move(p));
    auto limit = std::make_shared<limiter>(prog->config.concurrency);
    const type_limits limits{prog->config.timeout, prog->config.max_timeout};
    auto handler = [prog, limit](async_call call) -> asio::awaitable<handler_result> {
        const bool placed = co_await limit->acquire(call.stop);  // not in the condition: GCC 12
        if (!placed) {
            co_return fail(codes::cancelled, "stopped while waiting for a place (concurrency)");
        }
        struct place {  // released however the run ends
            limiter* l;
            ~place() { l->release(); }
        } const held{limit.get()};
        call.started();
        std::vector<std::string> extra{
            "ZKD_TASK_ID=" + call.task, "ZKD_TASK_TYPE=" + prog->config.name,
            "ZKD_PROGRESS_FD=" + std::to_string(progress_fd)};
        const auto o = co_await run_program(
            *prog, protocol::to_text(call.args), call.stop, std::move(call.progress),
            std::move(extra)
        );
        if (!o.start_error.empty()) {
            spdlog::warn(
                "exec type {}: cannot start {}: {}", prog->config.name, prog->path, o.start_error
            );
        }
        co_return classify(prog->config, o);
    };
    reg.add_async(prog->config.name, std::move(handler), limits);
}

}  // namespace zkd::handlers::exec
