// SPDX-License-Identifier: MIT
#pragma once

#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <string_view>
#include <type_traits>

namespace zkd::zkco {

using boost::system::error_code;

/// Outcome of a ZooKeeper operation. The values equal the C client's ZOO_ERRORS, so a raw
/// return code converts with `static_cast<errc>(rc)`.
enum class errc : int {
    ok = 0,
    system_error = -1,                  ///< the C client hit a system error
    runtime_inconsistency = -2,         ///< multi: this op was not run because another failed
    data_inconsistency = -3,            ///< a data inconsistency was found
    connection_loss = -4,               ///< connection lost; the outcome of a write is unknown
    marshalling_error = -5,             ///< a request or reply could not be (de)serialized
    unimplemented = -6,                 ///< not supported (e.g. TTL without extended types)
    operation_timeout = -7,             ///< the operation, or a deadline put on it, timed out
    bad_arguments = -8,                 ///< invalid arguments (bad path, oversized data, ...)
    invalid_state = -9,                 ///< the handle is not usable (not started, closed)
    new_config_no_quorum = -13,         ///< reconfig: no quorum of the new config
    reconfig_in_progress = -14,         ///< reconfig: another one is running
    ssl_connection_error = -15,         ///< TLS failure (never with Debian's client)
    api_error = -100,                   ///< generic server-side API error
    no_node = -101,                     ///< the node (or the parent of a create) does not exist
    no_auth = -102,                     ///< not authorized by the node's ACL
    bad_version = -103,                 ///< the version check failed
    no_children_for_ephemerals = -108,  ///< ephemeral nodes cannot have children
    node_exists = -110,                 ///< the node already exists
    not_empty = -111,                   ///< the node has children
    session_expired = -112,             ///< the session expired (by the server or declared locally)
    invalid_callback = -113,            ///< invalid callback
    invalid_acl = -114,                 ///< invalid ACL
    auth_failed = -115,                 ///< authentication failed
    closing = -116,                     ///< the client is closing or closed
    nothing = -117,                     ///< (not an error) no server responses to process
    session_moved = -118,               ///< the session moved to another server
    not_read_only = -119,               ///< a write was sent to a read-only server
    ephemeral_on_local_session = -120,  ///< ephemeral node on a local session
    no_watcher = -121,                  ///< the watcher could not be found
    reconfig_disabled = -123,           ///< reconfiguration is disabled on the server
    session_closed_require_sasl_auth = -124,  ///< the server requires SASL
    throttled_op = -127,                      ///< the server throttled the request; retry
};

/// Groups of errc values that callers branch on.
enum class condition : int {
    /// The connection failed while the request was out: its outcome is unknown. Re-read
    /// before re-writing.
    retryable = 1,
    /// A precondition of the request did not hold (node missing or present, version
    /// mismatch, children present). Nothing was changed.
    check_failed,
    /// The session is gone for good: make a new client.
    session_lost,
};

const boost::system::error_category& zk_category() noexcept;
const boost::system::error_category& zk_condition_category() noexcept;

error_code make_error_code(errc e) noexcept;
boost::system::error_condition make_error_condition(condition c) noexcept;

/// Maps a C client return code to an error_code (0 maps to success).
error_code from_zk_rc(int rc) noexcept;

/// The C client's name for the code (e.g. "ZNONODE"), for logs.
std::string_view errc_name(errc e) noexcept;

template <class T>
using result = boost::system::result<T, error_code>;

}  // namespace zkd::zkco

template <>
struct boost::system::is_error_code_enum<zkd::zkco::errc> : std::true_type {};
template <>
struct boost::system::is_error_condition_enum<zkd::zkco::condition> : std::true_type {};
