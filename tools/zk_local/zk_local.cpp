// SPDX-License-Identifier: MIT
// zkd-zk-local's library: a ZooKeeper server or 3-server ensemble on loopback for local runs
// and tests (config, JVM, ports, readiness, stop, members killed and restarted). Over 700
// lines because start, stop and the member control share the ensemble's state file and its
// process handling; tests, zkd-chaos and the bench all use it.
#include "zk_local/zk_local.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <mutex>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <sstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <utility>

namespace zkd::zk_local {
namespace {

namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds poll_interval{50};
constexpr milliseconds exit_poll_interval{10};
constexpr milliseconds term_grace{10'000};
constexpr int max_start_attempts = 5;
constexpr std::size_t error_log_lines = 40;
constexpr std::uintmax_t min_tail_bytes = 64ULL * 1024;
constexpr const char* state_file_name = "zk-local.state";
constexpr const char* log4j_file_name = "log4j.properties";
constexpr const char* main_class = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
constexpr const char* zookeeper_jar = "/usr/share/java/zookeeper.jar";
// libzookeeper-java depends on both, but ships no slf4j binding on zookeeper.jar's manifest
// class path, so without them the server logs nothing at all.
constexpr std::array log_binding_jars{
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
};
constexpr const char* install_hint =
    "install the Debian packages zookeeper and default-jre-headless (tools/install-deps.sh)";

std::string errno_text(int err) {
    // std::strerror is not thread-safe; the category message is.
    return std::system_category().message(err);
}

[[noreturn]] void throw_errno(const std::string& what, int err) {
    throw std::runtime_error(what + ": " + errno_text(err));
}

class unique_fd {
public:
    unique_fd() = default;
    explicit unique_fd(int fd) : fd_(fd) {}
    unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    unique_fd& operator=(unique_fd&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = std::exchange(other.fd_, -1);
        }
        return *this;
    }
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    ~unique_fd() { reset(); }

    [[nodiscard]] int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    void reset() {
        if (fd_ >= 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }

private:
    int fd_ = -1;
};

std::string read_file(const fs::path& path, std::uintmax_t offset = 0) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return {};
    }
    in.seekg(static_cast<std::streamoff>(offset));
    std::ostringstream out;
    out << in.rdbuf();
    return std::move(out).str();
}

void write_file(const fs::path& path, std::string_view text) {
    // Write-then-rename, so a concurrent reader (another CLI call) never sees half a file.
    auto tmp = path;
    tmp += ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << text;
        out.flush();
        if (!out) {
            throw std::runtime_error("cannot write " + tmp.string());
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        throw std::runtime_error("cannot rename " + tmp.string() + ": " + ec.message());
    }
}

std::uintmax_t file_size_or_zero(const fs::path& path) {
    std::error_code ec;
    auto size = fs::file_size(path, ec);
    return ec ? 0 : size;
}

std::string tail_lines(std::string_view text, std::size_t lines) {
    if (lines == 0) {
        return {};
    }
    auto end = text.size();
    if (end > 0 && text[end - 1] == '\n') {
        --end;
    }
    auto begin = end;
    std::size_t seen = 0;
    while (begin > 0) {
        if (text[begin - 1] == '\n' && ++seen == lines) {
            break;
        }
        --begin;
    }
    std::string out(text.substr(begin, end - begin));
    if (!out.empty()) {
        out += '\n';
    }
    return out;
}

const char* env_or_null(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : nullptr;
}

bool is_executable_file(const fs::path& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::optional<fs::path> search_path(const std::string& name) {
    const char* path = env_or_null("PATH");
    if (path == nullptr) {
        return std::nullopt;
    }
    std::string_view rest{path};
    while (!rest.empty()) {
        auto colon = rest.find(':');
        auto entry = rest.substr(0, colon);
        rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
        auto candidate = fs::path(entry.empty() ? "." : entry) / name;
        if (is_executable_file(candidate)) {
            return candidate;
        }
    }
    return std::nullopt;
}

fs::path resolve_java(const std::string& configured) {
    if (!configured.empty()) {
        if (configured.find('/') == std::string::npos) {
            if (auto found = search_path(configured)) {
                return *found;
            }
        } else if (is_executable_file(configured)) {
            return fs::absolute(configured);
        }
        throw std::runtime_error(
            "java executable '" + configured + "' does not exist or is not executable; " +
            install_hint
        );
    }
    std::vector<std::string> tried;
    if (const char* home = env_or_null("JAVA_HOME")) {
        auto candidate = fs::path(home) / "bin" / "java";
        if (is_executable_file(candidate)) {
            return candidate;
        }
        tried.push_back(candidate.string());
    }
    if (auto found = search_path("java")) {
        return *found;
    }
    tried.emplace_back("java on PATH");
    if (is_executable_file("/usr/bin/java")) {
        return "/usr/bin/java";
    }
    tried.emplace_back("/usr/bin/java");
    std::string list;
    for (const auto& t : tried) {
        list += (list.empty() ? "" : ", ") + t;
    }
    throw std::runtime_error("java not found (tried " + list + "); " + install_hint);
}

std::string resolve_classpath(const std::string& configured) {
    if (!configured.empty()) {
        return configured;
    }
    if (!fs::exists(zookeeper_jar)) {
        throw std::runtime_error(
            std::string("ZooKeeper server jar ") + zookeeper_jar + " not found; " + install_hint
        );
    }
    std::string classpath = zookeeper_jar;
    if (std::all_of(log_binding_jars.begin(), log_binding_jars.end(), [](const char* jar) {
            return fs::exists(jar);
        })) {
        for (const char* jar : log_binding_jars) {
            classpath += ':';
            classpath += jar;
        }
    } else {
        spdlog::warn(
            "zk_local: slf4j-log4j12.jar/log4j-1.2.jar missing, the ZooKeeper log will be empty"
        );
    }
    return classpath;
}

sockaddr_in loopback_address(std::uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

// Keeps every socket bound until all ports are chosen, so one call never hands out a port twice.
std::vector<std::uint16_t> pick_free_ports(std::size_t count) {
    std::vector<unique_fd> sockets;
    std::vector<std::uint16_t> ports;
    for (std::size_t i = 0; i < count; ++i) {
        unique_fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
        if (!fd) {
            throw_errno("zk_local: socket()", errno);
        }
        auto addr = loopback_address(0);
        if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
            throw_errno("zk_local: cannot bind a free loopback port", errno);
        }
        socklen_t len = sizeof addr;
        if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            throw_errno("zk_local: getsockname()", errno);
        }
        ports.push_back(ntohs(addr.sin_port));
        sockets.push_back(std::move(fd));
    }
    return ports;
}

// Waits for `events` on fd until the deadline; false on timeout or error.
bool wait_fd(int fd, short events, steady::time_point deadline) {
    for (;;) {
        auto left = std::chrono::ceil<milliseconds>(deadline - steady::now());
        if (left.count() <= 0) {
            return false;
        }
        pollfd p{fd, events, 0};
        int rc = ::poll(&p, 1, static_cast<int>(left.count()));
        if (rc > 0) {
            return true;
        }
        if (rc < 0 && errno != EINTR) {
            return false;
        }
    }
}

std::string four_letter_at(std::uint16_t port, std::string_view cmd, milliseconds timeout) {
    auto deadline = steady::now() + timeout;
    unique_fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
    if (!fd) {
        return {};
    }
    auto addr = loopback_address(port);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        if (errno != EINPROGRESS || !wait_fd(fd.get(), POLLOUT, deadline)) {
            return {};
        }
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            return {};
        }
    }
    while (!cmd.empty()) {
        auto n = ::send(fd.get(), cmd.data(), cmd.size(), MSG_NOSIGNAL);
        if (n > 0) {
            cmd.remove_prefix(static_cast<std::size_t>(n));
            continue;
        }
        bool retry = n == 0 || errno == EAGAIN || errno == EINTR;
        if (!retry || !wait_fd(fd.get(), POLLOUT, deadline)) {
            return {};
        }
    }
    std::string reply;
    std::array<char, 4096> buf{};
    for (;;) {
        auto n = ::recv(fd.get(), buf.data(), buf.size(), 0);
        if (n > 0) {
            reply.append(buf.data(), static_cast<std::size_t>(n));
            continue;
        }
        // The server may reset instead of closing once it has written the whole reply.
        if (n == 0 || (errno == ECONNRESET && !reply.empty())) {
            return reply;
        }
        bool retry = errno == EAGAIN || errno == EINTR;
        if (!retry || !wait_fd(fd.get(), POLLIN, deadline)) {
            return {};
        }
    }
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) {
        return "exited with status " + std::to_string(WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        return "was killed by signal " + std::to_string(WTERMSIG(status));
    }
    return "stopped";
}

// PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process. Forking from a
// short-lived thread (std::async, a test's worker) would kill the server with that thread, so
// off the main thread we fork from a helper thread that lives as long as the process.
class spawner_thread {
public:
    static void run(std::function<void()> fn) {
        if (::gettid() == ::getpid()) {
            fn();
            return;
        }
        instance().run_here(std::move(fn));
    }

private:
    static spawner_thread& instance() {
        // Leaked on purpose: the thread blocks on these members until the process exits, so
        // they must outlive every static destructor.
        static auto* self = new spawner_thread();
        return *self;
    }

    spawner_thread() {
        // Block all signals in the helper, so it never steals one meant for the program
        // (children reset their mask before exec).
        sigset_t all;
        sigset_t old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        std::thread([this] { loop(); }).detach();
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }

    void run_here(std::function<void()> fn) {
        std::packaged_task<void()> task(std::move(fn));
        auto done = task.get_future();
        {
            std::lock_guard lock(mutex_);
            queue_.push_back(std::move(task));
        }
        cv_.notify_one();
        done.get();
    }

    [[noreturn]] void loop() {
        for (;;) {
            std::packaged_task<void()> task;
            {
                std::unique_lock lock(mutex_);
                cv_.wait(lock, [this] { return !queue_.empty(); });
                task = std::move(queue_.front());
                queue_.pop_front();
            }
            task();
        }
    }

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::packaged_task<void()>> queue_;
};

