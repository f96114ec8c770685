// SPDX-License-Identifier: MIT
#pragma once

#include "zkco/config.hpp"
#include "zkco/error.hpp"
#include "zkco/types.hpp"
#include "zkco/watch.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::zkco {

namespace detail {
class core;
}

/// A registration made by client::observe_sets: it lasts until this object is destroyed
/// (or the client is).
class set_observer {
public:
    set_observer() noexcept = default;
    set_observer(set_observer&& other) noexcept;
    set_observer& operator=(set_observer&& other) noexcept;
    set_observer(const set_observer&) = delete;
    set_observer& operator=(const set_observer&) = delete;
    ~set_observer();

private:
    friend class client;
    set_observer(std::weak_ptr<detail::core> core, std::uint64_t id) noexcept
        : core_(std::move(core)), id_(id) {}
    void release() noexcept;

    std::weak_ptr<detail::core> core_;
    std::uint64_t id_ = 0;
};

/// One ZooKeeper session, driven from one executor.
///
/// Every operation comes in two forms: `async_x(..., token)` for any Asio completion token,
/// and `x(...)`, a coroutine yielding `result<T>` (expected ZooKeeper outcomes are values,
/// never exceptions). Completions always run on the handler's executor, never on a
/// ZooKeeper client thread. Use a client only from its executor (a single-threaded
/// io_context or a strand); it is not thread-safe, like an Asio socket.
///
/// Per-operation cancellation: terminal and partial abandon the wait and complete with
/// operation_aborted; a request already handed to ZooKeeper may still be applied, so the
/// outcome of a cancelled write is unknown (condition::retryable). Total is not supported.
///
/// Lifetimes: the client must outlive the coroutines that use it. Destroying it completes
/// pending operations with `closing` and closes the session on a background thread.
/// Expiry is final: make a new client for a new session.
class client {
public:
    using executor_type = boost::asio::any_io_executor;

    client(executor_type ex, config cfg);
    client(client&&) noexcept;
    client& operator=(client&&) noexcept;
    client(const client&) = delete;
    client& operator=(const client&) = delete;
    ~client();

    executor_type get_executor() const noexcept;
    const zkco::config& config() const noexcept;
    session_state state() const noexcept;
    /// Counts state transitions; pass it to async_wait_state.
    std::uint64_t state_generation() const noexcept;
    /// The session's id and password once connected (to attach another handle to it).
    std::optional<session_handle> session() const;
    /// The timeout the server granted (0 before the first connect).
    std::chrono::milliseconds negotiated_timeout() const noexcept;
    client_counters counters() const noexcept;

