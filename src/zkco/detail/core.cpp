// SPDX-License-Identifier: MIT
// The C client behind zkco::client: the session, its watcher, its I/O, and each operation's
// body against a zoo_a* call and its completion. The client is the single-threaded one
// (zookeeper_st), driven from the executor: its socket's readiness and its timer call
// zookeeper_process and zookeeper_interest, so a reply costs no thread handoff. Over 700
// lines because every operation follows the same rule (a completion only queues what it got;
// the executor hands it over, or drops it once the caller has gone) and keeping them
// together keeps the rule in one place.
#include "zkco/detail/core.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <spdlog/spdlog.h>

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <tuple>
#include <unistd.h>

namespace asio = boost::asio;

namespace zkd::zkco::detail {

// ---------------------------------------------------------------------------------------
// Handler plumbing

namespace {

template <class... Args>
void invoke(
    const asio::any_io_executor& io_ex,
    handler<Args...> h,
    error_code ec,
    std::tuple<Args...> args,
    completion_mode mode
) {
    auto ex = asio::get_associated_executor(h, io_ex);
    auto fn = [h = std::move(h), ec, args = std::move(args)]() mutable {
        std::apply([&](auto&&... a) { std::move(h)(ec, std::move(a)...); }, std::move(args));
    };
    if (mode == completion_mode::dispatch) {
        asio::dispatch(ex, std::move(fn));
    } else {
        // The handler's executor type-erased as any_completion_executor cannot be posted to
        // (no blocking.never); hop through ours, then dispatch to it.
        asio::post(io_ex, [ex, fn = std::move(fn)]() mutable {
            asio::dispatch(ex, std::move(fn));
        });
    }
}

/// Calls a void() handler through its executor, after a trip through `io_ex`.
void post_void(const asio::any_io_executor& io_ex, asio::any_completion_handler<void()> h) {
    auto ex = asio::get_associated_executor(h, io_ex);
    asio::post(io_ex, [ex, h = std::move(h)]() mutable { asio::dispatch(ex, std::move(h)); });
}

template <class... Args>
void post_result(
    const asio::any_io_executor& io_ex,
    handler<Args...> h,
    error_code ec,
    std::tuple<Args...> args = {}
) {
    invoke(io_ex, std::move(h), ec, std::move(args), completion_mode::post);
}

}  // namespace

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

namespace {

template <class Convert, class... Args>
struct op_impl final : pending_op {
    op_impl(handler<Args...> hh, Convert cc, asio::any_completion_executor w, std::uint64_t watch)
        : pending_op(watch), h(std::move(hh)), convert(std::move(cc)), work(std::move(w)) {}

    void finish(core& c, error_code ec, zk_event* ev, completion_mode mode) override {
        auto slot = asio::get_associated_cancellation_slot(h);
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
    asio::any_completion_executor work;  // keeps the handler's executor busy while we wait
};

}  // namespace

// ---------------------------------------------------------------------------------------
// The C side: contexts and callbacks. They run on the ZooKeeper client's threads, copy
// what they need and push it to the core; nothing else.

/// The context of the session watcher, reachable from every callback through
/// zoo_get_context. It keeps the core alive until zookeeper_close has returned, after
/// which no callback can run.
struct session_ctx {
    std::shared_ptr<core> owner;
};

namespace {

/// What the C client hands back to a completion: whose reply it is.
struct op_ctx {
    op_ctx(core* o, std::uint64_t i) : owner(o), id(i) {}
    op_ctx(const op_ctx&) = delete;
    op_ctx& operator=(const op_ctx&) = delete;
    virtual ~op_ctx() = default;