struct spawn_spec {
    fs::path program;
    std::vector<std::string> args;
    fs::path work_dir;
    fs::path log_path;
    bool detach = false;
};

void move_fd_to(int from, int to) {
    if (from == to) {
        ::fcntl(to, F_SETFD, 0);
    } else {
        ::dup2(from, to);
    }
}

// Reports errno to the parent through the exec-error pipe.
[[noreturn]] void child_fail(int error_fd) noexcept {
    int err = errno;
    [[maybe_unused]] auto n = ::write(error_fd, &err, sizeof err);
    ::_exit(127);
}

// Runs in the forked child of a possibly multi-threaded parent: async-signal-safe calls only.
[[noreturn]] void exec_child(
    const spawn_spec& spec, char* const* argv, int log_fd, int null_fd, int error_fd, pid_t parent
) noexcept {
    if (spec.detach) {
        if (::setsid() < 0) {
            child_fail(error_fd);
        }
    } else {
        // Own process group: a Ctrl-C at the terminal reaches only us, and we stop the
        // servers in order.
        if (::setpgid(0, 0) < 0 || ::prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
            child_fail(error_fd);
        }
        if (::getppid() != parent) {
            ::_exit(1);  // The parent died before prctl took effect.
        }
    }
    // Blocked and ignored signals survive exec; the JVM must see SIGTERM.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
        sigaction(sig, &dfl, nullptr);
    }
    move_fd_to(null_fd, STDIN_FILENO);
    move_fd_to(log_fd, STDOUT_FILENO);
    move_fd_to(log_fd, STDERR_FILENO);
    // Don't leak the parent's descriptors (e.g. a pipe a caller reads to EOF) into a JVM that
    // may outlive it; error_fd is already close-on-exec.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (::chdir(spec.work_dir.c_str()) < 0) {
        child_fail(error_fd);
    }
    ::execv(spec.program.c_str(), argv);
    child_fail(error_fd);
}

pid_t spawn_process(const spawn_spec& spec) {
    // Everything the child touches is prepared before fork().
    std::vector<char*> argv;
    argv.reserve(spec.args.size() + 1);
    for (const auto& arg : spec.args) {
        argv.push_back(const_cast<char*>(arg.c_str()));
    }
    argv.push_back(nullptr);
    constexpr int log_flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
    unique_fd log_fd{::open(spec.log_path.c_str(), log_flags, 0644)};
    if (!log_fd) {
        throw_errno("zk_local: cannot open " + spec.log_path.string(), errno);
    }
    unique_fd null_fd{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
    if (!null_fd) {
        throw_errno("zk_local: cannot open /dev/null", errno);
    }
    std::array<int, 2> pipe_fds{};
    if (::pipe2(pipe_fds.data(), O_CLOEXEC) != 0) {
        throw_errno("zk_local: pipe2()", errno);
    }
    unique_fd error_read{pipe_fds[0]};
    unique_fd error_write{pipe_fds[1]};

    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) {
        throw_errno("zk_local: fork()", errno);
    }
    if (pid == 0) {
        exec_child(spec, argv.data(), log_fd.get(), null_fd.get(), error_write.get(), parent);
    }
    error_write.reset();
    // EOF means exec succeeded (the pipe is close-on-exec); otherwise the child sends errno.
    int child_errno = 0;
    ssize_t n = 0;
    do {
        n = ::read(error_read.get(), &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof child_errno)) {
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        throw std::runtime_error(
            "zk_local: cannot start " + spec.program.string() + ": " + errno_text(child_errno) +
            "; " + install_hint
        );
    }
    return pid;
}

struct member {
    int id = 0;  // myid, and the N in server<N>/
    std::uint16_t client_port = 0;
    std::uint16_t peer_port = 0;
    std::uint16_t election_port = 0;
    pid_t pid = 0;
    // A child of ours is reaped with waitpid; a member of an attached cluster is probed in
    // /proc, where the command line guards against a recycled pid.
    bool child = false;
    std::string last_exit;
    std::uintmax_t log_offset = 0;  // where the current run's output starts in server.log
};

bool log_shows_bind_failure(std::string_view log) {
    return log.find("Address already in use") != std::string_view::npos ||
           log.find("java.net.BindException") != std::string_view::npos;
}

}  // namespace

std::string parse_mode(std::string_view reply) {
    constexpr std::string_view key = "Mode: ";
    std::size_t pos = 0;
    while (pos < reply.size()) {
        auto eol = reply.find('\n', pos);
        auto line = reply.substr(pos, eol == std::string_view::npos ? reply.npos : eol - pos);
        if (line.starts_with(key)) {
            line.remove_prefix(key.size());
            while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
                line.remove_suffix(1);
            }
            return std::string(line);
        }
        if (eol == std::string_view::npos) {
            break;
        }
        pos = eol + 1;
    }
    return {};
}

