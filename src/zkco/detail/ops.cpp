// SPDX-License-Identifier: MIT
// Each operation's body: check the session is usable, register the pending op, hand the
// request to its zoo_a* call with the completion that will answer it.
#include "zkco/detail/c_client.hpp"
#include "zkco/detail/core.hpp"
#include "zkco/detail/pending_op.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace zkd::zkco::detail {

namespace {

int to_zk_mode(create_mode m) {
    switch (m) {
    case create_mode::persistent:
        return ZOO_PERSISTENT;
    case create_mode::ephemeral:
        return ZOO_EPHEMERAL;
    case create_mode::persistent_sequential:
        return ZOO_PERSISTENT_SEQUENTIAL;
    case create_mode::ephemeral_sequential:
        return ZOO_EPHEMERAL_SEQUENTIAL;
    case create_mode::container:
        return ZOO_CONTAINER;
    case create_mode::persistent_with_ttl:
        return ZOO_PERSISTENT_WITH_TTL;
    case create_mode::persistent_sequential_with_ttl:
        return ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL;
    }
    return ZOO_PERSISTENT;
}

/// An acl_list as the C client's ACL_vector; it points into itself, so it never moves.
class acl_holder {
public:
    explicit acl_holder(const acl_list& list) : acls_(list.size()) {
        strings_.reserve(list.size() * 2);
        for (std::size_t i = 0; i < list.size(); ++i) {
            strings_.push_back(list[i].scheme);
            strings_.push_back(list[i].id);
            acls_[i].perms = list[i].perms;
            acls_[i].id.scheme = strings_[2 * i].data();
            acls_[i].id.id = strings_[2 * i + 1].data();
        }
        vec_.count = static_cast<std::int32_t>(acls_.size());
        vec_.data = acls_.data();
    }
    acl_holder(const acl_holder&) = delete;
    acl_holder& operator=(const acl_holder&) = delete;
    acl_holder(acl_holder&&) = delete;
    acl_holder& operator=(acl_holder&&) = delete;
    ~acl_holder() = default;

    ACL_vector* get() noexcept { return &vec_; }

private:
    std::vector<std::string> strings_;
    std::vector<ACL> acls_;
    ACL_vector vec_{};
};

}  // namespace

template <class... Args>
bool core::check_usable(handler<Args...>& h, std::string_view path, std::size_t request_bytes) {
    error_code ec;
    if (is_terminal(state_)) {
        ec = terminal_error();
    } else if (zh_ == nullptr) {
        ec = errc::invalid_state;  // not connected yet: await connect() first
    } else if (request_bytes > cfg_.max_request_bytes || validate_path(path)) {
        // Oversized: the server would drop the connection. Invalid path: the C client would
        // glue a relative one to the chroot ("x" -> "/chrootx").
        ec = errc::bad_arguments;
    } else {
        before_request();
        return true;
    }
    post_result(ex_, std::move(h), ec);
    return false;
}