    core* owner;
    std::uint64_t id;
};

/// A multi's buffers, which the C client fills in when the reply arrives.
struct multi_ctx : op_ctx {
    using op_ctx::op_ctx;
    std::vector<zoo_op_t> ops;
    std::vector<zoo_op_result_t> results;
    std::vector<std::string> path_buffers;
    std::vector<Stat> stats;
};

std::unique_ptr<op_ctx> take_ctx(const void* data) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): the C API passes our pointer as const
    return std::unique_ptr<op_ctx>(static_cast<op_ctx*>(const_cast<void*>(data)));
}

zkco::stat to_stat(const Stat& s) {
    return {s.czxid,    s.mzxid,          s.ctime,      s.mtime,       s.version, s.cversion,
            s.aversion, s.ephemeralOwner, s.dataLength, s.numChildren, s.pzxid};
}

void push_reply(const op_ctx& ctx, zk_event&& ev) {
    ev.k = zk_event::kind::reply;
    ev.id = ctx.id;
    ctx.owner->push(std::move(ev));
}

void on_void(int rc, const void* data) {
    const auto ctx = take_ctx(data);
    zk_event ev;
    ev.code = rc;
    push_reply(*ctx, std::move(ev));
}

void on_string(int rc, const char* value, const void* data) {
    const auto ctx = take_ctx(data);
    zk_event ev;
    ev.code = rc;
    if (rc == ZOK && value != nullptr) {
        ev.text = value;
    }
    push_reply(*ctx, std::move(ev));
}

void on_stat(int rc, const Stat* st, const void* data) {
    const auto ctx = take_ctx(data);
    zk_event ev;
    ev.code = rc;
    if (rc == ZOK && st != nullptr) {
        ev.st = to_stat(*st);
    }
    push_reply(*ctx, std::move(ev));
}

void on_data(int rc, const char* value, int len, const Stat* st, const void* data) {
    const auto ctx = take_ctx(data);
    zk_event ev;
    ev.code = rc;
    if (rc == ZOK) {
        if (value != nullptr && len > 0) {
            ev.text.assign(value, static_cast<std::size_t>(len));
        }
        if (st != nullptr) {
            ev.st = to_stat(*st);
        }
    }
    push_reply(*ctx, std::move(ev));
}

void on_strings_stat(int rc, const String_vector* names, const Stat* st, const void* data) {
    const auto ctx = take_ctx(data);
    zk_event ev;
    ev.code = rc;
    if (rc == ZOK) {
        if (names != nullptr) {
            ev.names.reserve(static_cast<std::size_t>(names->count));
            for (std::int32_t i = 0; i < names->count; ++i) {
                ev.names.emplace_back(names->data[i]);  // NOLINT: C array
            }
        }
        if (st != nullptr) {
            ev.st = to_stat(*st);
        }
    }
    push_reply(*ctx, std::move(ev));
}

void on_acl(int rc, ACL_vector* acl, Stat* st, const void* data) {
    const auto ctx = take_ctx(data);
    zk_event ev;
    ev.code = rc;
    if (rc == ZOK) {
        if (acl != nullptr) {
            for (std::int32_t i = 0; i < acl->count; ++i) {
                const ACL& a = acl->data[i];  // NOLINT: C array
                ev.acl.push_back(
                    {a.perms, a.id.scheme != nullptr ? a.id.scheme : "",
                     a.id.id != nullptr ? a.id.id : ""}
                );
            }
        }
        if (st != nullptr) {
            ev.st = to_stat(*st);
        }
    }
    push_reply(*ctx, std::move(ev));
}

bool is_transport_failure(int rc) {
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZCLOSING ||
           rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZMARSHALLINGERROR ||
           rc == ZSYSTEMERROR || rc == ZRUNTIMEINCONSISTENCY;
}

void on_multi(int rc, const void* data) {
    auto base = take_ctx(data);
    auto* ctx = static_cast<multi_ctx*>(base.get());
    zk_event ev;
    ev.code = rc;
    // Per-op results exist only when the server answered.
    if (!is_transport_failure(rc)) {
        ev.multi.resize(ctx->ops.size());
        for (std::size_t i = 0; i < ctx->ops.size(); ++i) {
            const auto& r = ctx->results[i];
            auto& out = ev.multi[i];
            out.ec = from_zk_rc(r.err);
            if (r.err == ZOK && rc != ZOK) {
                // The server reports the ops before the failing one as done; they were
                // rolled back with the rest.
                out.ec = errc::runtime_inconsistency;
            }
            if (out.ec) {
                continue;
            }
            if (ctx->ops[i].type == ZOO_CREATE_OP) {
                const auto& buf = ctx->path_buffers[i];
                out.path.assign(buf.c_str(), strnlen(buf.c_str(), buf.size()));
            } else if (ctx->ops[i].type == ZOO_SETDATA_OP) {
                out.stat = to_stat(ctx->stats[i]);
            }
        }
    }
    push_reply(*ctx, std::move(ev));
}

void on_auth(int /*rc*/, const void* /*data*/) {
    // A refusal also arrives as the session state AUTH_FAILED, where it is handled.
}

void on_watch_event(zhandle_t* zh, int type, int /*state*/, const char* path, void* wctx) {
    // Session events are copied to every armed watch; they are not the watch's event.
    if (type == ZOO_SESSION_EVENT) {
        return;
    }
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): our context, handed back as const
    auto* sctx = static_cast<session_ctx*>(const_cast<void*>(zoo_get_context(zh)));
    zk_event ev;
    ev.k = zk_event::kind::watch;
    ev.id = reinterpret_cast<std::uintptr_t>(wctx);  // NOLINT: the id travels as the pointer
    ev.code = type;
    ev.text = path != nullptr ? path : "";
    sctx->owner->push(std::move(ev));
}