std::uint64_t machine_memory_bytes() {
    std::uint64_t total = 0;
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::uint64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit) {
        if (key == "MemTotal:") {
            total = kib * 1024;
            break;
        }
    }
    // cgroup v2: "max" (no limit) or a byte count.
    std::ifstream limit_file("/sys/fs/cgroup/memory.max");
    std::string limit_text;
    if (limit_file >> limit_text) {
        std::uint64_t limit = 0;
        auto [end, ec] =
            std::from_chars(limit_text.data(), limit_text.data() + limit_text.size(), limit);
        if (ec == std::errc{} && end == limit_text.data() + limit_text.size() && limit > 0 &&
            (total == 0 || limit < total)) {
            total = limit;
        }
    }
    return total;
}

std::string auto_heap(std::uint64_t memory_bytes) {
    constexpr std::uint64_t mib = 1024ULL * 1024;
    constexpr std::uint64_t floor_mib = 256;
    constexpr std::uint64_t cap_mib = 4096;
    if (memory_bytes == 0) {
        return std::to_string(floor_mib) + "m";
    }
    return std::to_string(std::clamp(memory_bytes / 4 / mib, floor_mib, cap_mib)) + "m";
}

std::string auto_heap() {
    return auto_heap(machine_memory_bytes());
}

std::string parse_heap(std::string_view text) {
    constexpr std::uint64_t min_mib = 64;
    constexpr std::uint64_t max_mib = 1024ULL * 1024;
    auto bad = [&] {
        return std::invalid_argument(
            "heap size must be a number with an optional unit k, m or g, from 64m to 1024g, not '" +
            std::string(text) + "'"
        );
    };
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end == text.data()) {
        throw bad();
    }
    std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
    std::uint64_t per_mib = 0;  // units per MiB; 0 for g (multiply instead)
    std::uint64_t mib_value = 0;
    if (unit.size() > 1) {
        throw bad();
    }
    const char u =
        unit.empty() ? 'b' : static_cast<char>(std::tolower(static_cast<unsigned char>(unit[0])));
    switch (u) {
    case 'b':
        per_mib = 1024ULL * 1024;
        break;
    case 'k':
        per_mib = 1024;
        break;
    case 'm':
        per_mib = 1;
        break;
    case 'g':
        if (value > max_mib / 1024) {
            throw bad();
        }
        mib_value = value * 1024;
        break;
    default:
        throw bad();
    }
    if (per_mib != 0) {
        mib_value = value / per_mib;
    }
    if (mib_value < min_mib || mib_value > max_mib) {
        throw bad();
    }
    return std::to_string(mib_value) + "m";
}

bool java_and_server_available(std::string* why) {
    try {
        resolve_java({});
        resolve_classpath({});
        return true;
    } catch (const std::exception& e) {
        if (why != nullptr) {
            *why = e.what();
        }
        return false;
    }
}

struct cluster::impl {
    fs::path dir;
    bool owned_dir = false;
    bool detached = false;
    bool released = false;
    bool keep_dir = false;
    bool dir_removed = false;
    fs::path java;
    std::string classpath;
    std::string jvm_heap;
    std::chrono::seconds start_timeout{60};
    std::vector<member> members;
    std::function<void(const cluster&)> on_stop;

    member& at(int index) {
        if (index < 0 || static_cast<std::size_t>(index) >= members.size()) {
            throw std::out_of_range(
                "zk_local: member index " + std::to_string(index) + " out of range (cluster of " +
                std::to_string(members.size()) + ")"
            );
        }
        return members[static_cast<std::size_t>(index)];
    }

    [[nodiscard]] fs::path member_dir(const member& m) const {
        return dir / ("server" + std::to_string(m.id));
    }
    [[nodiscard]] fs::path config_path(const member& m) const { return member_dir(m) / "zoo.cfg"; }
    [[nodiscard]] fs::path log_path(const member& m) const { return member_dir(m) / "server.log"; }
    static std::string name(const member& m) { return "ZooKeeper server " + std::to_string(m.id); }

    [[nodiscard]] std::string log_tail(const member& m, std::size_t lines) const {
        // Enough bytes for `lines` long lines without reading a huge log whole.
        auto path = log_path(m);
        auto size = file_size_or_zero(path);
        std::uintmax_t budget = std::max<std::uintmax_t>(min_tail_bytes, lines * 1024);
        return tail_lines(read_file(path, size > budget ? size - budget : 0), lines);
    }

    [[nodiscard]] std::string log_tail_block(const member& m) const {
        return "\n--- last " + std::to_string(error_log_lines) + " lines of " +
               log_path(m).string() + " ---\n" + log_tail(m, error_log_lines);
    }

    bool alive(member& m) {
        if (m.pid <= 0) {
            return false;
        }
        if (m.child) {
            int status = 0;
            pid_t r = 0;
            do {
                r = ::waitpid(m.pid, &status, WNOHANG);
            } while (r < 0 && errno == EINTR);
            if (r == 0) {
                return true;
            }
            // r < 0 is ECHILD: SIGCHLD is ignored, so the kernel reaped it for us.
            m.last_exit = r == m.pid ? describe_status(status) : "exited";
            m.pid = 0;
            return false;
        }
        auto cmdline = read_file("/proc/" + std::to_string(m.pid) + "/cmdline");
        // A zombie has an empty command line, a recycled pid a different one.
        if (cmdline.find(main_class) == std::string::npos ||
            cmdline.find(config_path(m).string()) == std::string::npos) {
            m.last_exit = "exited";
            m.pid = 0;
            return false;
        }
        return true;
    }

