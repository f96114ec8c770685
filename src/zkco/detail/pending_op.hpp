// SPDX-License-Identifier: MIT
// Private to the core's .cpp files: an operation waiting for its completion, how its handler
// is called, and the conversions from a reply to the handler's arguments.
#pragma once

#include "zkco/detail/core.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace zkd::zkco::detail {

template <class... Args>
void invoke(
    const boost::asio::any_io_executor& io_ex,
    handler<Args...> h,
    error_code ec,
    std::tuple<Args...> args,
    completion_mode mode
) {
    auto ex = boost::asio::get_associated_executor(h, io_ex);
    auto fn = [h = std::move(h), ec, args = std::move(args)]() mutable {
        std::apply([&](auto&&... a) { std::move(h)(ec, std::move(a)...); }, std::move(args));
    };
    if (mode == completion_mode::dispatch) {
        boost::asio::dispatch(ex, std::move(fn));
    } else {
        // The handler's executor type-erased as any_completion_executor cannot be posted to
        // (no blocking.never); hop through ours, then dispatch to it.
        boost::asio::post(io_ex, [ex, fn = std::move(fn)]() mutable {
            boost::asio::dispatch(ex, std::move(fn));
        });
    }
}

/// Calls a void() handler through its executor, after a trip through `io_ex`.
inline void post_void(
    const boost::asio::any_io_executor& io_ex, boost::asio::any_completion_handler<void()> h
) {
    auto ex = boost::asio::get_associated_executor(h, io_ex);
    boost::asio::post(io_ex, [ex, h = std::move(h)]() mutable {
        boost::asio::dispatch(ex, std::move(h));
    });
}

template <class... Args>
void post_result(
    const boost::asio::any_io_executor& io_ex,
    handler<Args...> h,
    error_code ec,
    std::tuple<Args...> args = {}
) {
    invoke(io_ex, std::move(h), ec, std::move(args), completion_mode::post);
}

/// An operation waiting for its completion: a ZooKeeper reply, or an event we synthesize
/// (connected, a state change, a watch firing).
struct pending_op {
    explicit pending_op(std::uint64_t watch) : watch_id(watch) {}
    virtual ~pending_op() = default;
    pending_op(const pending_op&) = delete;
    pending_op& operator=(const pending_op&) = delete;

    /// Calls the handler with values converted from `ev`, or defaults when `ev` is null
    /// (aborted, failed before an answer).
    virtual void finish(core& c, error_code ec, zk_event* ev, completion_mode mode) = 0;

    std::uint64_t watch_id;  // the watch a watching read arms, 0 for none
};

template <class Convert, class... Args>
struct op_impl final : pending_op {
    op_impl(
        handler<Args...> hh, Convert cc, boost::asio::any_completion_executor w, std::uint64_t watch
    )
        : pending_op(watch), h(std::move(hh)), convert(std::move(cc)), work(std::move(w)) {}

    void finish(core& c, error_code ec, zk_event* ev, completion_mode mode) override {
        auto slot = boost::asio::get_associated_cancellation_slot(h);
        if (slot.is_connected()) {
            slot.clear();
        }
        std::tuple<Args...> args{};
        if (ev != nullptr) {
            args = convert(c, watch_id, ec, *ev);
        } else if (watch_id != 0) {
            c.forget_watch(watch_id);
        }
        invoke(c.executor(), std::move(h), ec, std::move(args), mode);
    }

    handler<Args...> h;
    Convert convert;
    boost::asio::any_completion_executor work;  // keeps the handler's executor busy while we wait
};

template <class... Args, class Convert>
std::uint64_t core::add_op(handler<Args...> h, Convert convert, std::uint64_t watch_id) {
    namespace asio = boost::asio;
    const std::uint64_t id = ++next_id_;
    auto slot = asio::get_associated_cancellation_slot(h);
    auto work = asio::prefer(
        asio::get_associated_executor(h, ex_), asio::execution::outstanding_work.tracked
    );
    auto op = std::make_unique<op_impl<Convert, Args...>>(
        std::move(h), std::move(convert), std::move(work), watch_id
    );
    if (slot.is_connected()) {
        slot.assign([w = weak_from_this(), id](asio::cancellation_type type) {
            // Total cancellation would promise "nothing happened", which a request already
            // handed to ZooKeeper cannot keep.
            constexpr auto accepted =
                asio::cancellation_type::terminal | asio::cancellation_type::partial;
            if ((type & accepted) == asio::cancellation_type::none) {
                return;
            }
            if (auto c = w.lock()) {
                c->abandon(id);
            }
        });
    }
    ops_.emplace(id, std::move(op));
    return id;
}

// Conversions from a reply to a handler's arguments. `ec` may be rewritten (exists: a
// missing node is an answer, not an error).
inline constexpr auto no_values = [](core&, std::uint64_t, error_code&, zk_event&) {
    return std::tuple<>{};
};
inline constexpr auto text_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<std::string>(std::move(ev.text));
};
inline constexpr auto stat_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<zkco::stat>(ev.st.value_or(zkco::stat{}));
};
inline constexpr auto node_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<node>(node{std::move(ev.text), ev.st.value_or(zkco::stat{})});
};
inline constexpr auto children_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<children>(children{std::move(ev.names), ev.st.value_or(zkco::stat{})});
};
inline constexpr auto acl_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<node_acl>(node_acl{std::move(ev.acl), ev.st.value_or(zkco::stat{})});
};
inline constexpr auto exists_value = [](core&, std::uint64_t, error_code& ec, zk_event& ev) {
    if (ec == errc::no_node) {
        ec = {};
        return std::tuple<std::optional<zkco::stat>>();
    }
    return std::tuple<std::optional<zkco::stat>>(ev.st);
};
inline constexpr auto multi_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<std::vector<op_result>>(std::move(ev.multi));
};
inline constexpr auto watch_event_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<watch_event>(watch_event{static_cast<event_type>(ev.code), std::move(ev.text)}
    );
};

/// Adds the watch to a read's conversion: handed out on success, forgotten on error.
template <class Inner>
auto with_watch(Inner inner) {
    return [inner](core& c, std::uint64_t wid, error_code& ec, zk_event& ev) {
        auto values = inner(c, wid, ec, ev);
        if (ec) {
            c.forget_watch(wid);
            return std::tuple_cat(std::move(values), std::tuple<watch>());
        }
        return std::tuple_cat(std::move(values), std::tuple<watch>(c.make_watch(wid)));
    };
}

}  // namespace zkd::zkco::detail
