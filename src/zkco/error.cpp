// SPDX-License-Identifier: MIT
#include "zkco/error.hpp"

#include <boost/asio/error.hpp>

#include <string>

namespace zkd::zkco {
namespace {

struct entry {
    errc code;
    std::string_view name;
    std::string_view message;
};

constexpr entry entries[] = {
    {errc::ok, "ZOK", "ok"},
    {errc::system_error, "ZSYSTEMERROR", "system error in the ZooKeeper client"},
    {errc::runtime_inconsistency, "ZRUNTIMEINCONSISTENCY",
     "not run: another operation of the multi failed"},
    {errc::data_inconsistency, "ZDATAINCONSISTENCY", "data inconsistency"},
    {errc::connection_loss, "ZCONNECTIONLOSS", "connection to ZooKeeper lost; outcome unknown"},
    {errc::marshalling_error, "ZMARSHALLINGERROR", "request or reply could not be serialized"},
    {errc::unimplemented, "ZUNIMPLEMENTED", "operation not supported by client or server"},
    {errc::operation_timeout, "ZOPERATIONTIMEOUT", "operation timed out"},
    {errc::bad_arguments, "ZBADARGUMENTS", "invalid arguments"},
    {errc::invalid_state, "ZINVALIDSTATE", "ZooKeeper handle not usable in its current state"},
    {errc::new_config_no_quorum, "ZNEWCONFIGNOQUORUM", "no quorum of the new configuration"},
    {errc::reconfig_in_progress, "ZRECONFIGINPROGRESS", "reconfiguration already in progress"},
    {errc::ssl_connection_error, "ZSSLCONNECTIONERROR", "TLS connection error"},
    {errc::api_error, "ZAPIERROR", "ZooKeeper API error"},
    {errc::no_node, "ZNONODE", "node does not exist"},
    {errc::no_auth, "ZNOAUTH", "not authorized"},
    {errc::bad_version, "ZBADVERSION", "version mismatch"},
    {errc::no_children_for_ephemerals, "ZNOCHILDRENFOREPHEMERALS",
     "ephemeral nodes cannot have children"},
    {errc::node_exists, "ZNODEEXISTS", "node already exists"},
    {errc::not_empty, "ZNOTEMPTY", "node has children"},
    {errc::session_expired, "ZSESSIONEXPIRED", "ZooKeeper session expired"},
    {errc::invalid_callback, "ZINVALIDCALLBACK", "invalid callback"},
    {errc::invalid_acl, "ZINVALIDACL", "invalid ACL"},
    {errc::auth_failed, "ZAUTHFAILED", "authentication failed"},
    {errc::closing, "ZCLOSING", "ZooKeeper client is closing"},
    {errc::nothing, "ZNOTHING", "no server responses to process"},
    {errc::session_moved, "ZSESSIONMOVED", "session moved to another server"},
    {errc::not_read_only, "ZNOTREADONLY", "write sent to a read-only server"},
    {errc::ephemeral_on_local_session, "ZEPHEMERALONLOCALSESSION",
     "ephemeral node on a local session"},
    {errc::no_watcher, "ZNOWATCHER", "watcher not found"},
    {errc::reconfig_disabled, "ZRECONFIGDISABLED", "reconfiguration disabled"},
    {errc::session_closed_require_sasl_auth, "ZSESSIONCLOSEDREQUIRESASLAUTH",
     "server requires SASL authentication"},
    {errc::throttled_op, "ZTHROTTLEDOP", "request throttled by the server; retry"},
};

const entry* find(int value) noexcept {
    for (const auto& e : entries) {
        if (static_cast<int>(e.code) == value) {
            return &e;
        }
    }
    return nullptr;
}

class zk_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "zkd.zk"; }

    std::string message(int value) const override {
        if (const auto* e = find(value)) {
            return std::string(e->message);
        }
        return "unknown ZooKeeper error " + std::to_string(value);
    }

    boost::system::error_condition default_error_condition(int value) const noexcept override {
        switch (static_cast<errc>(value)) {
        case errc::connection_loss:
        case errc::operation_timeout:
            return condition::retryable;
        case errc::no_node:
        case errc::node_exists:
        case errc::bad_version:
        case errc::not_empty:
        case errc::no_children_for_ephemerals:
            return condition::check_failed;
        case errc::session_expired:
        case errc::closing:
        case errc::auth_failed:
            return condition::session_lost;
        default:
            return {value, *this};
        }
    }
};

class zk_condition_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "zkd.zk.condition"; }

    std::string message(int value) const override {
        switch (static_cast<condition>(value)) {
        case condition::retryable:
            return "retryable: outcome unknown";
        case condition::check_failed:
            return "a precondition of the request failed";
        case condition::session_lost:
            return "ZooKeeper session lost";
        }
        return "unknown condition";
    }

    bool equivalent(const error_code& code, int cond) const noexcept override {
        // Our own timeouts (with_timeout) and abandoned waits leave the outcome unknown too.
        if (static_cast<condition>(cond) == condition::retryable &&
            code == boost::asio::error::operation_aborted) {
            return true;
        }
        return code.category() == zk_category() &&
               code.category().default_error_condition(code.value()) ==
                   boost::system::error_condition(cond, *this);
    }
};

}  // namespace

const boost::system::error_category& zk_category() noexcept {
    static const zk_category_impl instance;
    return instance;
}

const boost::system::error_category& zk_condition_category() noexcept {
    static const zk_condition_category_impl instance;
    return instance;
}

error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), zk_category()};
}

boost::system::error_condition make_error_condition(condition c) noexcept {
    return {static_cast<int>(c), zk_condition_category()};
}

error_code from_zk_rc(int rc) noexcept {
    if (rc == 0) {
        return {};
    }
    return make_error_code(static_cast<errc>(rc));
}

std::string_view errc_name(errc e) noexcept {
    if (const auto* found = find(static_cast<int>(e))) {
        return found->name;
    }
    return "ZUNKNOWN";
}

}  // namespace zkd::zkco