void on_session_event(zhandle_t* zh, int type, int state, const char* /*path*/, void* ctx) {
    if (type != ZOO_SESSION_EVENT) {
        return;
    }
    auto* sctx = static_cast<session_ctx*>(ctx);
    zk_event ev;
    ev.k = zk_event::kind::session;
    ev.code = state;
    if (state == ZOO_CONNECTED_STATE) {
        ev.timeout = std::chrono::milliseconds(zoo_recv_timeout(zh));
        if (const clientid_t* id = zoo_client_id(zh)) {
            ev.session = session_handle{id->client_id, std::string(id->passwd, sizeof(id->passwd))};
        }
    }
    sctx->owner->push(std::move(ev));
}

/// Set once by init_client_logging: ZKD_ZK_CLIENT_LOG asks for the C client's own messages.
std::atomic<bool> client_log_wanted{false};

void on_client_log(const char* message) {
    if (!client_log_wanted.load(std::memory_order_relaxed)) {
        // Unasked, its errors are mostly the retry chatter of an unreachable server (several
        // a second), which zkco and the roles report themselves, once per attempt. Not even
        // handed to spdlog: this may run on the closer thread (zookeeper_close), which may
        // outlive the logger at process exit (a race TSan reported).
        return;
    }
    std::string_view m(message);
    while (!m.empty() && (m.back() == '\n' || m.back() == '\r')) {
        m.remove_suffix(1);
    }
    // "time:pid(tid):ZOO_LEVEL@function@line: text": keep from the function on.
    auto level = spdlog::level::debug;
    static constexpr std::pair<std::string_view, spdlog::level::level_enum> levels[] = {
        {"ZOO_ERROR@", spdlog::level::warn},
        {"ZOO_WARN@", spdlog::level::warn},
        {"ZOO_INFO@", spdlog::level::info},
        {"ZOO_DEBUG@", spdlog::level::debug},
    };
    for (const auto& [tag, lvl] : levels) {
        if (const auto pos = m.find(tag); pos != std::string_view::npos) {
            level = lvl;
            m.remove_prefix(pos + tag.size());
            break;
        }
    }
    spdlog::log(level, "zk-client: {}", m);
}

/// The C client's own log level is process-wide; set it once from ZKD_ZK_CLIENT_LOG
/// (error, warn, info, debug). Unset, its messages are dropped: its connection-retry chatter
/// is logged at error, and we report state changes ourselves.
void init_client_logging() {
    static std::once_flag once;
    std::call_once(once, [] {
        ZooLogLevel level = ZOO_LOG_LEVEL_ERROR;
        if (const char* env = std::getenv("ZKD_ZK_CLIENT_LOG")) {  // NOLINT(concurrency-mt-unsafe)
            const std::string_view v(env);
            client_log_wanted = true;
            if (v == "warn") {
                level = ZOO_LOG_LEVEL_WARN;
            } else if (v == "info") {
                level = ZOO_LOG_LEVEL_INFO;
            } else if (v == "debug") {
                level = ZOO_LOG_LEVEL_DEBUG;
            }
        }
        zoo_set_debug_level(level);
    });
}

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

void* watch_ctx(std::uint64_t id) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(id));  // NOLINT
}

int data_len(const std::string& data) {
    return static_cast<int>(data.size());
}

