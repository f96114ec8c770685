// SPDX-License-Identifier: MIT
// Private to the core's .cpp files, the only ones that include zookeeper.h: the contexts the
// C client hands back to our callbacks, and the callbacks (callbacks.cpp).
#pragma once

#include "zkco/detail/core.hpp"

#include <zookeeper/zookeeper.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zkd::zkco::detail {

/// The context of the session watcher, reachable from every callback through
/// zoo_get_context. It keeps the core alive until zookeeper_close has returned, after
/// which no callback can run.
struct session_ctx {
    std::shared_ptr<core> owner;
};

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

// The completions handed to zoo_a*, by the shape of what the reply carries. Each takes its
// op_ctx back (`data`), copies the reply out and pushes it to the core.
void on_void(int rc, const void* data);
void on_string(int rc, const char* value, const void* data);
void on_stat(int rc, const Stat* st, const void* data);
void on_data(int rc, const char* value, int len, const Stat* st, const void* data);
void on_strings_stat(int rc, const String_vector* names, const Stat* st, const void* data);
void on_acl(int rc, ACL_vector* acl, Stat* st, const void* data);
void on_multi(int rc, const void* data);
void on_auth(int rc, const void* data);

/// The watcher of a watching read; its context is the watch id (watch_ctx).
void on_watch_event(zhandle_t* zh, int type, int state, const char* path, void* wctx);
/// The session watcher (zookeeper_init2); its context is the session_ctx.
void on_session_event(zhandle_t* zh, int type, int state, const char* path, void* ctx);

/// The C client's log lines, to spdlog when ZKD_ZK_CLIENT_LOG asks for them.
void on_client_log(const char* message);
/// Sets the C client's process-wide log level, once, from ZKD_ZK_CLIENT_LOG.
void init_client_logging();

/// A watch id as the C client's watcher context.
inline void* watch_ctx(std::uint64_t id) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(id));  // NOLINT
}

inline int data_len(const std::string& data) {
    return static_cast<int>(data.size());
}

}  // namespace zkd::zkco::detail
