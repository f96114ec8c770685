// SPDX-License-Identifier: MIT
// Private to zkco: the session state behind a client. Everything here runs on the
// client's executor, which drives the single-threaded C client (zookeeper_st), except
// push(), which the background closer's zookeeper_close also calls. A C completion only
// queues what it got; the executor hands it over, or drops it once the caller has gone.
// Defined by concern: core.cpp (pending ops, watches, the inbox), session.cpp, io.cpp,
// ops.cpp and callbacks.cpp (the C side, with c_client.hpp); pending_op.hpp is shared.
#pragma once

#include "zkco/config.hpp"
#include "zkco/error.hpp"
#include "zkco/types.hpp"
#include "zkco/watch.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

// The C client's handle, forward-declared so that only the core's .cpp files include
// zookeeper.h (through c_client.hpp).
struct _zhandle;  // NOLINT(bugprone-reserved-identifier): the C client's own name

namespace zkd::zkco::detail {

template <class... Args>
using handler = boost::asio::any_completion_handler<void(error_code, Args...)>;

/// What a ZooKeeper thread hands over: a reply, a watch firing or a session event. Data
/// is copied out of the C client's buffers, which die when its callback returns.
struct zk_event {
    enum class kind : std::uint8_t { reply, watch, session };
    kind k = kind::reply;
    std::uint64_t id = 0;  ///< reply: op id; watch: watch id
    int code = 0;          ///< reply: rc; watch: event type; session: state
    std::string text;      ///< reply: data or created path; watch: path
    std::optional<zkco::stat> st;
    std::vector<std::string> names;
    std::vector<op_result> multi;
    acl_list acl;                           ///< reply of get_acl
    std::chrono::milliseconds timeout{0};   ///< session: negotiated timeout
    std::optional<session_handle> session;  ///< session: id and password when connected
};

struct pending_op;
struct session_ctx;
struct resolve_state;

/// How an operation's handler is called: inline when we are already in a handler of the
/// executor (a reply being drained), posted when we may be inside user code (a
/// cancellation, the client's destructor, an immediate error).
enum class completion_mode : std::uint8_t { dispatch, post };

class core : public std::enable_shared_from_this<core> {
public:
    core(boost::asio::any_io_executor ex, zkco::config cfg);
    ~core();
    core(const core&) = delete;
    core& operator=(const core&) = delete;

    const boost::asio::any_io_executor& executor() const noexcept { return ex_; }
    const zkco::config& config() const noexcept { return cfg_; }
    session_state state() const noexcept { return state_; }
    std::uint64_t generation() const noexcept { return generation_; }
    std::optional<session_handle> session() const { return session_; }
    std::chrono::milliseconds negotiated_timeout() const noexcept { return negotiated_; }
    const client_counters& counters() const noexcept { return counters_; }

    void connect(handler<> h);
    void wait_state(std::uint64_t seen, handler<state_change> h);
    void create(std::string path, std::string data, create_options opts, handler<std::string> h);
    void remove(std::string path, std::int32_t version, handler<> h);
    void exists(std::string path, handler<std::optional<zkco::stat>> h);
    void watch_exists(std::string path, handler<std::optional<zkco::stat>, watch> h);
    void get(std::string path, handler<node> h);
    void watch_get(std::string path, handler<node, watch> h);
    void set(std::string path, std::string data, std::int32_t version, handler<zkco::stat> h);
    void get_children(std::string path, handler<children> h);
    void watch_children(std::string path, handler<children, watch> h);
    void get_acl(std::string path, handler<node_acl> h);
    void multi(std::vector<multi_op> ops, handler<std::vector<op_result>> h);
    void sync(std::string path, handler<> h);
    void close(boost::asio::any_completion_handler<void()> h);

    void watch_wait(std::uint64_t id, handler<watch_event> h);
    void watch_release(std::uint64_t id) noexcept;

    /// client::observe_sets: registers `f` for the committed sets of `path`; its id.
    std::uint64_t add_set_observer(
        std::string path, std::function<void(std::string_view, const zkco::stat&)> f
    );
    void remove_set_observer(std::uint64_t id) noexcept;
    /// client::own_sets_in_flight: a multi sent with an observed set of `path` awaits its
    /// answer.
    [[nodiscard]] bool sets_in_flight(std::string_view path) const noexcept;
    /// The id of the last such multi (ids grow), 0 for none.
    [[nodiscard]] std::uint64_t last_set_in_flight(std::string_view path) const noexcept;
    /// client::own_sets_answered: `h` completes, posted, once those in flight now are
    /// answered.
    void wait_sets(std::string path, handler<> h);

    /// The client is going away: fail everything, stop posting, close in the background.
    void detach() noexcept;

    /// From the C client's callbacks (on the executor, or on the closer thread): queue an
    /// event for the executor.
    void push(zk_event&& ev);
    /// From the background closer thread, once zookeeper_close has returned.
    void closer_done(boost::asio::any_io_executor work);

    /// Makes the watch object handed to the user for watch `id` (used by op conversions).
    watch make_watch(std::uint64_t id) { return watch(shared_from_this(), id); }
    void forget_watch(std::uint64_t id) noexcept { watches_.erase(id); }

private:
    struct watch_entry {
        std::optional<std::pair<error_code, watch_event>> ready;
        std::uint64_t waiter = 0;  // op id of a pending watch::async_wait
    };