    bool wait_exit(member& m, steady::time_point deadline) {
        while (alive(m)) {
            if (steady::now() >= deadline) {
                return false;
            }
            std::this_thread::sleep_for(exit_poll_interval);
        }
        return true;
    }

    void signal_member(member& m, int sig) {
        if (alive(m) && ::kill(m.pid, sig) != 0 && errno != ESRCH) {
            throw_errno("zk_local: kill(" + std::to_string(m.pid) + ")", errno);
        }
    }

    // SIGTERM all (when graceful), wait up to the grace period, then SIGKILL the rest.
    void terminate(const std::vector<member*>& targets, bool graceful) {
        if (graceful) {
            for (auto* m : targets) {
                signal_member(*m, SIGTERM);
            }
            auto deadline = steady::now() + term_grace;
            for (auto* m : targets) {
                if (!wait_exit(*m, deadline)) {
                    spdlog::warn("zk_local: {} ignored SIGTERM, killing it", name(*m));
                }
            }
        }
        for (auto* m : targets) {
            signal_member(*m, SIGKILL);
        }
        auto deadline = steady::now() + term_grace;
        for (auto* m : targets) {
            if (!wait_exit(*m, deadline)) {
                throw std::runtime_error(
                    "zk_local: " + name(*m) + " (pid " + std::to_string(m->pid) +
                    ") survived SIGKILL"
                );
            }
        }
    }

    void ensure_dir_exists() const {
        if (dir_removed) {
            throw std::logic_error("zk_local: the cluster dir was removed by stop()");
        }
    }

    [[nodiscard]] std::vector<std::string> java_args(const member& m) const {
        return {
            java.string(),
            "-Xmx" + jvm_heap,
            "-XX:+UseSerialGC",
            // No hsperfdata files left in /tmp by SIGKILLed servers.
            "-XX:-UsePerfData",
            "-Djava.net.preferIPv4Stack=true",
            "-Dzookeeper.log.dir=" + member_dir(m).string(),
            "-Dlog4j.configuration=file:" + (dir / log4j_file_name).string(),
            "-cp",
            classpath,
            main_class,
            config_path(m).string(),
        };
    }

    void spawn(member& m) {
        ensure_dir_exists();
        auto log = log_path(m);
        {
            std::ofstream out(log, std::ios::app);
            out << "===== zk_local: starting " << name(m) << " =====\n";
        }
        m.log_offset = file_size_or_zero(log);
        spawn_spec spec{java, java_args(m), member_dir(m), log, detached};
        pid_t pid = 0;
        spawner_thread::run([&] { pid = spawn_process(spec); });
        m.pid = pid;
        m.child = true;
        m.last_exit.clear();
        spdlog::debug("zk_local: {} pid {} client port {}", name(m), pid, m.client_port);
    }

    [[nodiscard]] std::string mode(const member& m) const {
        return parse_mode(four_letter_at(m.client_port, "srvr", milliseconds{1000}));
    }

    [[nodiscard]] bool serving(const member& m) const {
        auto current = mode(m);
        // An ensemble member reports standalone only in the instant before it knows better.
        return members.size() == 1 ? current == "standalone"
                                   : (current == "leader" || current == "follower");
    }

    enum class wait_result { ready, bind_clash };
    enum class identity { unknown, ours, foreign };

    // Who answers on the member's client port. Another process's server may hold a port we
    // picked (free when we looked) and answer `srvr` before our JVM even tries to bind, so
    // readiness is only believed from a server whose `conf` names our data directory.
    [[nodiscard]] identity whose(const member& m) const {
        const auto conf = four_letter_at(m.client_port, "conf", milliseconds{1000});
        const auto pos = conf.find("dataDir=");
        if (pos == std::string::npos) {
            return identity::unknown;
        }
        const auto end = conf.find('\n', pos);
        const auto value = conf.substr(pos + 8, end == std::string::npos ? end : end - pos - 8);
        const auto ours = (member_dir(m) / "data").string();
        return value.rfind(ours, 0) == 0 ? identity::ours : identity::foreign;
    }

    // Polls until `targets` all serve. A bind failure is reported as such (the caller retries
    // with new ports); any other exit or the deadline throws with the log tail.
    wait_result wait_ready(const std::vector<member*>& targets, steady::time_point deadline) {
        for (;;) {
            auto next_poll = steady::now() + poll_interval;
            bool all_ready = true;
            for (auto* m : targets) {
                bool up = alive(*m);
                // A clash on the leader's peer port does not end the process, it loops in
                // leader election, so the log is checked while it runs too.
                if (log_shows_bind_failure(read_file(log_path(*m), m->log_offset))) {
                    return wait_result::bind_clash;
                }
                if (!up) {
                    throw std::runtime_error(
                        "zk_local: " + name(*m) + " " + m->last_exit + " during startup" +
                        log_tail_block(*m)
                    );
                }
                if (all_ready) {
                    const auto who = whose(*m);
                    if (who == identity::foreign) {
                        return wait_result::bind_clash;
                    }
                    if (who != identity::ours || !serving(*m)) {
                        all_ready = false;
                    }
                }
            }
            if (all_ready) {
                return wait_result::ready;
            }
            if (steady::now() >= deadline) {
                std::string msg = "zk_local: ZooKeeper did not serve within " +
                                  std::to_string(start_timeout.count()) + " s";
                for (auto* m : targets) {
                    auto current = mode(*m);
                    msg += "\n" + name(*m) + ": " + (current.empty() ? "not serving" : current);
                }
                for (auto* m : targets) {
                    msg += log_tail_block(*m);
                }
                throw std::runtime_error(msg);
            }
            std::this_thread::sleep_until(next_poll);
        }
    }

