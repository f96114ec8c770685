// SPDX-License-Identifier: MIT
// The core's hub: the operations waiting for completions and the watches, and the inbox
// the C client's callbacks fill and the executor drains into them, in arrival order.
#include "zkco/detail/core.hpp"

#include "zkco/detail/c_client.hpp"
#include "zkco/detail/pending_op.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <mutex>
#include <tuple>
#include <utility>

namespace asio = boost::asio;

namespace zkd::zkco::detail {

core::core(asio::any_io_executor ex, zkco::config cfg)
    : ex_(std::move(ex)),
      cfg_(std::move(cfg)),
      expiry_timer_(std::make_unique<asio::steady_timer>(ex_)),
      resolver_(std::make_unique<asio::ip::tcp::resolver>(ex_)),
      io_timer_(std::make_unique<asio::steady_timer>(ex_)) {
    if (!cfg_.default_acl.empty()) {
        default_acl_ = cfg_.default_acl;
    } else {
        default_acl_ = cfg_.auth ? creator_all_acl() : open_acl();
    }
    init_client_logging();
}

core::~core() = default;

error_code core::terminal_error() const noexcept {
    switch (state_) {
    case session_state::expired:
        return errc::session_expired;
    case session_state::auth_failed:
        return errc::auth_failed;
    case session_state::closed:
        return errc::closing;
    default:
        return errc::invalid_state;
    }
}

void core::complete_op(std::uint64_t id, error_code ec, zk_event* ev, completion_mode mode) {
    const auto it = ops_.find(id);
    if (it == ops_.end()) {
        return;  // abandoned: the late completion is dropped
    }
    auto op = std::move(it->second);
    ops_.erase(it);
    op->finish(*this, ec, ev, mode);
}

void core::abandon(std::uint64_t id) {
    // Called from a cancellation slot, i.e. from inside the canceller's code: post.
    complete_op(id, asio::error::operation_aborted, nullptr, completion_mode::post);
}

void core::fail_start(std::uint64_t id, int rc) {
    complete_op(id, from_zk_rc(rc), nullptr, completion_mode::post);
    note_silent_disconnect();  // a refused request may have tried to send the queue
    kick();
}

std::uint64_t core::new_watch() {
    const std::uint64_t id = ++next_id_;
    watches_.emplace(id, watch_entry{});
    ++counters_.watches;
    return id;
}

// Events from the C client.

void core::push(zk_event&& ev) {
    const std::lock_guard lock(inbox_mu_);
    if (detached_) {
        return;
    }
    inbox_.push_back(std::move(ev));
    // One post for a whole burst of replies: the drain takes everything queued.
    if (!drain_posted_) {
        drain_posted_ = true;
        asio::post(ex_, [self = shared_from_this()] { self->drain(); });
    }
}

void core::drain() {
    {
        const std::lock_guard lock(inbox_mu_);
        draining_.swap(inbox_);
        drain_posted_ = false;
    }
    for (auto& ev : draining_) {
        switch (ev.k) {
        case zk_event::kind::reply:
            if (requests_in_flight_ > 0) {
                --requests_in_flight_;
            }
            on_reply(std::move(ev));
            if (requests_in_flight_ == 0 && !settle_waiters_.empty()) {
                settled();
            }
            break;
        case zk_event::kind::watch:
            on_watch(std::move(ev));
            break;
        case zk_event::kind::session:
            on_session(std::move(ev));
            break;
        }
    }
    draining_.clear();
}

void core::on_reply(zk_event&& ev) {
    // A whole request failing with ZRUNTIMEINCONSISTENCY means the library dropped the
    // connection on an out-of-order reply (note_silent_disconnect): the request may have
    // been applied, which is what connection loss says.
    const int code = ev.code == ZRUNTIMEINCONSISTENCY ? ZCONNECTIONLOSS : ev.code;
    if (!observed_sets_.empty()) {
        notify_sets(ev);  // before the multi's own handler (observe_sets)
    }
    complete_op(ev.id, from_zk_rc(code), &ev);
}

void core::on_watch(zk_event&& ev) {
    const auto it = watches_.find(ev.id);
    if (it == watches_.end()) {
        return;  // its watch object is gone
    }
    error_code ec;
    event_type type = event_type::changed;
    if (ev.code == ZOO_CREATED_EVENT) {
        type = event_type::created;
    } else if (ev.code == ZOO_DELETED_EVENT) {
        type = event_type::deleted;
    } else if (ev.code == ZOO_CHANGED_EVENT) {
        type = event_type::changed;
    } else if (ev.code == ZOO_CHILD_EVENT) {
        type = event_type::child;
    } else {
        ec = errc::no_watcher;  // ZOO_NOTWATCHING_EVENT: the server dropped it
    }
    const std::uint64_t waiter = it->second.waiter;
    if (waiter != 0 && ops_.contains(waiter)) {
        watches_.erase(it);
        zk_event out;
        out.code = static_cast<int>(type);
        out.text = std::move(ev.text);
        complete_op(waiter, ec, &out);
    } else {
        it->second.waiter = 0;
        it->second.ready.emplace(ec, watch_event{type, std::move(ev.text)});
    }
}

void core::watch_wait(std::uint64_t id, handler<watch_event> h) {
    const auto it = watches_.find(id);
    if (it == watches_.end()) {
        post_result(ex_, std::move(h), errc::no_watcher);
        return;
    }
    auto& entry = it->second;
    if (entry.waiter != 0 && ops_.contains(entry.waiter)) {
        post_result(ex_, std::move(h), asio::error::already_started);
        return;
    }
    if (entry.ready) {
        auto [ec, event] = std::move(*entry.ready);
        // An error (expiry, close) stays for later waits; an event is delivered once.
        if (!ec) {
            watches_.erase(it);
        }
        post_result(ex_, std::move(h), ec, std::tuple(std::move(event)));
        return;
    }
    entry.waiter = add_op(std::move(h), watch_event_value, 0);
}

void core::watch_release(std::uint64_t id) noexcept {
    const auto it = watches_.find(id);
    if (it == watches_.end()) {
        return;
    }
    const std::uint64_t waiter = it->second.waiter;
    watches_.erase(it);
    if (waiter != 0) {
        abandon(waiter);
    }
}

}  // namespace zkd::zkco::detail
