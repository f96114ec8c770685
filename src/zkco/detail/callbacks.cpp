// SPDX-License-Identifier: MIT
// The C side: the completions and watchers the C client calls, and its log. They run inside
// zookeeper_process on the executor, or zookeeper_close on the closer thread; each copies
// what it needs out of the C client's buffers and pushes it to the core, nothing else.
#include "zkco/detail/c_client.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>

namespace zkd::zkco::detail {

namespace {

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

bool is_transport_failure(int rc) {
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZCLOSING ||
           rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZMARSHALLINGERROR ||
           rc == ZSYSTEMERROR || rc == ZRUNTIMEINCONSISTENCY;
}

/// Set once by init_client_logging: ZKD_ZK_CLIENT_LOG asks for the C client's own messages.
std::atomic<bool> client_log_wanted{false};

}  // namespace

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

}  // namespace zkd::zkco::detail