    void assign_ports(std::uint16_t base_port) {
        auto n = members.size();
        bool ensemble = n > 1;
        std::vector<std::uint16_t> ports;
        if (base_port == 0) {
            ports = pick_free_ports(ensemble ? 3 * n : n);
        } else {
            if (base_port + (ensemble ? 3 * n : n) - 1 > 65535) {
                throw std::runtime_error("zk_local: base port too high for the cluster size");
            }
            for (std::size_t i = 0; i < (ensemble ? 3 * n : n); ++i) {
                ports.push_back(static_cast<std::uint16_t>(base_port + i));
            }
        }
        for (std::size_t i = 0; i < n; ++i) {
            members[i].client_port = ports[i];
            members[i].peer_port = ensemble ? ports[n + i] : 0;
            members[i].election_port = ensemble ? ports[2 * n + i] : 0;
        }
    }

    void write_configs(const options& opts) const {
        write_file(
            dir / log4j_file_name,
            "# Written by zkd zk_local: INFO and above to stdout, which is server<N>/server.log.\n"
            "log4j.rootLogger=INFO, CONSOLE\n"
            "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.CONSOLE.Target=System.out\n"
            "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.CONSOLE.layout.ConversionPattern="
            "%d{ISO8601} %-5p [myid:%X{myid}] [%t:%C{1}@%L] - %m%n\n" +
                std::string(
                    opts.log_requests
                        ? "# --log-requests: one line per request processed.\n"
                          "log4j.logger.org.apache.zookeeper.server.FinalRequestProcessor=DEBUG\n"
                        : ""
                )
        );
        bool ensemble = members.size() > 1;
        for (const auto& m : members) {
            auto data_dir = member_dir(m) / "data";
            fs::create_directories(data_dir);
            std::ostringstream cfg;
            cfg << "# Written by zkd zk_local; rewritten on every cluster start.\n"
                << "tickTime=" << opts.tick_ms << "\n"
                << "dataDir=" << data_dir.string() << "\n"
                << "clientPort=" << m.client_port << "\n"
                << "clientPortAddress=127.0.0.1\n"
                << "admin.enableServer=false\n"
                << "extendedTypesEnabled=true\n"
                << "4lw.commands.whitelist=*\n"
                << "maxClientCnxns=0\n"
                << "forceSync=" << (opts.force_sync ? "yes" : "no") << "\n";
            if (ensemble) {
                cfg << "initLimit=10\n"
                    << "syncLimit=5\n"
                    << "reconfigEnabled=false\n"
                    << "standaloneEnabled=false\n";
                for (const auto& peer : members) {
                    cfg << "server." << peer.id << "=127.0.0.1:" << peer.peer_port << ":"
                        << peer.election_port << "\n";
                }
                write_file(data_dir / "myid", std::to_string(m.id) + "\n");
            }
            for (const auto& line : opts.extra_config) {
                cfg << line << "\n";
            }
            write_file(config_path(m), cfg.str());
        }
    }

    void start_all(const options& opts) {
        auto deadline = steady::now() + start_timeout;
        for (int attempt = 1;; ++attempt) {
            assign_ports(opts.base_port);
            write_configs(opts);
            std::vector<member*> all;
            for (auto& m : members) {
                all.push_back(&m);
            }
            try {
                for (auto& m : members) {
                    spawn(m);
                }
                if (wait_ready(all, deadline) == wait_result::ready) {
                    save_state();
                    return;
                }
            } catch (...) {
                terminate(all, false);
                throw;
            }
            terminate(all, false);
            std::string clash = "zk_local: port clash (Address already in use) on attempt " +
                                std::to_string(attempt);
            if (opts.base_port != 0) {
                throw std::runtime_error(
                    clash + " with base port " + std::to_string(opts.base_port) +
                    "; choose another port or pass 0 for free ports" + log_tails()
                );
            }
            if (attempt == max_start_attempts) {
                throw std::runtime_error(clash + ", giving up" + log_tails());
            }
            spdlog::warn("{}, retrying with new ports", clash);
        }
    }

    [[nodiscard]] std::string log_tails() const {
        std::string out;
        for (const auto& m : members) {
            out += log_tail_block(m);
        }
        return out;
    }