void core::create(std::string path, std::string data, create_options opts, handler<std::string> h) {
    if (!check_usable(h, path, path.size() + data.size())) {
        return;
    }
    acl_holder acl(opts.acl.empty() ? default_acl_ : opts.acl);
    const auto id = add_op(std::move(h), text_value, 0);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.writes;
    ++counters_.write_ops;
    int rc = ZOK;
    if (is_ttl(opts.mode)) {
        rc = zoo_acreate_ttl(
            zh_, path.c_str(), data.data(), data_len(data), acl.get(), to_zk_mode(opts.mode),
            opts.ttl.count(), on_string, ctx.get()
        );
    } else {
        rc = zoo_acreate(
            zh_, path.c_str(), data.data(), data_len(data), acl.get(), to_zk_mode(opts.mode),
            on_string, ctx.get()
        );
    }
    if (rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();  // owned by the C client until on_string
    sent();
}

void core::remove(std::string path, std::int32_t version, handler<> h) {
    if (!check_usable(h, path)) {
        return;
    }
    const auto id = add_op(std::move(h), no_values, 0);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.writes;
    ++counters_.write_ops;
    if (const int rc = zoo_adelete(zh_, path.c_str(), version, on_void, ctx.get()); rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::exists(std::string path, handler<std::optional<zkco::stat>> h) {
    if (!check_usable(h, path)) {
        return;
    }
    const auto id = add_op(std::move(h), exists_value, 0);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.reads;
    if (const int rc = zoo_aexists(zh_, path.c_str(), 0, on_stat, ctx.get()); rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::watch_exists(std::string path, handler<std::optional<zkco::stat>, watch> h) {
    if (!check_usable(h, path)) {
        return;
    }
    const auto wid = new_watch();
    const auto id = add_op(std::move(h), with_watch(exists_value), wid);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.reads;
    const int rc =
        zoo_awexists(zh_, path.c_str(), on_watch_event, watch_ctx(wid), on_stat, ctx.get());
    if (rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::get(std::string path, handler<node> h) {
    if (!check_usable(h, path)) {
        return;
    }
    const auto id = add_op(std::move(h), node_value, 0);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.reads;
    if (const int rc = zoo_aget(zh_, path.c_str(), 0, on_data, ctx.get()); rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::watch_get(std::string path, handler<node, watch> h) {
    if (!check_usable(h, path)) {
        return;
    }
    const auto wid = new_watch();
    const auto id = add_op(std::move(h), with_watch(node_value), wid);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.reads;
    const int rc = zoo_awget(zh_, path.c_str(), on_watch_event, watch_ctx(wid), on_data, ctx.get());
    if (rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::set(std::string path, std::string data, std::int32_t version, handler<zkco::stat> h) {
    if (!check_usable(h, path, path.size() + data.size())) {
        return;
    }
    const auto id = add_op(std::move(h), stat_value, 0);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.writes;
    ++counters_.write_ops;
    const int rc =
        zoo_aset(zh_, path.c_str(), data.data(), data_len(data), version, on_stat, ctx.get());
    if (rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::get_children(std::string path, handler<children> h) {
    if (!check_usable(h, path)) {
        return;
    }
    const auto id = add_op(std::move(h), children_value, 0);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.reads;
    const int rc = zoo_aget_children2(zh_, path.c_str(), 0, on_strings_stat, ctx.get());
    if (rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::watch_children(std::string path, handler<children, watch> h) {
    if (!check_usable(h, path)) {
        return;
    }
    const auto wid = new_watch();
    const auto id = add_op(std::move(h), with_watch(children_value), wid);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.reads;
    const int rc = zoo_awget_children2(
        zh_, path.c_str(), on_watch_event, watch_ctx(wid), on_strings_stat, ctx.get()
    );
    if (rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::get_acl(std::string path, handler<node_acl> h) {
    if (!check_usable(h, path)) {
        return;
    }
    const auto id = add_op(std::move(h), acl_value, 0);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.reads;
    if (const int rc = zoo_aget_acl(zh_, path.c_str(), on_acl, ctx.get()); rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::sync(std::string path, handler<> h) {
    if (!check_usable(h, path)) {
        return;
    }
    const auto id = add_op(std::move(h), no_values, 0);
    auto ctx = std::make_unique<op_ctx>(this, id);
    ++counters_.reads;
    if (const int rc = zoo_async(zh_, path.c_str(), on_string, ctx.get()); rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    (void)ctx.release();
    sent();
}

void core::multi(std::vector<multi_op> ops, handler<std::vector<op_result>> h) {
    std::size_t bytes = 0;
    std::string_view bad_path;
    for (const auto& op : ops) {
        bytes += estimated_size(op);
        std::visit(
            [&](const auto& o) {
                if (validate_path(o.path)) {
                    bad_path = o.path.empty() ? std::string_view("?") : o.path;
                }
            },
            op
        );
    }
    if (!check_usable(h, bad_path.empty() ? "/" : bad_path, bytes)) {
        return;
    }
    // zoo_amulti of 3.8.0 frees a stale path pointer (a double free) when the handle turned
    // unrecoverable (expired, auth failed: state < 0) before our loop heard of it: each sub-op's
    // *_init returns early but its path is freed anyway. Refuse such a handle first.
    if (zoo_state(zh_) < 0) {
        post_result(ex_, std::move(h), errc::session_expired);
        return;
    }
    if (ops.empty()) {
        post_result(ex_, std::move(h), {});
        return;
    }
    for (const auto& op : ops) {
        if (const auto* c = std::get_if<op::create>(&op); c != nullptr && is_ttl(c->mode)) {
            // zoo_amulti of 3.8 cannot serialize TTL creates.
            post_result(ex_, std::move(h), errc::unimplemented);
            return;
        }
    }
    const std::size_t n = ops.size();
    auto ctx = std::make_unique<multi_ctx>(this, 0);
    ctx->ops.resize(n);
    ctx->results.resize(n);
    ctx->path_buffers.resize(n);
    ctx->stats.resize(n);
    // ACLs only need to live through zoo_amulti, which serializes the request.
    std::vector<std::unique_ptr<acl_holder>> acls;
    for (std::size_t i = 0; i < n; ++i) {
        auto* zop = &ctx->ops[i];
        std::visit(
            [&](auto& o) {
                using T = std::decay_t<decltype(o)>;
                if constexpr (std::is_same_v<T, op::create>) {
                    acls.push_back(
                        std::make_unique<acl_holder>(o.acl.empty() ? default_acl_ : o.acl)
                    );
                    auto& buf = ctx->path_buffers[i];
                    buf.assign(o.path.size() + 32, '\0');  // room for the sequence suffix
                    zoo_create_op_init(
                        zop, o.path.c_str(), o.data.data(), data_len(o.data), acls.back()->get(),
                        to_zk_mode(o.mode), buf.data(), static_cast<int>(buf.size())
                    );
                } else if constexpr (std::is_same_v<T, op::remove>) {
                    zoo_delete_op_init(zop, o.path.c_str(), o.version);
                } else if constexpr (std::is_same_v<T, op::set>) {
                    zoo_set_op_init(
                        zop, o.path.c_str(), o.data.data(), data_len(o.data), o.version,
                        &ctx->stats[i]
                    );
                } else {
                    zoo_check_op_init(zop, o.path.c_str(), o.version);
                }
            },
            ops[i]
        );
    }
    const auto id = add_op(std::move(h), multi_value, 0);
    ctx->id = id;
    ++counters_.writes;
    ++counters_.multis;
    counters_.write_ops += n;
    const int rc = zoo_amulti(
        zh_, static_cast<int>(n), ctx->ops.data(), ctx->results.data(), on_multi,
        static_cast<op_ctx*>(ctx.get())
    );
    if (rc != ZOK) {
        fail_start(id, rc);
        return;
    }
    if (!set_observers_.empty()) {
        std::vector<observed_set> observed;
        for (std::size_t i = 0; i < n; ++i) {
            if (const auto* s = std::get_if<op::set>(&ops[i]);
                s != nullptr && set_observers_.contains(s->path)) {
                observed.push_back({i, s->path, s->data});
            }
        }
        if (!observed.empty()) {
            observed_sets_.emplace(id, std::move(observed));
        }
    }
    (void)ctx.release();
    sent();
}

std::uint64_t core::add_set_observer(std::string path, set_callback f) {
    const std::uint64_t id = ++next_id_;
    set_observers_[std::move(path)].push_back({id, std::make_shared<set_callback>(std::move(f))});
    return id;
}

void core::remove_set_observer(std::uint64_t id) noexcept {
    for (auto it = set_observers_.begin(); it != set_observers_.end(); ++it) {
        auto& list = it->second;
        const auto at =
            std::find_if(list.begin(), list.end(), [id](const auto& e) { return e.id == id; });
        if (at != list.end()) {
            list.erase(at);
            if (list.empty()) {
                set_observers_.erase(it);
            }
            return;
        }
    }
}

bool core::sets_in_flight(std::string_view path) const noexcept {
    return last_set_in_flight(path) != 0;
}

std::uint64_t core::last_set_in_flight(std::string_view path) const noexcept {
    std::uint64_t last = 0;
    for (const auto& [id, sets] : observed_sets_) {
        if (id > last && std::any_of(sets.begin(), sets.end(), [path](const auto& o) {
                return o.path == path;
            })) {
            last = id;
        }
    }
    return last;
}

void core::wait_sets(std::string path, handler<> h) {
    if (is_terminal(state_)) {
        post_result(ex_, std::move(h), terminal_error());
        return;
    }
    // The multis in flight now, not those sent later: a writer that keeps one in flight
    // all the time must not hold the wait for ever.
    const auto last = last_set_in_flight(path);
    if (last == 0) {
        post_result(ex_, std::move(h), error_code{});
        return;
    }
    const auto id = add_op(std::move(h), no_values, 0);
    set_waiters_.push_back({std::move(path), last, id});
}

void core::release_set_waiters() {
    std::erase_if(set_waiters_, [this](const set_waiter& w) {
        if (!ops_.contains(w.op)) {
            return true;  // abandoned
        }
        for (const auto& [id, sets] : observed_sets_) {
            if (id <= w.last && std::any_of(sets.begin(), sets.end(), [&w](const auto& o) {
                    return o.path == w.path;
                })) {
                return false;
            }
        }
        // Posted: after what the answer's observers and handler ran, and what they posted.
        complete_op(w.op, {}, nullptr, completion_mode::post);
        return true;
    });
}

void core::notify_sets(const zk_event& ev) {
    const auto it = observed_sets_.find(ev.id);
    if (it == observed_sets_.end()) {
        return;
    }
    const auto observed = std::move(it->second);
    observed_sets_.erase(it);
    for (const auto& o : observed) {
        if (ev.code != ZOK) {
            break;  // not applied, or its outcome unknown
        }
        if (o.index >= ev.multi.size() || ev.multi[o.index].ec) {
            continue;
        }
        const auto obs = set_observers_.find(o.path);
        if (obs == set_observers_.end()) {
            continue;
        }
        // A copy: an observer may add or remove observers.
        std::vector<std::shared_ptr<set_callback>> fs;
        fs.reserve(obs->second.size());
        for (const auto& e : obs->second) {
            fs.push_back(e.f);
        }
        for (const auto& f : fs) {
            (*f)(o.data, ev.multi[o.index].stat);
        }
    }
    if (!set_waiters_.empty()) {
        release_set_waiters();
    }
}

}  // namespace zkd::zkco::detail
