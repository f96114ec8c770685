// SPDX-License-Identifier: MIT
// The session's life: connecting (resolving the hosts, starting the C handle), its state
// and who waits on it, expiry, closing on the closer thread, and detaching from the client.
#include "zkco/detail/c_client.hpp"
#include "zkco/detail/core.hpp"
#include "zkco/detail/pending_op.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>

namespace asio = boost::asio;

namespace zkd::zkco::detail {

namespace {

std::string format_host(const asio::ip::address& addr, std::uint16_t port) {
    if (addr.is_v6()) {
        return "[" + addr.to_string() + "]:" + std::to_string(port);
    }
    return addr.to_string() + ":" + std::to_string(port);
}

}  // namespace

struct resolve_state {
    connect_string_parts parts;
    std::size_t next = 0;
    std::vector<std::string> hosts;
    error_code last_error;
};

void core::connect(handler<> h) {
    if (is_terminal(state_)) {
        post_result(ex_, std::move(h), terminal_error());
        return;
    }
    if (state_ == session_state::connected) {
        post_result(ex_, std::move(h), {});
        return;
    }
    connect_waiters_.push_back(add_op(std::move(h), no_values, 0));
    if (!started_) {
        start_session();
    }
}

void core::complete_connect_waiters(error_code ec) {
    for (const auto id : std::exchange(connect_waiters_, {})) {
        zk_event none;
        complete_op(id, ec, &none);
    }
}

void core::start_session() {
    started_ = true;
    auto parts = parse_connect_string(cfg_.connect_string);
    if (!parts) {
        started_ = false;
        spdlog::error("zk: invalid connect string '{}'", cfg_.connect_string);
        complete_connect_waiters(parts.error());
        return;
    }
    auto st = std::make_shared<resolve_state>();
    st->parts = std::move(*parts);
    resolve_next(std::move(st));
}

void core::resolve_next(std::shared_ptr<resolve_state> st) {
    while (st->next < st->parts.servers.size()) {
        const auto& server = st->parts.servers[st->next];
        error_code ec;
        const auto addr = asio::ip::make_address(server.host, ec);
        if (!ec) {
            st->hosts.push_back(format_host(addr, server.port));
            ++st->next;
            continue;
        }
        // getaddrinfo blocks; the resolver runs it on its own thread.
        resolver_->async_resolve(
            server.host, std::to_string(server.port),
            [w = weak_from_this(), st](error_code rec, asio::ip::tcp::resolver::results_type rs) {
                auto c = w.lock();
                if (!c || rec == asio::error::operation_aborted || is_terminal(c->state_)) {
                    return;
                }
                const auto& srv = st->parts.servers[st->next];
                if (rec) {
                    spdlog::warn("zk: cannot resolve '{}': {}", srv.host, rec.message());
                    st->last_error = rec;
                } else {
                    for (const auto& entry : rs) {
                        st->hosts.push_back(format_host(entry.endpoint().address(), srv.port));
                    }
                }
                ++st->next;
                c->resolve_next(st);
            }
        );
        return;
    }
    auto& hosts = st->hosts;
    std::sort(hosts.begin(), hosts.end());
    hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
    if (hosts.empty()) {
        started_ = false;
        complete_connect_waiters(st->last_error ? st->last_error : error_code(errc::bad_arguments));
        return;
    }
    std::string joined;
    for (const auto& h : hosts) {
        joined.append(joined.empty() ? "" : ",").append(h);
    }
    init_handle(joined + st->parts.chroot);
}

void core::init_handle(const std::string& hosts) {
    clientid_t id{};
    const clientid_t* idp = nullptr;
    if (cfg_.resume) {
        id.client_id = cfg_.resume->id;
        std::memcpy(
            id.passwd, cfg_.resume->password.data(),
            std::min(sizeof(id.passwd), cfg_.resume->password.size())
        );
        idp = &id;
    }
    sctx_ = new session_ctx{shared_from_this()};  // NOLINT(cppcoreguidelines-owning-memory)
    errno = 0;
    zh_ = zookeeper_init2(
        hosts.c_str(), on_session_event, static_cast<int>(cfg_.session_timeout.count()), idp, sctx_,
        0, on_client_log
    );
    if (zh_ == nullptr) {
        const int err = errno != 0 ? errno : EINVAL;
        delete std::exchange(sctx_, nullptr);  // NOLINT(cppcoreguidelines-owning-memory)
        started_ = false;
        spdlog::error("zk: cannot start a session with '{}': {}", hosts, std::strerror(err));
        complete_connect_waiters(error_code(err, boost::system::system_category()));
        return;
    }
    // Hosts are addresses already: there is nothing to resolve again, on any thread.
    zoo_set_servers_resolution_delay(zh_, -1);
    if (cfg_.auth) {
        const std::string cred = cfg_.auth->user + ":" + cfg_.auth->password;
        zoo_add_auth(zh_, "digest", cred.data(), data_len(cred), on_auth, nullptr);
    }
    spdlog::debug("zk: connecting to {}", hosts);
    pump();  // the first zookeeper_interest opens the connection
}

void core::set_state(session_state s) {
    state_ = s;
    ++generation_;
    for (const auto id : std::exchange(state_waiters_, {})) {
        zk_event none;
        complete_op(id, {}, &none);
    }
}

void core::wait_state(std::uint64_t seen, handler<state_change> h) {
    if (seen != generation_) {
        post_result(ex_, std::move(h), {}, std::tuple(state_change{state_, generation_}));
        return;
    }
    if (is_terminal(state_)) {
        post_result(ex_, std::move(h), terminal_error());  // nothing will ever change again
        return;
    }
    state_waiters_.push_back(add_op(
        std::move(h),
        [](core& c, std::uint64_t, error_code&, zk_event&) {
            return std::tuple(state_change{c.state(), c.generation()});
        },
        0
    ));
}

void core::arm_expiry_timer() {
    // The C client learns of expiry only when it reaches a server again; until then we
    // must assume the worst once the session timeout has passed (Curator TN14, Mesos).
    expiry_timer_->expires_after(negotiated_);
    expiry_timer_->async_wait([w = weak_from_this(), gen = generation_](error_code ec) {
        auto c = w.lock();
        if (ec || !c || c->state_ != session_state::disconnected || c->generation_ != gen) {
            return;
        }
        spdlog::warn(
            "zk: session 0x{:x} declared expired: disconnected for longer than its "
            "{} ms timeout",
            c->session_ ? c->session_->id : 0, c->negotiated_.count()
        );
        c->terminate(session_state::expired, errc::session_expired);
    });
}

void core::on_session(zk_event&& ev) {
    if (is_terminal(state_)) {
        return;
    }
    const int st = ev.code;
    if (st == ZOO_CONNECTED_STATE) {
        negotiated_ = ev.timeout;
        if (ev.session) {
            session_ = std::move(ev.session);
        }
        expiry_timer_->cancel();
        if (state_ != session_state::connected) {
            if (negotiated_ == cfg_.session_timeout) {
                spdlog::info(
                    "zk: session 0x{:x} connected (timeout {} ms)", session_ ? session_->id : 0,
                    negotiated_.count()
                );
            } else {
                // The server clamps to its [minSessionTimeout, maxSessionTimeout].
                spdlog::info(
                    "zk: session 0x{:x} connected (timeout {} ms: the server's limit; "
                    "{} ms asked)",
                    session_ ? session_->id : 0, negotiated_.count(), cfg_.session_timeout.count()
                );
            }
            set_state(session_state::connected);
        }
        complete_connect_waiters({});
    } else if (st == ZOO_EXPIRED_SESSION_STATE) {
        spdlog::warn("zk: session 0x{:x} expired", session_ ? session_->id : 0);
        terminate(session_state::expired, errc::session_expired);
    } else if (st == ZOO_AUTH_FAILED_STATE) {
        spdlog::error("zk: authentication failed");
        terminate(session_state::auth_failed, errc::auth_failed);
    } else if (state_ == session_state::connected) {
        // CONNECTING, ASSOCIATING, NOTCONNECTED or 0 between attempts: the link is down.
        spdlog::warn("zk: session 0x{:x} disconnected; reconnecting", session_ ? session_->id : 0);
        set_state(session_state::disconnected);
        arm_expiry_timer();
    }
}

void core::terminate(session_state s, error_code ec) {
    if (is_terminal(state_)) {
        return;
    }
    const auto mode = detached_ ? completion_mode::post : completion_mode::dispatch;
    if (expiry_timer_) {
        expiry_timer_->cancel();
    }
    if (resolver_) {
        resolver_->cancel();
    }
    // Watches nobody waits on keep the error for their next wait.
    for (auto& [id, entry] : watches_) {
        entry.ready.emplace(ec, watch_event{});
        entry.waiter = 0;
    }
    set_state(s);
    connect_waiters_.clear();
    observed_sets_.clear();  // their replies never come now
    set_waiters_.clear();    // their ops end with the others below
    auto ops = std::exchange(ops_, {});
    for (auto& [id, op] : ops) {
        op->finish(*this, ec, nullptr, mode);
    }
    release_handle();
}

void core::release_handle() {
    _zhandle* zh = std::exchange(zh_, nullptr);
    session_ctx* sctx = std::exchange(sctx_, nullptr);
    if (zh == nullptr) {
        return;
    }
    stop_io();  // from here on only the closer thread touches the handle
    closing_ = true;
    // Until the closer is done, zookeeper_close's callbacks may still post to the executor:
    // keep it running. A detached core posts nothing, and must not keep anything running.
    asio::any_io_executor work;
    {
        const std::lock_guard lock(inbox_mu_);
        if (!detached_) {
            work = asio::prefer(ex_, asio::execution::outstanding_work.tracked);
        }
    }
    auto close = [zh, sctx, work = std::move(work)]() mutable {
        // Blocks up to ~4.5 s on a connected handle whose server does not answer.
        zookeeper_close(zh);
        auto owner = std::move(sctx->owner);
        delete sctx;  // NOLINT(cppcoreguidelines-owning-memory)
        owner->closer_done(std::move(work));
    };
    try {
        std::thread(std::move(close)).detach();
    } catch (const std::system_error& e) {
        spdlog::warn("zk: no thread for a background close ({}); closing inline", e.what());
        close();
    }
}

void core::closer_done(asio::any_io_executor work) {
    const std::lock_guard lock(inbox_mu_);
    if (detached_) {
        return;
    }
    // The work guard goes with the handler, so the executor never looks idle in between.
    asio::post(ex_, [self = shared_from_this(), work = std::move(work)] { self->on_closed(); });
}

void core::on_closed() {
    closing_ = false;
    for (auto& h : std::exchange(close_waiters_, {})) {
        auto ex = asio::get_associated_executor(h, ex_);
        asio::dispatch(ex, std::move(h));
    }
}

void core::close(asio::any_completion_handler<void()> h) {
    if (state_ == session_state::connected && requests_in_flight_ > 0 && !force_close_) {
        // Let what is in flight be answered first (bounded): a write sent without waiting
        // (a consumed result's delete) would otherwise be lost, and the C client leaks the
        // requests zookeeper_close finds pending.
        settle_waiters_.push_back(std::move(h));
        if (!settle_timer_) {
            settle_timer_ = std::make_unique<asio::steady_timer>(
                ex_,
                std::min<std::chrono::milliseconds>(cfg_.session_timeout, std::chrono::seconds(2))
            );
            settle_timer_->async_wait([w = weak_from_this()](error_code ec) {
                if (auto c = w.lock(); c && !ec) {
                    c->settled();
                }
            });
        }
        return;
    }
    if (!is_terminal(state_)) {
        spdlog::debug("zk: closing session 0x{:x}", session_ ? session_->id : 0);
        terminate(session_state::closed, errc::closing);
    }
    if (closing_) {
        close_waiters_.push_back(std::move(h));
        return;
    }
    post_void(ex_, std::move(h));
}

void core::settled() {
    if (settle_timer_) {
        settle_timer_->cancel();
        settle_timer_.reset();
    }
    force_close_ = true;
    for (auto& h : std::exchange(settle_waiters_, {})) {
        close(std::move(h));
    }
}

void core::detach() noexcept {
    {
        const std::lock_guard lock(inbox_mu_);
        detached_ = true;
        inbox_.clear();
    }
    terminate(session_state::closed, errc::closing);
    settle_timer_.reset();
    for (auto& h : std::exchange(settle_waiters_, {})) {
        post_void(ex_, std::move(h));
    }
    for (auto& h : std::exchange(close_waiters_, {})) {
        post_void(ex_, std::move(h));
    }
    // Anything left waits on a handle that is gone.
    for (auto& [id, op] : std::exchange(ops_, {})) {
        op->finish(*this, errc::closing, nullptr, completion_mode::post);
    }
    watches_.clear();
    expiry_timer_.reset();
    resolver_.reset();
    stop_io();
    io_timer_.reset();
}

}  // namespace zkd::zkco::detail