    void save_state() const {
        if (dir_removed) {
            return;
        }
        std::ostringstream out;
        out << "# zkd zk_local cluster state; read by zkd-zk-local --dir\n"
            << "version 1\n"
            << "dir " << dir.string() << "\n"
            << "owned_dir " << (owned_dir ? 1 : 0) << "\n"
            << "java " << java.string() << "\n"
            << "classpath " << classpath << "\n"
            << "jvm_heap " << jvm_heap << "\n"
            << "start_timeout_s " << start_timeout.count() << "\n";
        for (const auto& m : members) {
            out << "member " << m.id << " " << m.pid << " " << m.client_port << " " << m.peer_port
                << " " << m.election_port << "\n";
        }
        write_file(dir / state_file_name, out.str());
    }

    void load_state() {
        auto path = dir / state_file_name;
        std::ifstream in(path);
        if (!in) {
            throw std::runtime_error(
                "zk_local: no cluster state in " + dir.string() + " (no " + state_file_name +
                "; was it started by zkd-zk-local start?)"
            );
        }
        auto bad = [&](const std::string& what) {
            return std::runtime_error("zk_local: bad state file " + path.string() + ": " + what);
        };
        std::string line;
        bool versioned = false;
        while (std::getline(in, line)) {
            if (line.empty() || line.front() == '#') {
                continue;
            }
            auto space = line.find(' ');
            auto key = line.substr(0, space);
            auto value = space == std::string::npos ? std::string{} : line.substr(space + 1);
            if (key == "version") {
                if (value != "1") {
                    throw bad("unsupported version " + value);
                }
                versioned = true;
            } else if (key == "dir") {
                // The servers' command lines (and zoo.cfg) name the dir as spelled at start;
                // keep that spelling when the caller reached it another way (symlink, ..).
                std::error_code ec;
                if (fs::equivalent(value, dir, ec)) {
                    dir = value;
                }
            } else if (key == "owned_dir") {
                owned_dir = value == "1";
            } else if (key == "java") {
                java = value;
            } else if (key == "classpath") {
                classpath = value;
            } else if (key == "jvm_heap") {
                jvm_heap = value;
            } else if (key == "start_timeout_s") {
                start_timeout = std::chrono::seconds{std::stoll(value)};
            } else if (key == "member") {
                std::istringstream fields(value);
                member m;
                unsigned client = 0;
                unsigned peer = 0;
                unsigned election = 0;
                if (!(fields >> m.id >> m.pid >> client >> peer >> election) || client > 65535 ||
                    peer > 65535 || election > 65535) {
                    throw bad("bad member line '" + line + "'");
                }
                m.client_port = static_cast<std::uint16_t>(client);
                m.peer_port = static_cast<std::uint16_t>(peer);
                m.election_port = static_cast<std::uint16_t>(election);
                members.push_back(m);
            }
        }
        if (!versioned || members.empty() || java.empty() || classpath.empty()) {
            throw bad("incomplete");
        }
    }
};

