// SPDX-License-Identifier: MIT
#include "cli/session.hpp"

#include "protocol/task.hpp"
#include "roles/client/inspect.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/cluster/session_keeper.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>

#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <utility>

namespace asio = boost::asio;

namespace zkd::cli {

void complain(const std::string& message) {
    std::fprintf(stderr, "zkd: %s\n", printable(message).c_str());
}

std::string printable(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    const auto hex = [&](unsigned char c) {
        static constexpr char digits[] = "0123456789abcdef";
        out += "\\x";
        out += digits[c >> 4];
        out += digits[c & 0xf];
    };
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == 0x1b) {
            out += "\\e";
        } else if (c < 0x20 || c == 0x7f) {
            hex(c);
        } else if (c < 0x80) {
            out += static_cast<char>(c);
        } else {
            // A UTF-8 sequence passes whole if it is valid, minimal and not a C1 control.
            const std::size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
            std::uint32_t cp = len == 4 ? c & 0x07U : len == 3 ? c & 0x0fU : c & 0x1fU;
            bool ok = len > 0 && c < 0xf5 && i + len <= s.size();
            for (std::size_t k = 1; ok && k < len; ++k) {
                const auto cc = static_cast<unsigned char>(s[i + k]);
                ok = (cc & 0xc0) == 0x80;
                cp = (cp << 6) | (cc & 0x3fU);
            }
            const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
            ok = ok && !overlong && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) &&
                 !(cp >= 0x80 && cp <= 0x9f);
            if (ok) {
                out.append(s.substr(i, len));
                i += len;
                continue;
            }
            hex(c);
        }
        ++i;
    }
    return out;
}

namespace {

/// How a client command connects: one try of t.connect_timeout at most, retrying quick
/// failures within it, and no log lines (the command says what went wrong itself).
roles::connect_policy connect_policy_of(const cluster_target& t) {
    roles::connect_policy p;
    p.who = "zkd";
    p.attempt_timeout = t.connect_timeout;
    p.give_up_after = t.connect_timeout;
    p.log = false;
    return p;
}

/// `t`'s namespace: a valid connect string (target_of checked it) and the namespace's path
/// below its chroot.
roles::namespace_place place_of(const cluster_target& t) {
    auto place = roles::place_namespace(t.hosts, t.chroot);
    return place ? *place : roles::namespace_place{t.hosts, t.chroot};
}

/// Connects `zk` within the target's connect timeout; false (said on stderr, `zk` closed)
/// when ZooKeeper cannot be reached.
asio::awaitable<bool> connect_or_complain(zkco::client& zk, const cluster_target& t) {
    std::string why;
    auto c = co_await roles::connect_with_backoff(zk, connect_policy_of(t), &why);
    if (!c) {
        complain(
            "cannot reach ZooKeeper at " + t.hosts + " within " +
            std::to_string(t.connect_timeout.count()) +
            " ms: " + roles::describe_failure(c.error(), why)
        );
        co_await zk.close();
        co_return false;
    }
    co_return true;
}

asio::awaitable<int> connected(cluster_target t, namespace_mode mode, cluster_body body) {
    using namespace std::chrono_literals;
    zkco::client zk(co_await asio::this_coro::executor, t.session_config(10s));
    const bool reached = co_await connect_or_complain(zk, t);
    if (!reached) {
        co_return exit_unreachable;
    }
    zkco::result<protocol::layout> l = co_await roles::read_layout(zk);
    if (!l && l.error() == zkco::errc::no_node && mode == namespace_mode::create) {
        // No namespace yet (no `zkd run` so far): create it from the ensemble's root.
        const auto made = co_await roles::make_namespace(
            t.session_config(10s), place_of(t), connect_policy_of(t)
        );
        if (made) {
            l = co_await roles::ensure_layout(zk, protocol::meta_info{});
        } else {
            l = made.error();
        }
    }
    if (l && t.auth) {
        // Our credentials protect only what nobody else may touch: never hand a task (or
        // a result's consumption) to a namespace someone without them set up.
        const auto open = co_await roles::check_protected(zk, *l, *t.auth);
        if (open) {
            complain("refusing the namespace " + t.chroot + ": " + *open);
            co_await zk.close();
            co_return exit_failed;
        }
    }
    if (!l) {
        if (l.error() == zkco::errc::no_node) {
            std::string hint = "start one with 'zkd run --namespace " + t.ns + "'";
            if (mode == namespace_mode::offer_create) {
                hint += ", or pass --create-namespace to submit before any 'zkd run'";
            }
            complain(
                "no zkd cluster in namespace '" + t.ns + "' at " + t.hosts + " (nothing at " +
                t.chroot + "/meta; is --namespace right?): " + hint
            );
        } else if (l.error() == zkco::errc::no_auth && t.auth) {
            // Digest credentials are not checked when given, only when used: a wrong
            // password shows here, as a user the cluster's ACLs do not name.
            complain(
                "not allowed to read the cluster in " + t.chroot + " as user '" + t.auth->user +
                "': wrong password, or not the user the cluster was started with"
            );
        } else if (l.error() == zkco::errc::no_auth) {
            complain(
                "not allowed to read the cluster in " + t.chroot + ": it needs credentials (--user)"
            );
        } else if (l.error() == zkco::errc::data_inconsistency) {
            complain(
                "no usable cluster in " + t.chroot + ": " + t.chroot +
                "/meta is not a zkd meta node of protocol format " +
                std::to_string(protocol::protocol_format) +
                " (a namespace of an older zkd? let its tasks finish with that zkd, or drop "
                "it with 'zkd drop-namespace --yes')"
            );
        } else {
            complain("no usable cluster in " + t.chroot + ": " + l.error().message());
        }
        co_await zk.close();
        co_return exit_failed;
    }
    const int rc = co_await body(zk, *l);
    co_await zk.close();
    co_return rc;
}

asio::awaitable<int> connected_root(cluster_target t, root_body body) {
    using namespace std::chrono_literals;
    const auto place = place_of(t);
    auto cfg = t.session_config(10s);
    cfg.connect_string = place.hosts;
    zkco::client zk(co_await asio::this_coro::executor, cfg);
    const bool reached = co_await connect_or_complain(zk, t);
    if (!reached) {
        co_return exit_unreachable;
    }
    const int rc = co_await body(zk, place.path);
    co_await zk.close();
    co_return rc;
}

/// Runs `co` on an io_context of its own: its exit code, exit_failed if it threw.
int run_command(asio::awaitable<int> co) {
    spdlog::set_level(spdlog::level::err);  // a client command says what it has to say itself
    asio::io_context ioc(1);
    int rc = exit_failed;
    asio::co_spawn(ioc, std::move(co), [&](const std::exception_ptr& e, int r) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                complain(ex.what());
            }
            return;
        }
        rc = r;
    });
    ioc.run();
    return rc;
}

}  // namespace

int with_root(const cluster_target& t, root_body body) {
    return run_command(connected_root(t, std::move(body)));
}

int with_cluster(const cluster_target& t, namespace_mode mode, cluster_body body) {
    return run_command(connected(t, mode, std::move(body)));
}

}  // namespace zkd::cli
