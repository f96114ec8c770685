// SPDX-License-Identifier: MIT
#include "cli/session.hpp"

#include "roles/election.hpp"
#include "roles/inspect.hpp"
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

/// `t` without any chroot, and the namespace's full path on the ensemble.
std::pair<cluster_target, std::string> bare_target(const cluster_target& t) {
    auto parts = zkco::parse_connect_string(t.hosts);  // valid: target_of checked it
    const std::string full = (parts ? parts->chroot : std::string()) + t.chroot;
    auto bare = t;
    if (parts) {
        parts->chroot.clear();
        bare.hosts = zkco::format_connect_string(*parts);
    }
    bare.chroot.clear();
    return {bare, full};
}

/// Creates /zkd/<ns> (below the connect string's own path, if any).
asio::awaitable<zkco::result<void>> make_namespace(cluster_target t) {
    using namespace std::chrono_literals;
    const auto [bare, full] = bare_target(t);
    zkco::client root(co_await asio::this_coro::executor, bare.session_config(10s));
    auto c = co_await zkco::with_timeout(root.connect(), t.connect_timeout);
    zkco::result<void> made = zkco::result<void>();
    if (c) {
        made = co_await roles::ensure_chroot(root, full);
    } else {
        made = c.error();
    }
    co_await root.close();
    co_return made;
}

/// Connects `zk` within the target's connect timeout; false (said on stderr, `zk` closed)
/// when ZooKeeper cannot be reached.
asio::awaitable<bool> connect_or_complain(zkco::client& zk, const cluster_target& t) {
    auto c = co_await zkco::with_timeout(zk.connect(), t.connect_timeout);
    if (!c) {
        complain("cannot reach ZooKeeper at " + t.hosts + " within " +
                 std::to_string(t.connect_timeout.count()) + " ms: " + c.error().message());
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
        const auto made = co_await make_namespace(t);
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
            complain("no zkd cluster in namespace '" + t.ns + "' at " + t.hosts + " (nothing at " +
                     t.chroot + "/meta; is --namespace right?): " + hint);
        } else if (l.error() == zkco::errc::no_auth) {
            complain("not allowed to read the cluster in " + t.chroot + ": it needs credentials (--user)");
        } else if (l.error() == zkco::errc::data_inconsistency) {
            complain("no usable cluster in " + t.chroot + ": " + t.chroot +
                     "/meta is not a zkd meta node");
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
    const auto [bare, full] = bare_target(t);
    zkco::client zk(co_await asio::this_coro::executor, bare.session_config(10s));
    const bool reached = co_await connect_or_complain(zk, t);
    if (!reached) {
        co_return exit_unreachable;
    }
    const int rc = co_await body(zk, full);
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