cluster::cluster(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

cluster::cluster(cluster&& other) noexcept = default;

cluster& cluster::operator=(cluster&& other) noexcept {
    if (this != &other) {
        // The previous cluster is stopped as if destroyed.
        cluster previous(std::move(impl_));
        impl_ = std::move(other.impl_);
    }
    return *this;
}

cluster::~cluster() {
    if (!impl_ || impl_->released || impl_->detached) {
        return;
    }
    try {
        stop();
    } catch (const std::exception& e) {
        spdlog::error(
            "zk_local: stopping the cluster in {} failed: {}", impl_->dir.string(), e.what()
        );
    }
}

cluster::impl& cluster::state() const {
    if (!impl_) {
        throw std::logic_error("zk_local: use of a moved-from cluster");
    }
    return *impl_;
}

cluster cluster::start(options opts) {
    if (opts.servers < 1 || opts.servers % 2 == 0 || opts.servers > 254) {
        throw std::invalid_argument(
            "zk_local: servers must be 1 or an odd number up to 253, not " +
            std::to_string(opts.servers)
        );
    }
    if (opts.tick_ms <= 0) {
        throw std::invalid_argument("zk_local: tick_ms must be positive");
    }
    auto state = std::make_unique<impl>();
    state->java = resolve_java(opts.java);
    state->classpath = resolve_classpath(opts.classpath);
    state->jvm_heap = opts.jvm_heap.empty() ? auto_heap() : parse_heap(opts.jvm_heap);
    state->start_timeout = opts.start_timeout;
    state->detached = opts.detach;
    state->keep_dir = opts.keep_dir;
    for (int i = 0; i < opts.servers; ++i) {
        member m;
        m.id = i + 1;
        state->members.push_back(m);
    }

    if (opts.dir.empty()) {
        const char* tmp = env_or_null("TMPDIR");
        auto pattern = (fs::path(tmp != nullptr ? tmp : "/tmp") / "zkd-zk-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw_errno("zk_local: mkdtemp(" + pattern + ")", errno);
        }
        state->dir = pattern;
        state->owned_dir = true;
    } else {
        state->dir = fs::absolute(opts.dir);
        fs::create_directories(state->dir);
        if (fs::exists(state->dir / state_file_name)) {
            // Refuse to start a second cluster over a running one (it would fight for the
            // data dirs); a stopped one is simply restarted with its data.
            auto previous = std::make_unique<impl>();
            previous->dir = state->dir;
            try {
                previous->load_state();
            } catch (const std::exception&) {
                previous->members.clear();
            }
            for (auto& m : previous->members) {
                if (previous->alive(m)) {
                    throw std::runtime_error(
                        "zk_local: a cluster is already running in " + state->dir.string() + " (" +
                        impl::name(m) + ", pid " + std::to_string(m.pid) + ")"
                    );
                }
            }
        }
    }

    auto started = steady::now();
    try {
        state->start_all(opts);
    } catch (...) {
        if (state->owned_dir && !opts.keep_dir) {
            std::error_code ec;
            fs::remove_all(state->dir, ec);
        }
        throw;
    }
    spdlog::debug(
        "zk_local: {} server(s) serving after {} ms in {}", opts.servers,
        std::chrono::duration_cast<milliseconds>(steady::now() - started).count(),
        state->dir.string()
    );
    return cluster(std::move(state));
}

cluster cluster::attach(const std::filesystem::path& dir) {
    auto state = std::make_unique<impl>();
    state->dir = fs::absolute(dir);
    state->detached = true;
    state->load_state();
    return cluster(std::move(state));
}

std::string cluster::connect_string() const {
    std::string out;
    for (int i = 0; i < size(); ++i) {
        out += (i == 0 ? "" : ",") + connect_string(i);
    }
    return out;
}

std::string cluster::connect_string(int member) const {
    return "127.0.0.1:" + std::to_string(client_port(member));
}

int cluster::size() const {
    return static_cast<int>(state().members.size());
}

std::uint16_t cluster::client_port(int member) const {
    return state().at(member).client_port;
}

const std::filesystem::path& cluster::dir() const {
    return state().dir;
}

std::filesystem::path cluster::log_path(int member) const {
    auto& s = state();
    return s.log_path(s.at(member));
}

int cluster::pid(int member) const {
    auto& s = state();
    auto& m = s.at(member);
    return s.alive(m) ? m.pid : 0;
}

bool cluster::running(int member) const {
    auto& s = state();
    return s.alive(s.at(member));
}

void cluster::stop_member(int member) {
    auto& s = state();
    s.terminate({&s.at(member)}, true);
    s.save_state();
}

void cluster::kill_member(int member) {
    auto& s = state();
    s.terminate({&s.at(member)}, false);
    s.save_state();
}

void cluster::start_member(int member) {
    auto& s = state();
    auto& m = s.at(member);
    if (s.alive(m)) {
        throw std::logic_error("zk_local: " + impl::name(m) + " is already running");
    }
    s.spawn(m);
    s.save_state();
    try {
        if (s.wait_ready({&m}, steady::now() + s.start_timeout) == impl::wait_result::bind_clash) {
            throw std::runtime_error(
                "zk_local: " + impl::name(m) + " cannot bind its ports any more" +
                s.log_tail_block(m)
            );
        }
    } catch (...) {
        s.terminate({&m}, false);
        s.save_state();
        throw;
    }
}

void cluster::wait_serving(int member, std::chrono::milliseconds timeout) const {
    auto& s = state();
    auto& m = s.at(member);
    auto deadline = steady::now() + timeout;
    for (;;) {
        auto next_poll = steady::now() + poll_interval;
        if (!s.alive(m)) {
            throw std::runtime_error("zk_local: " + impl::name(m) + " is not running");
        }
        if (s.serving(m)) {
            return;
        }
        if (steady::now() >= deadline) {
            throw std::runtime_error(
                "zk_local: " + impl::name(m) + " did not serve within " +
                std::to_string(timeout.count()) + " ms" + s.log_tail_block(m)
            );
        }
        std::this_thread::sleep_until(next_poll);
    }
}

std::string cluster::four_letter(int member, std::string_view cmd, milliseconds timeout) const {
    return four_letter_at(client_port(member), cmd, timeout);
}

std::string cluster::mode(int member) const {
    auto& s = state();
    return s.mode(s.at(member));
}

std::string cluster::log_tail(int member, std::size_t lines) const {
    auto& s = state();
    return s.log_tail(s.at(member), lines);
}

void cluster::stop(bool keep_dir) {
    auto& s = state();
    std::vector<member*> running_members;
    for (auto& m : s.members) {
        if (s.alive(m)) {
            running_members.push_back(&m);
        }
    }
    if (!running_members.empty() && s.on_stop) {
        try {
            s.on_stop(*this);
        } catch (const std::exception& e) {
            spdlog::warn("zk_local: on_stop hook failed: {}", e.what());
        }
    }
    s.terminate(running_members, true);
    if (s.owned_dir && !keep_dir && !s.keep_dir && !s.dir_removed) {
        std::error_code ec;
        fs::remove_all(s.dir, ec);
        if (ec) {
            spdlog::warn("zk_local: cannot remove {}: {}", s.dir.string(), ec.message());
        }
        s.dir_removed = true;
    } else {
        s.save_state();
    }
}

void cluster::release() {
    state().released = true;
}

void cluster::on_stop(std::function<void(const cluster&)> hook) {
    state().on_stop = std::move(hook);
}

}  // namespace zkd::zk_local