// Conversions from a reply to a handler's arguments. `ec` may be rewritten (exists: a
// missing node is an answer, not an error).
auto no_values = [](core&, std::uint64_t, error_code&, zk_event&) { return std::tuple<>{}; };
auto text_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<std::string>(std::move(ev.text));
};
auto stat_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<zkco::stat>(ev.st.value_or(zkco::stat{}));
};
auto node_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<node>(node{std::move(ev.text), ev.st.value_or(zkco::stat{})});
};
auto children_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<children>(children{std::move(ev.names), ev.st.value_or(zkco::stat{})});
};
auto acl_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<node_acl>(node_acl{std::move(ev.acl), ev.st.value_or(zkco::stat{})});
};
auto exists_value = [](core&, std::uint64_t, error_code& ec, zk_event& ev) {
    if (ec == errc::no_node) {
        ec = {};
        return std::tuple<std::optional<zkco::stat>>();
    }
    return std::tuple<std::optional<zkco::stat>>(ev.st);
};
auto multi_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
    return std::tuple<std::vector<op_result>>(std::move(ev.multi));
};
auto watch_event_value = [](core&, std::uint64_t, error_code&, zk_event& ev) {
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

// ---------------------------------------------------------------------------------------
// core

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

template <class... Args, class Convert>
std::uint64_t core::add_op(handler<Args...> h, Convert convert, std::uint64_t watch_id) {
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

// --- session -----------------------------------------------------------------------------

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

// --- the C client's I/O ------------------------------------------------------------------

void core::before_request() {
    // zookeeper_st sends a request at once, and when that send fails (the server closed the
    // connection, and a send before this one drew its reset) it closes the socket without
    // failing what is in flight or telling anyone. So first read what the socket holds: a
    // closed connection is then handled the usual way (everything in flight fails with
    // connection loss, the session event says so) before this request is queued.
    if (!socket_) {
        return;
    }
    pollfd p{socket_fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
        process_reads();
    }
    cork(true);
}

void core::cork(bool on) {
    // The C client writes a request as two sends, its 4 length bytes and then its body, each
    // a packet of its own (TCP_NODELAY), and the server's selector wakes for each. Corked,
    // the requests of one turn leave together when the pump that kick() posted uncorks.
    if (!socket_ || corked_ == on) {
        return;
    }
    const int v = on ? 1 : 0;
    if (::setsockopt(socket_->native_handle(), IPPROTO_TCP, TCP_CORK, &v, sizeof v) == 0) {
        corked_ = on;
    }
}

void core::sent() {
    ++requests_in_flight_;
    note_silent_disconnect();
    kick();
}

void core::note_silent_disconnect() {
    // What before_request() cannot rule out (a reset drawn by the first of two sends in one
    // flush): the library dropped the connection and says only NOTCONNECTED. What was in
    // flight fails after the reconnect (an out-of-order reply, taken as connection loss);
    // tell the session's waiters now.
    if (state_ == session_state::connected && zh_ != nullptr &&
        zoo_state(zh_) == ZOO_NOTCONNECTED_STATE) {
        zk_event ev;
        ev.k = zk_event::kind::session;
        ev.code = ZOO_NOTCONNECTED_STATE;
        push(std::move(ev));
    }
}

void core::process_reads() {
    // One reply per call; stop at the first call that finds no whole one, or after a batch
    // (the executor has other work, and the wait wakes again for the rest).
    for (int i = 0; i < 64 && zh_ != nullptr; ++i) {
        if (zookeeper_process(zh_, ZOOKEEPER_READ) != ZOK) {
            break;
        }
    }
}

void core::kick() {
    // zoo_a* sends at once when it can; what a full socket buffer (or a connection not made
    // yet) leaves queued needs a write wait, which only a new zookeeper_interest asks for.
    if (pump_posted_ || zh_ == nullptr) {
        return;
    }
    pump_posted_ = true;
    asio::post(ex_, [w = weak_from_this()] {
        if (auto c = w.lock()) {
            c->pump();
        }
    });
}

void core::pump() {
    pump_posted_ = false;
    cork(false);
    if (zh_ == nullptr) {
        return;
    }
    note_silent_disconnect();
    int fd = -1;
    int interest = 0;
    timeval tv{0, 1000};  // an error that sets nothing: look again in a millisecond
    const int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    if (rc == ZINVALIDSTATE || rc == ZBADARGUMENTS) {
        // Expired or refused: the session event that says so is queued; terminate() stops us.
        stop_io();
        return;
    }
    if (rc != ZOK) {
        // The library closed its socket (a timeout, a failed ping) and failed what was in
        // flight; the next zookeeper_interest connects again.
        fd = -1;
        interest = 0;
    }
    watch_socket(fd);
    if (socket_ && !read_armed_) {
        arm_socket_wait(ZOOKEEPER_READ);
    }
    if (socket_ && (interest & ZOOKEEPER_WRITE) != 0 && !write_armed_) {
        arm_socket_wait(ZOOKEEPER_WRITE);
    }
    // Pings, the receive deadline and reconnection happen in zookeeper_interest: call it
    // again when `tv` is up. A timer that fires early costs one call, so only an earlier
    // deadline moves it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(tv.tv_sec) +
                          std::chrono::microseconds(tv.tv_usec);
    if (io_timer_armed_ && deadline >= io_deadline_) {
        return;
    }
    io_timer_armed_ = true;
    io_deadline_ = deadline;
    io_timer_->expires_at(deadline);
    io_timer_->async_wait([w = weak_from_this(), gen = ++io_timer_gen_](error_code ec) {
        if (auto c = w.lock()) {
            c->on_io_timer(gen, ec);
        }
    });
}

void core::arm_socket_wait(int events) {
    const bool read = events == ZOOKEEPER_READ;
    (read ? read_armed_ : write_armed_) = true;
    socket_->async_wait(
        read ? asio::posix::stream_descriptor::wait_read
             : asio::posix::stream_descriptor::wait_write,
        [w = weak_from_this(), gen = socket_gen_, events](error_code ec) {
            if (auto c = w.lock()) {
                c->on_socket(events, gen, ec);
            }
        }
    );
}

void core::watch_socket(int fd) {
    struct ::stat st {};
    if (fd >= 0 && ::fstat(fd, &st) != 0) {
        fd = -1;
    }
    if (socket_ && fd == socket_fd_ && st.st_ino == socket_inode_) {
        return;  // the same socket
    }
    cork(false);
    socket_.reset();  // its waits end as operation_aborted, and are stale anyway
    ++socket_gen_;
    read_armed_ = false;
    write_armed_ = false;
    socket_fd_ = -1;
    if (fd < 0) {
        return;
    }
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
        spdlog::warn("zk: cannot watch the client's socket: {}", std::strerror(errno));
        return;  // the timer calls pump again
    }
    error_code ec;
    socket_ = std::make_unique<asio::posix::stream_descriptor>(ex_);
    socket_->assign(copy, ec);
    if (ec) {
        ::close(copy);
        socket_.reset();
        spdlog::warn("zk: cannot watch the client's socket: {}", ec.message());
        return;
    }
    socket_fd_ = fd;
    socket_inode_ = st.st_ino;
}

void core::on_socket(int events, std::uint64_t gen, error_code ec) {
    if (gen != socket_gen_ || zh_ == nullptr) {
        return;  // a wait on a socket we dropped
    }
    (events == ZOOKEEPER_READ ? read_armed_ : write_armed_) = false;
    if (ec == asio::error::operation_aborted) {
        return;
    }
    if (ec) {
        // The descriptor itself failed: give it up, the library finds out on its own.
        watch_socket(-1);
    } else if (events == ZOOKEEPER_READ) {
        process_reads();
    } else {
        (void)zookeeper_process(zh_, ZOOKEEPER_WRITE);
    }
    pump();
}

void core::on_io_timer(std::uint64_t gen, error_code ec) {
    if (gen != io_timer_gen_ || ec) {
        return;  // moved or stopped
    }
    io_timer_armed_ = false;
    // The pings go out from here: a loop this late is a loop that could lose its connection
    // (after 2/3 of the session timeout without a reply the C client gives up on it).
    const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - io_deadline_
    );
    if (state_ == session_state::connected && late > std::chrono::milliseconds(500)) {
        spdlog::warn(
            "zk: the event loop ran the ZooKeeper client's timer {} ms late (session timeout "
            "{} ms): a loop stalled past two thirds of it loses the connection",
            late.count(), negotiated_.count()
        );
    }
    pump();
}

void core::stop_io() {
    cork(false);  // zookeeper_close's request must not wait for the kernel's 200 ms
    socket_.reset();
    ++socket_gen_;
    read_armed_ = false;
    write_armed_ = false;
    socket_fd_ = -1;
    ++io_timer_gen_;
    io_timer_armed_ = false;
    if (io_timer_) {
        io_timer_->cancel();
    }
}

// --- events from the C client --------------------------------------------------------

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

// --- operations --------------------------------------------------------------------------

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
    (void)ctx.release();
    sent();
}

}  // namespace zkd::zkco::detail