    /// Starts the session (resolving hosts off the event loop) if not started, and waits
    /// until connected. Errors: bad_arguments (connect string), a resolver error, the
    /// terminal state's error. Cancellation abandons the wait; the session keeps trying.
    template <class CompletionToken>
    auto async_connect(CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            [this](auto h) { start_connect(std::move(h)); }, token
        );
    }

    /// Completes as soon as state_generation() differs from `seen`: yields the state and
    /// generation now (intermediate states may be skipped, never a change). Signature:
    /// void(error_code, state_change).
    template <class CompletionToken>
    auto async_wait_state(std::uint64_t seen, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, state_change)>(
            [this](auto h, std::uint64_t s) { start_wait_state(s, std::move(h)); }, token, seen
        );
    }

    /// Creates a node. Yields the created path (with the counter for sequential modes).
    /// Errors: node_exists, no_node (parent), no_children_for_ephemerals, unimplemented (TTL
    /// without extended types), condition::retryable.
    template <class CompletionToken>
    auto async_create(
        std::string path, std::string data, create_options opts, CompletionToken&& token
    ) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, std::string)>(
            [this](auto h, std::string p, std::string d, create_options o) {
                start_create(std::move(p), std::move(d), std::move(o), std::move(h));
            },
            token, std::move(path), std::move(data), std::move(opts)
        );
    }

    /// Deletes a node if its version matches (any_version: any). Errors: no_node,
    /// bad_version, not_empty, condition::retryable.
    template <class CompletionToken>
    auto async_remove(std::string path, std::int32_t version, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            [this](auto h, std::string p, std::int32_t v) {
                start_remove(std::move(p), v, std::move(h));
            },
            token, std::move(path), version
        );
    }

    /// Yields the node's stat, or nullopt if it does not exist (not an error).
    template <class CompletionToken>
    auto async_exists(std::string path, CompletionToken&& token) {
        return boost::asio::async_initiate<
            CompletionToken, void(error_code, std::optional<zkco::stat>)>(
            [this](auto h, std::string p) { start_exists(std::move(p), std::move(h)); }, token,
            std::move(path)
        );
    }

    /// Reads a node's data and stat. Errors: no_node.
    template <class CompletionToken>
    auto async_get(std::string path, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, node)>(
            [this](auto h, std::string p) { start_get(std::move(p), std::move(h)); }, token,
            std::move(path)
        );
    }

    /// Writes a node's data if its version matches. Yields the new stat. Errors: no_node,
    /// bad_version, condition::retryable.
    template <class CompletionToken>
    auto async_set(
        std::string path, std::string data, std::int32_t version, CompletionToken&& token
    ) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, zkco::stat)>(
            [this](auto h, std::string p, std::string d, std::int32_t v) {
                start_set(std::move(p), std::move(d), v, std::move(h));
            },
            token, std::move(path), std::move(data), version
        );
    }

    /// Lists a node's children (names, unsorted) with its stat. Errors: no_node.
    template <class CompletionToken>
    auto async_get_children(std::string path, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, children)>(
            [this](auto h, std::string p) { start_get_children(std::move(p), std::move(h)); },
            token, std::move(path)
        );
    }

    /// Reads a node's ACL and stat. Errors: no_node.
    template <class CompletionToken>
    auto async_get_acl(std::string path, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, node_acl)>(
            [this](auto h, std::string p) { start_get_acl(std::move(p), std::move(h)); }, token,
            std::move(path)
        );
    }

    /// Runs the ops as one transaction: all apply or none. Yields one op_result per op
    /// whenever the server answered (also on failure: the failed op has its code, the others
    /// runtime_inconsistency); empty on connection loss. TTL creates give unimplemented
    /// (the 3.8 C client cannot send them in a multi).
    template <class CompletionToken>
    auto async_multi(std::vector<multi_op> ops, CompletionToken&& token) {
        return boost::asio::async_initiate<
            CompletionToken, void(error_code, std::vector<op_result>)>(
            [this](auto h, std::vector<multi_op> o) { start_multi(std::move(o), std::move(h)); },
            token, std::move(ops)
        );
    }

    /// Waits until the server this session talks to has caught up with the leader.
    template <class CompletionToken>
    auto async_sync(std::string path, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            [this](auto h, std::string p) { start_sync(std::move(p), std::move(h)); }, token,
            std::move(path)
        );
    }

    /// exists() that also arms a watch: fires on create, delete or change. Works on a
    /// missing node (fires when it is created).
    template <class CompletionToken>
    auto async_watch_exists(std::string path, CompletionToken&& token) {
        return boost::asio::async_initiate<
            CompletionToken, void(error_code, std::optional<zkco::stat>, watch)>(
            [this](auto h, std::string p) { start_watch_exists(std::move(p), std::move(h)); },
            token, std::move(path)
        );
    }

    /// get() that also arms a watch: fires on change or delete. No watch on error.
    template <class CompletionToken>
    auto async_watch_get(std::string path, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, node, watch)>(
            [this](auto h, std::string p) { start_watch_get(std::move(p), std::move(h)); }, token,
            std::move(path)
        );
    }

    /// get_children() that also arms a watch: fires when a child is added or removed, or
    /// the node is deleted. No watch on error.
    template <class CompletionToken>
    auto async_watch_children(std::string path, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, children, watch)>(
            [this](auto h, std::string p) { start_watch_children(std::move(p), std::move(h)); },
            token, std::move(path)
        );
    }

    /// Closes the session. While connected, requests already sent are first given up to
    /// min(session timeout, 2 s) to be answered (so a write sent without waiting still
    /// lands); then pending operations and watches complete with `closing`, the C client's
    /// blocking close runs on a background thread, and this completes when it is done.
    /// Never fails. Signature: void().
    template <class CompletionToken>
    auto async_close(CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void()>(
            [this](auto h) { start_close(std::move(h)); }, token
        );
    }

    // --- the same as coroutines yielding result<T> ------------------------------------
    // wait_state, like watch::changed, ends at once with operation_aborted in a coroutine
    // cancelled before the call.

    boost::asio::awaitable<result<void>> connect();
    boost::asio::awaitable<result<state_change>> wait_state(std::uint64_t seen);
    boost::asio::awaitable<result<std::string>> create(
        std::string path, std::string data = {}, create_options opts = {}
    );
    boost::asio::awaitable<result<void>> remove(
        std::string path, std::int32_t version = any_version
    );
    boost::asio::awaitable<result<std::optional<zkco::stat>>> exists(std::string path);
    boost::asio::awaitable<result<node>> get(std::string path);
    boost::asio::awaitable<result<zkco::stat>> set(
        std::string path, std::string data, std::int32_t version = any_version
    );
    boost::asio::awaitable<result<children>> get_children(std::string path);
    boost::asio::awaitable<result<node_acl>> get_acl(std::string path);
    boost::asio::awaitable<multi_result> multi(std::vector<multi_op> ops);
    boost::asio::awaitable<result<void>> sync(std::string path);
    boost::asio::awaitable<result<watched<std::optional<zkco::stat>>>> watch_exists(std::string path
    );
    boost::asio::awaitable<result<watched<node>>> watch_get(std::string path);
    boost::asio::awaitable<result<watched<children>>> watch_children(std::string path);
    boost::asio::awaitable<void> close();

    /// What observe_sets calls: the data a set wrote and the node's stat right after it.
    using set_callback = std::function<void(std::string_view data, const zkco::stat& st)>;
    /// Until the returned object is destroyed, calls `f` for each `set` of `path` in a
    /// multi of this client that the server committed: the data it wrote and the node's
    /// stat right after the transaction, which is what a read at that moment would have
    /// returned. A reader following `path` so learns of its own session's writes without
    /// reading them back. Called on the executor, right before the multi's own handler, so
    /// in the order of the server's answers (after the watch events they triggered); a
    /// multi sent before the call is not observed, nor one whose outcome is unknown.
    [[nodiscard]] set_observer observe_sets(std::string path, set_callback f);

    /// True while a multi of this client that sets `path` awaits its answer (one sent while
    /// an observer of `path` was registered, observe_sets). A watch of `path` that fires
    /// meanwhile mostly fired for it, and the answer brings the change.
    [[nodiscard]] bool own_sets_in_flight(std::string_view path) const;
    /// Completes once the multis own_sets_in_flight(path) counts now are answered (not
    /// those sent later): at once when there are none, else posted after the last answer,
    /// so after whatever its observers and handler ran (and posted before). A follower of
    /// `path` sharing the session with its writer reads `path` again from here, behind the
    /// writes that answer called for: the server answers a session's requests in order, and
    /// a read sent ahead of a write delays it. Errors: the session's end, operation_aborted
    /// when cancelled.
    boost::asio::awaitable<result<void>> own_sets_answered(std::string path);