    template <class... Args>
    bool check_usable(handler<Args...>& h, std::string_view path, std::size_t request_bytes = 0);
    template <class... Args, class Convert>
    std::uint64_t add_op(handler<Args...> h, Convert convert, std::uint64_t watch_id);
    void complete_op(
        std::uint64_t id,
        error_code ec,
        zk_event* ev,
        completion_mode mode = completion_mode::dispatch
    );
    void fail_start(std::uint64_t id, int rc);
    /// A multi's reply: its observed sets (observe_sets) go to their observers when it
    /// committed.
    void notify_sets(const zk_event& ev);
    /// Completes (posted) the wait_sets waiters whose path has no observed multi in flight.
    void release_set_waiters();
    std::uint64_t new_watch();
    error_code terminal_error() const noexcept;

    void start_session();
    void resolve_next(std::shared_ptr<resolve_state> st);
    void init_handle(const std::string& hosts);
    void drain();
    void on_reply(zk_event&& ev);
    void on_watch(zk_event&& ev);
    void on_session(zk_event&& ev);
    void set_state(session_state s);
    void terminate(session_state s, error_code ec);
    void abandon(std::uint64_t id);
    void release_handle();
    void on_closed();
    void settled();  // the wait for requests in flight is over: close now
    void complete_connect_waiters(error_code ec);
    void arm_expiry_timer();

    // The C client's I/O, driven here: zookeeper_interest says which socket, which events
    // and how long; the executor waits for them on a dup of that socket (the library closes
    // its socket on errors, and the next one may get the same number), then calls
    // zookeeper_process, whose callbacks run at once, on this thread.
    void pump();            // zookeeper_interest, then (re)arm the waits it asks for
    void kick();            // after a request: pump once this turn (its send may not have finished)
    void before_request();  // read what the socket holds before a request is sent
    void sent();            // a request was handed to the C client
    void cork(bool on);     // hold (or let go) the socket's sends: one packet per turn
    void note_silent_disconnect();
    void process_reads();
    void watch_socket(int fd);
    void arm_socket_wait(int events);
    void on_socket(int events, std::uint64_t gen, error_code ec);
    void on_io_timer(std::uint64_t gen, error_code ec);
    void stop_io();

    boost::asio::any_io_executor ex_;
    zkco::config cfg_;
    acl_list default_acl_;

    // The C handle and the context its callbacks reach us through; both are handed to the
    // closer thread, which frees them after zookeeper_close returns.
    _zhandle* zh_ = nullptr;
    session_ctx* sctx_ = nullptr;

    session_state state_ = session_state::connecting;
    std::uint64_t generation_ = 0;
    bool started_ = false;
    bool closing_ = false;  // a closer thread is running
    // Requests handed to the C client and not yet answered; close() waits (bounded) for
    // them to be answered before closing.
    std::size_t requests_in_flight_ = 0;
    bool force_close_ = false;  // the wait is over
    std::vector<boost::asio::any_completion_handler<void()>> settle_waiters_;
    std::unique_ptr<boost::asio::steady_timer> settle_timer_;
    std::chrono::milliseconds negotiated_{0};
    std::optional<session_handle> session_;
    client_counters counters_;

    std::uint64_t next_id_ = 0;
    std::unordered_map<std::uint64_t, std::unique_ptr<pending_op>> ops_;
    std::unordered_map<std::uint64_t, watch_entry> watches_;
    std::vector<std::uint64_t> state_waiters_;    // op ids
    std::vector<std::uint64_t> connect_waiters_;  // op ids
    std::vector<boost::asio::any_completion_handler<void()>> close_waiters_;

    // observe_sets: the observers by path, and the sets of each multi in flight that had
    // observers when it was sent (by op id): the op's index, its path and its data.
    using set_callback = std::function<void(std::string_view, const zkco::stat&)>;
    struct set_observer_entry {
        std::uint64_t id = 0;
        std::shared_ptr<set_callback> f;
    };
    struct observed_set {
        std::size_t index = 0;
        std::string path;
        std::string data;
    };
    std::unordered_map<std::string, std::vector<set_observer_entry>> set_observers_;
    std::unordered_map<std::uint64_t, std::vector<observed_set>> observed_sets_;
    // wait_sets: the path each waiter waits for, the last multi in flight for it when the
    // wait began, and the waiter's op id.
    struct set_waiter {
        std::string path;
        std::uint64_t last = 0;
        std::uint64_t op = 0;
    };
    std::vector<set_waiter> set_waiters_;

    // Reset on detach(), so that a core freed later on the closer thread touches no
    // io_context that may be gone by then.
    std::unique_ptr<boost::asio::steady_timer> expiry_timer_;
    std::unique_ptr<boost::asio::ip::tcp::resolver> resolver_;
    std::unique_ptr<boost::asio::steady_timer> io_timer_;

    // The I/O the executor waits for on the C client's behalf (pump()).
    std::unique_ptr<boost::asio::posix::stream_descriptor> socket_;  // a dup
    int socket_fd_ = -1;              // the library's descriptor the dup was made of
    std::uint64_t socket_inode_ = 0;  // and its inode: the number alone may be reused
    std::uint64_t socket_gen_ = 0;    // waits of an older dup are stale
    bool read_armed_ = false;
    bool write_armed_ = false;
    bool pump_posted_ = false;
    bool corked_ = false;
    std::uint64_t io_timer_gen_ = 0;
    bool io_timer_armed_ = false;
    std::chrono::steady_clock::time_point io_deadline_{};

    // Filled by the C client's callbacks, drained on the executor in arrival order (which
    // keeps ZooKeeper's promise that a watch event is seen before the data that triggered
    // it). Callbacks only queue: a handler run from inside zookeeper_process could close the
    // handle under it.
    std::mutex inbox_mu_;
    std::vector<zk_event> inbox_;
    std::vector<zk_event> draining_;
    bool drain_posted_ = false;
    bool detached_ = false;
};

}  // namespace zkd::zkco::detail
