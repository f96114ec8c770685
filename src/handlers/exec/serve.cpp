// SPDX-License-Identifier: MIT
// Served exec types (docs/exec.md "Serve mode"): a pool of long-lived programs per type, each
// handed one task at a time over JSON-lines frames on its stdin and stdout. The decisions are
// serve::pool_fsm's; this file carries them out with processes (detail::child), pipes and
// timers, all on one event loop, never blocking it.
#include "handlers/serve.hpp"

#include "handlers/exec.hpp"
#include "handlers/exec/detail/child.hpp"
#include "handlers/exec/detail/errors.hpp"
#include "protocol/text.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sys/ioctl.h>
#include <unistd.h>
#include <variant>

namespace asio = boost::asio;
namespace json = boost::json;

namespace zkd::handlers::exec {

using detail::fail;
using detail::signal_name;

namespace {

using detail::child;
using serve::pool_fsm;

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch()
    )
        .count();
}

/// The resident set of `pid` in bytes (0 if it cannot be read).
std::size_t rss_of(pid_t pid) {
    if (pid <= 0) {
        return 0;
    }
    std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
    std::size_t size = 0;
    std::size_t resident = 0;
    if (!(in >> size >> resident)) {
        return 0;
    }
    return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

/// Bytes written to the pipe `fd` and not read yet (0 when it cannot tell).
std::uint64_t unread_bytes(asio::posix::stream_descriptor& fd) {
    int n = 0;
    if (!fd.is_open() || ::ioctl(fd.native_handle(), FIONREAD, &n) != 0 || n < 0) {
        return 0;
    }
    return static_cast<std::uint64_t>(n);
}

/// One task handed to a process, until it ends.
struct job {
    explicit job(const asio::any_io_executor& ex)
        : done(ex, asio::steady_timer::time_point::max()) {}
    std::string id;
    progress_fn progress;
    std::optional<handler_result> result;
    asio::steady_timer done;  // cancelled once `result` is set, or the task is handed back
    bool cancel_sent = false;
    std::uint64_t frame_at = 0;  // where its frame starts in the process's stdin
    bool may_hand_back = false;  // a death before it read the frame hands the task back
    bool handed_back = false;    // it did: the task waits for another process

    void finish(handler_result r) {
        if (!result && !handed_back) {
            result = std::move(r);
            done.cancel();
        }
    }
    void hand_back() {
        if (!result && !handed_back) {
            handed_back = true;
            done.cancel();
        }
    }
};

/// A task waiting for a process.
struct waiter {
    explicit waiter(const asio::any_io_executor& ex)
        : timer(ex, asio::steady_timer::time_point::max()) {}
    asio::steady_timer timer;              // cancelled when it has a process, or must stop waiting
    int proc = -1;                         // the process it got
    std::optional<handler_error> refused;  // instead: why it gets none
};

/// One served process.
struct proc {
    proc(int n, std::shared_ptr<child> ch, const asio::any_io_executor& ex)
        : id(n), c(std::move(ch)), start_timer(ex), grace_timer(ex) {}
    int id;
    std::shared_ptr<child> c;
    asio::steady_timer start_timer;  // start-timeout
    asio::steady_timer grace_timer;  // a cancel's kill-grace, or stdin closed to SIGTERM
    bool ready = false;
    bool retiring = false;    // told to go (stdin closed or killed): exits are expected
    std::string start_error;  // why its start failed, when it did
    std::string stderr_tail;
    bool stderr_eof = false;  // its stderr is read to the end
    std::shared_ptr<job> current;
    std::deque<std::string> outbox;
    bool writing = false;
    std::uint64_t sent = 0;            // bytes of frames that reached its stdin pipe
    std::uint64_t unread_at_exit = 0;  // of those, still in the pipe when it was gone
};

class served_type : public std::enable_shared_from_this<served_type> {
public:
    served_type(program p, std::shared_ptr<type_health> health)
        : p_(std::move(p)), fsm_(settings(p_.config)), health_(std::move(health)) {}

    /// Runs one task: waits for a process, hands it the task, awaits its answer. A process that
    /// dies before it read the task hands it back: it waits for another (serve::frame_unread).
    asio::awaitable<handler_result> run(async_call call) {
        co_await asio::this_coro::reset_cancellation_state([](asio::cancellation_type) {
            return asio::cancellation_type::none;
        });
        const auto ex = co_await asio::this_coro::executor;
        bind(ex);
        std::string frame;  // encoded at the first hand-off, sent as is to the next process
        for (int handbacks = 0;; ++handbacks) {
            if (fsm_.unhealthy()) {
                co_return unhealthy_error();
            }
            if (stopping_) {
                co_return fail(codes::cancelled, "the worker is stopping");
            }
            if (call.stop.stop_requested()) {
                co_return fail(codes::cancelled, "stopped before a process read the task");
            }
            auto got = co_await get_process(call);
            if (auto* refused = std::get_if<handler_error>(&got)) {
                co_return *refused;
            }
            auto pr = std::get<std::shared_ptr<proc>>(std::move(got));
            auto j = std::make_shared<job>(ex);
            j->id = call.task;
            j->progress = call.progress;
            j->may_hand_back = handbacks < serve::max_handbacks;
            pr->current = j;
            if (frame.empty()) {
                call.started();
                serve::task_frame t;
                t.id = call.task;
                t.attempt = call.attempt;
                t.epoch = call.epoch;
                t.type = p_.config.name;
                t.args = std::move(call.args);
                t.deadline_ms = call.timeout.count() > 0 ? now_ms() + call.timeout.count() : 0;
                frame = serve::encode(t);
            }
            j->frame_at = pr->sent;
            for (const auto& queued : pr->outbox) {
                j->frame_at += queued.size();
            }
            send(pr, frame);
            {
                auto self = shared_from_this();
                const std::stop_callback on_stop(call.stop, [self, pr, j] {
                    asio::post(j->done.get_executor(), [self, pr, j] { self->cancel(pr, j); });
                });
                while (!j->result && !j->handed_back) {
                    co_await j->done.async_wait(asio::as_tuple(asio::use_awaitable));
                }
            }
            if (j->result) {
                co_return std::move(*j->result);
            }
        }
    }

    /// Waits for an idle process for one task: the process, or why the task gets none.
    asio::awaitable<std::variant<std::shared_ptr<proc>, handler_error>> get_process(
        const async_call& call
    ) {
        const auto ex = co_await asio::this_coro::executor;
        auto w = std::make_shared<waiter>(ex);
        waiting_.push_back(w);
        fsm_.task_waiting();
        {
            const std::stop_callback on_stop(call.stop, [w] {
                asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
            });
            pump();
            while (w->proc < 0 && !w->refused && !call.stop.stop_requested()) {
                w->timer.expires_at(asio::steady_timer::time_point::max());
                co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
            }
        }
        if (w->proc < 0) {
            std::erase(waiting_, w);
            if (!w->refused) {
                fsm_.task_gave_up();
                co_return fail(codes::cancelled, "stopped while waiting for a process");
            }
            co_return *w->refused;
        }
        auto it = procs_.find(w->proc);
        if (it == procs_.end()) {
            co_return fail(codes::handler_error, "the process given the task is gone");
        }
        co_return it->second;
    }

    /// The service: starts the warm processes, and on stop lets in-flight tasks finish,
    /// closes every process's stdin and awaits them all.
    asio::awaitable<void> service(std::stop_token stop) {
        const auto ex = co_await asio::this_coro::executor;
        bind(ex);
        asio::steady_timer wake(ex, asio::steady_timer::time_point::max());
        stopped_ = &wake;
        {
            const std::stop_callback on_stop(stop, [&wake] {
                asio::post(wake.get_executor(), [&wake] { wake.cancel(); });
            });
            pump();
            while (!stop.stop_requested()) {
                wake.expires_at(asio::steady_timer::time_point::max());
                co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
            }
        }
        stopping_ = true;
        backoff_->cancel();
        for (auto& [id, pr] : procs_) {
            if (!pr->current) {
                retire(pr);
            }
        }
        while (!procs_.empty()) {
            wake.expires_at(asio::steady_timer::time_point::max());
            co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        stopped_ = nullptr;
        spdlog::debug("exec type {}: its processes are gone", p_.config.name);
    }

private:
    static serve::pool_settings settings(const program_config& c) {
        serve::pool_settings s;
        s.concurrency = c.concurrency > 0 ? c.concurrency : 100'000;
        s.warm = c.warm;
        s.max_tasks = c.max_tasks;
        s.max_memory = c.max_memory;
        return s;
    }

    void bind(const asio::any_io_executor& ex) {
        if (!ex_) {
            ex_ = ex;
            backoff_.emplace(ex);
        }
    }

    handler_error unhealthy_error() const {
        return fail(
            codes::handler_error, "exec type '" + p_.config.name +
                                      "' is unhealthy on this worker: its program failed " +
                                      "to start " + std::to_string(fsm_.failed_starts()) +
                                      " times in a row (last: " + last_start_error_ + ")"
        );
    }

    /// Starts what the pool wants started and hands idle processes to waiting tasks.
    void pump() {
        if (!ex_) {
            return;
        }
        if (fsm_.unhealthy()) {
            // Waiting tasks get no process: they fail now rather than hold their slots.
            for (auto& w : waiting_) {
                if (w->proc < 0 && !w->refused) {
                    w->refused = unhealthy_error();
                    fsm_.task_gave_up();
                    w->timer.cancel();
                }
            }
        }
        while (!stopping_ && fsm_.to_start() > 0) {
            start_one();
        }
        for (;;) {
            auto it = std::find_if(waiting_.begin(), waiting_.end(), [](const auto& w) {
                return w->proc < 0 && !w->refused;
            });
            if (it == waiting_.end()) {
                break;
            }
            const auto got = fsm_.assign();
            if (!got) {
                break;
            }
            (*it)->proc = *got;
            (*it)->timer.cancel();
            waiting_.erase(it);
        }
    }

    void start_one() {
        const int id = next_id_++;
        std::vector<std::string> env = p_.env;
        env.emplace_back("ZKD_SERVE=1");
        env.push_back("ZKD_TASK_TYPE=" + p_.config.name);
        std::string error;
        auto c = detail::spawn(*ex_, p_, env, false, error);
        fsm_.started(id);
        if (!c) {
            on_start_failed(id, error);
            return;
        }
        c->grace = p_.config.kill_grace;
        auto pr = std::make_shared<proc>(id, c, *ex_);
        procs_.emplace(id, pr);
        pr->start_timer.expires_after(p_.config.start_timeout);
        pr->start_timer.async_wait([self = shared_from_this(), pr](boost::system::error_code ec) {
            if (!ec && !pr->ready && !pr->retiring) {
                pr->start_error = "it did not say ready within " +
                                  std::to_string(self->p_.config.start_timeout.count()) +
                                  " ms (start-timeout)";
                pr->retiring = true;
                pr->c->kill_tree();
            }
        });
        auto self = shared_from_this();
        asio::co_spawn(*ex_, self->read_frames(pr), asio::detached);
        asio::co_spawn(*ex_, self->read_stderr(pr), asio::detached);
        asio::co_spawn(*ex_, self->await_exit(pr), asio::detached);
    }

    void on_start_failed(int id, const std::string& why) {
        last_start_error_ = why;
        const bool was = fsm_.unhealthy();
        fsm_.start_failed(id);
        spdlog::warn(
            "exec type {}: a process failed to start ({} in a row): {}", p_.config.name,
            fsm_.failed_starts(), why
        );
        if (fsm_.unhealthy() && !was) {
            health_->set(p_.config.name, true);
            spdlog::error(
                "exec type {}: unhealthy on this worker after {} failed starts in a row: its "
                "tasks fail here until a start succeeds (retrying with backoff)",
                p_.config.name, fsm_.failed_starts()
            );
        }
        arm_backoff();
    }

    void arm_backoff() {
        if (!fsm_.backing_off() || !backoff_ || stopping_) {
            return;
        }
        backoff_->expires_after(fsm_.backoff());
        backoff_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (ec) {
                return;
            }
            self->fsm_.backoff_over();
            self->pump();
        });
    }

    void send(const std::shared_ptr<proc>& pr, std::string line) {
        pr->outbox.push_back(std::move(line));
        if (!pr->writing) {
            pr->writing = true;
            asio::co_spawn(*ex_, write_out(pr), asio::detached);
        }
    }

    static asio::awaitable<void> write_out(std::shared_ptr<proc> pr) {
        while (!pr->outbox.empty() && pr->c->in.is_open()) {
            auto [ec, n] = co_await asio::async_write(
                pr->c->in, asio::buffer(pr->outbox.front()), asio::as_tuple(asio::use_awaitable)
            );
            pr->outbox.pop_front();
            pr->sent += n;
            if (ec) {
                pr->outbox.clear();  // it closed its stdin or exited: its exit says the rest
            }
        }
        pr->writing = false;
        if (pr->retiring && pr->c->in.is_open() && pr->outbox.empty() && !pr->current) {
            boost::system::error_code ignored;
            pr->c->in.close(ignored);
        }
    }

    /// Asks `pr` to go: stdin closed (it finishes nothing more: it has no task), SIGTERM to
    /// its tree after kill-grace, SIGKILL after another.
    void retire(const std::shared_ptr<proc>& pr) {
        if (pr->retiring) {
            return;
        }
        pr->retiring = true;
        fsm_.retire(pr->id);
        if (!pr->writing) {
            boost::system::error_code ignored;
            pr->c->in.close(ignored);
        }
        pr->grace_timer.expires_after(p_.config.kill_grace);
        pr->grace_timer.async_wait([pr](boost::system::error_code ec) {
            if (!ec) {
                pr->c->terminate();
            }
        });
    }

    /// Replaces `pr` at once: its tree is killed.
    void kill(const std::shared_ptr<proc>& pr) {
        if (!pr->retiring) {
            pr->retiring = true;
            fsm_.retire(pr->id);
        }
        pr->c->kill_tree();
    }

    /// Stop requested for `j` on `pr`: a cancel frame, and the process is killed and replaced
    /// if it has not answered within kill-grace.
    void cancel(const std::shared_ptr<proc>& pr, const std::shared_ptr<job>& j) {
        if (j->result || j->cancel_sent) {
            return;
        }
        j->cancel_sent = true;
        send(pr, serve::encode_cancel(j->id));
        pr->grace_timer.expires_after(p_.config.kill_grace);
        pr->grace_timer.async_wait([self = shared_from_this(), pr,
                                    j](boost::system::error_code ec) {
            if (ec || j->result) {
                return;
            }
            spdlog::warn(
                "exec type {}: process {} did not answer the cancel of {} within kill-grace: "
                "killed and replaced",
                self->p_.config.name, pr->c->program, j->id
            );
            j->finish(fail(codes::cancelled, "cancelled; the program did not stop in time"));
            self->kill(pr);
        });
    }

    /// The task in flight on `pr` ended with `r`: the process is idle again, or recycled.
    void task_ended(const std::shared_ptr<proc>& pr, handler_result r) {
        auto j = std::exchange(pr->current, nullptr);
        pr->grace_timer.cancel();
        if (j->cancel_sent && r) {
            r = fail(codes::cancelled, "cancelled (the program's late result was dropped)");
        }
        j->finish(std::move(r));
        const std::size_t rss = p_.config.max_memory > 0 ? rss_of(pr->c->program) : 0;
        if (fsm_.task_done(pr->id, rss)) {
            spdlog::info(
                "exec type {}: recycling process {} ({})", p_.config.name, pr->c->program,
                p_.config.max_memory > 0 && rss > p_.config.max_memory
                    ? "its RSS " + std::to_string(rss) + " bytes is over max-memory"
                    : "max-tasks reached"
            );
            retire(pr);
        } else if (stopping_) {
            retire(pr);
        }
        pump();
    }

    void bad_frame(const std::shared_ptr<proc>& pr, std::string_view code, const std::string& why) {
        spdlog::warn(
            "exec type {}: process {} wrote a bad frame ({}): replaced", p_.config.name,
            pr->c->program, why
        );
        if (pr->current) {
            auto j = std::exchange(pr->current, nullptr);
            j->finish(fail(
                code, code == codes::output_too_large
                          ? "the program wrote a line longer than " +
                                std::to_string(p_.config.max_output) + " bytes (max-output)"
                          : "the program wrote a bad frame: " + why
            ));
        }
        kill(pr);
    }

    void on_frame(const std::shared_ptr<proc>& pr, serve::frame f) {
        if (auto* r = std::get_if<serve::ready_frame>(&f)) {
            if (pr->ready || pr->retiring) {
                return;
            }
            pr->ready = true;
            pr->start_timer.cancel();
            const bool healed = fsm_.unhealthy();
            fsm_.ready(pr->id);
            if (healed) {
                spdlog::info("exec type {}: healthy again: a process started", p_.config.name);
                health_->set(p_.config.name, false);
            }
            spdlog::debug(
                "exec type {}: process {} ready (protocol {})", p_.config.name, pr->c->program,
                r->protocol
            );
            pump();
            return;
        }
        if (auto* l = std::get_if<serve::log_frame>(&f)) {
            const auto level = l->level == "debug"   ? spdlog::level::debug
                               : l->level == "warn"  ? spdlog::level::warn
                               : l->level == "error" ? spdlog::level::err
                                                     : spdlog::level::info;
            spdlog::log(level, "exec type {} [{}]: {}", p_.config.name, pr->c->program, l->message);
            return;
        }
        if (std::holds_alternative<serve::unknown_frame>(f)) {
            return;
        }
        const std::string* id = nullptr;
        if (auto* p = std::get_if<serve::progress_frame>(&f)) {
            id = &p->id;
        } else if (auto* r = std::get_if<serve::result_frame>(&f)) {
            id = &r->id;
        } else if (auto* e = std::get_if<serve::error_frame>(&f)) {
            id = &e->id;
        }
        if (!pr->current || *id != pr->current->id) {
            spdlog::info(
                "exec type {}: process {} wrote a frame for '{}', not its task in flight: ignored",
                p_.config.name, pr->c->program, protocol::printable_utf8(*id)
            );
            return;
        }
        if (auto* p = std::get_if<serve::progress_frame>(&f)) {
            if (pr->current->progress) {
                pr->current->progress(p->fraction, std::move(p->message));
            }
        } else if (auto* r = std::get_if<serve::result_frame>(&f)) {
            task_ended(pr, std::move(r->value));
        } else if (auto* e = std::get_if<serve::error_frame>(&f)) {
            task_ended(pr, fail(e->code, std::move(e->message)));
        }
    }

    /// Reads `pr`'s frames: each read's complete lines are parsed in one go, then applied in
    /// order, a progress frame that a later one of the same read supersedes skipped.
    asio::awaitable<void> read_frames(std::shared_ptr<proc> pr) {
        auto self = shared_from_this();
        serve::line_splitter lines(p_.config.max_output);
        std::array<char, 65536> buf{};
        std::vector<std::string_view> got;
        std::vector<serve::frame> frames;
        for (;;) {
            auto [ec, n] = co_await pr->c->out.async_read_some(
                asio::buffer(buf), asio::as_tuple(asio::use_awaitable)
            );
            got.clear();
            if (!lines.feed(std::string_view(buf.data(), n), got)) {
                bad_frame(pr, codes::output_too_large, "a line over max-output");
                break;
            }
            const auto logged = logged_level();
            frames.clear();
            std::optional<std::string> bad;
            for (const auto line : got) {
                if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
                    continue;  // a blank line is no frame
                }
                auto parsed = serve::parse_frame(line, logged);
                if (auto* why = std::get_if<std::string>(&parsed)) {
                    bad = std::move(*why);  // the frames before it count, the rest not
                    break;
                }
                frames.push_back(std::move(std::get<serve::frame>(parsed)));
            }
            serve::coalesce_progress(frames);
            for (auto& f : frames) {
                on_frame(pr, std::move(f));
            }
            if (bad) {
                bad_frame(pr, codes::handler_error, *bad);
            }
            if (ec) {
                break;
            }
        }
    }

    /// The lowest level of a program's log frames that the worker's log shows.
    static serve::log_level logged_level() {
        switch (spdlog::get_level()) {
        case spdlog::level::trace:
        case spdlog::level::debug:
            return serve::log_level::debug;
        case spdlog::level::info:
            return serve::log_level::info;
        case spdlog::level::warn:
            return serve::log_level::warn;
        case spdlog::level::err:
            return serve::log_level::error;
        default:
            return serve::log_level::off;
        }
    }

    asio::awaitable<void> read_stderr(std::shared_ptr<proc> pr) {
        auto self = shared_from_this();
        std::array<char, 16384> buf{};
        std::string line;
        for (;;) {
            auto [ec, n] = co_await pr->c->err.async_read_some(
                asio::buffer(buf), asio::as_tuple(asio::use_awaitable)
            );
            for (std::size_t i = 0; i < n; ++i) {
                if (buf[i] != '\n' && line.size() < 4096) {
                    line += buf[i];
                    continue;
                }
                if (buf[i] != '\n') {
                    continue;  // the rest of a long line is cut
                }
                spdlog::info(
                    "exec type {} [{}] stderr: {}", p_.config.name, pr->c->program,
                    protocol::printable_utf8(line)
                );
                pr->stderr_tail += line;
                pr->stderr_tail += '\n';
                if (pr->stderr_tail.size() > 2 * stderr_tail_bytes) {
                    pr->stderr_tail.erase(0, pr->stderr_tail.size() - stderr_tail_bytes);
                }
                line.clear();
            }
            if (ec) {
                break;
            }
        }
        if (!line.empty()) {
            spdlog::info(
                "exec type {} [{}] stderr: {}", p_.config.name, pr->c->program,
                protocol::printable_utf8(line)
            );
            pr->stderr_tail += line;
        }
        pr->stderr_eof = true;
    }

    asio::awaitable<void> await_exit(std::shared_ptr<proc> pr) {
        auto self = shared_from_this();
        const auto st = co_await detail::wait_exit(pr->c);
        pr->start_timer.cancel();
        pr->grace_timer.cancel();
        pr->unread_at_exit = unread_bytes(pr->c->in);
        boost::system::error_code ignored;
        pr->c->in.close(ignored);
        // Its tree is dead: the pipes see EOF at once; let the readers take the last bytes
        // (stderr's end may tell which limit it met), a moment at most.
        co_await asio::post(*ex_, asio::use_awaitable);
        asio::steady_timer drained(*ex_);
        for (int i = 0; i < 100 && !pr->stderr_eof; ++i) {
            drained.expires_after(std::chrono::milliseconds(10));
            co_await drained.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        std::string how = !st.start_error.empty() ? st.start_error
                          : st.signal != 0 ? "killed by signal " + std::to_string(st.signal) +
                                                 " (" + signal_name(st.signal) + ")"
                                           : "exited with code " + std::to_string(st.exit_code);
        std::string tail = pr->stderr_tail;
        if (tail.size() > stderr_tail_bytes) {
            tail.erase(0, tail.size() - stderr_tail_bytes);
        }
        while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) {
            tail.pop_back();
        }
        procs_.erase(pr->id);
        const std::string printable = protocol::printable_utf8(tail);
        limit_evidence e;
        e.exit_code = st.start_error.empty() ? st.exit_code : -1;
        e.signal = st.signal;
        e.stopped = pr->retiring;
        e.cpu_used = st.cpu_used;
        e.oom_kills = st.oom_kills;
        e.pids_max = st.pids_max;
        e.stderr_tail = printable;
        const auto over = limit_exceeded(p_.config.limits, p_.plan, e);
        if (over) {
            spdlog::warn(
                "exec type {}: process {} went over a limit ({}): {}", p_.config.name,
                pr->c->program, over->code, over->message
            );
        }
        if (pr->current && !pr->current->result && !pr->current->cancel_sent &&
            pr->current->may_hand_back &&
            serve::frame_unread(pr->current->frame_at, pr->sent, pr->unread_at_exit)) {
            auto j = std::exchange(pr->current, nullptr);
            spdlog::warn(
                "exec type {}: process {} {} before it read task {}: replaced, the task goes to "
                "another process",
                p_.config.name, pr->c->program, how, j->id
            );
            j->hand_back();
            fsm_.exited(pr->id, false);
            arm_backoff();
        } else if (pr->current) {
            auto j = std::exchange(pr->current, nullptr);
            j->finish(
                over ? fail(over->code, over->message + " (while running the task)")
                     : fail(
                           codes::handler_error, "the program " + how + " while running the task" +
                                                     (tail.empty() ? "" : "; stderr: " + printable)
                       )
            );
            spdlog::warn(
                "exec type {}: process {} {} while running {}: replaced", p_.config.name,
                pr->c->program, how, j->id
            );
            fsm_.exited(pr->id, false);
            arm_backoff();
        } else if (!pr->ready && !stopping_) {
            on_start_failed(
                pr->id,
                pr->start_error.empty()
                    ? "it " + how + " before it said ready" +
                          (tail.empty() ? "" : "; stderr: " + protocol::printable_utf8(tail))
                    : pr->start_error
            );
        } else {
            if (!pr->retiring) {
                spdlog::warn(
                    "exec type {}: process {} {}: replaced", p_.config.name, pr->c->program, how
                );
            }
            fsm_.exited(pr->id, pr->retiring);
            arm_backoff();
        }
        if (stopped_ != nullptr) {
            stopped_->cancel();
        }
        pump();
    }

    program p_;
    pool_fsm fsm_;
    std::shared_ptr<type_health> health_;
    std::optional<asio::any_io_executor> ex_;
    std::optional<asio::steady_timer> backoff_;
    std::map<int, std::shared_ptr<proc>> procs_;
    std::deque<std::shared_ptr<waiter>> waiting_;
    int next_id_ = 1;
    bool stopping_ = false;
    asio::steady_timer* stopped_ = nullptr;  // the service's wake-up, while it runs
    std::string last_start_error_;
};

}  // namespace

void add_served_type(registry& reg, program p) {
    const std::string name = p.config.name;
    const type_limits limits{p.config.timeout, p.config.max_timeout};
    auto t = std::make_shared<served_type>(std::move(p), reg.health());
    reg.add_async(
        name, [t](async_call call) { return t->run(std::move(call)); }, limits
    );
    reg.add_service([t](std::stop_token stop) { return t->service(std::move(stop)); });
}

}  // namespace zkd::handlers::exec