private:
    template <class... Args>
    using handler = boost::asio::any_completion_handler<void(error_code, Args...)>;

    void start_connect(handler<> h);
    void start_wait_state(std::uint64_t seen, handler<state_change> h);
    void start_create(
        std::string path, std::string data, create_options opts, handler<std::string> h
    );
    void start_remove(std::string path, std::int32_t version, handler<> h);
    void start_exists(std::string path, handler<std::optional<zkco::stat>> h);
    void start_watch_exists(std::string path, handler<std::optional<zkco::stat>, zkco::watch> h);
    void start_get(std::string path, handler<node> h);
    void start_watch_get(std::string path, handler<node, zkco::watch> h);
    void start_set(std::string path, std::string data, std::int32_t version, handler<zkco::stat> h);
    void start_get_children(std::string path, handler<children> h);
    void start_watch_children(std::string path, handler<children, zkco::watch> h);
    void start_get_acl(std::string path, handler<node_acl> h);
    void start_multi(std::vector<multi_op> ops, handler<std::vector<op_result>> h);
    void start_sync(std::string path, handler<> h);
    void start_own_sets_answered(std::string path, handler<> h);
    void start_close(boost::asio::any_completion_handler<void()> h);

    std::shared_ptr<detail::core> core_;
};

}  // namespace zkd::zkco
