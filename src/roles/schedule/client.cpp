// SPDX-License-Identifier: MIT
#include "roles/schedule/client.hpp"

#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "roles/schedule/zones.hpp"
#include "roles/txn/zk_ops.hpp"
#include "schedule/txn.hpp"
#include "zkco/read_batch.hpp"
#include "zkco/retry.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>

namespace zkd::roles {

namespace asio = boost::asio;
namespace sc = zkd::schedule;

namespace {

schedule_error zk_error(const std::string& what, zkco::error_code ec) {
    return schedule_error{schedule_error::kind::zookeeper, what + ": " + ec.message()};
}

schedule_error not_found(std::string_view name) {
    return schedule_error{
        schedule_error::kind::not_found, "no schedule named \"" + std::string(name) + "\""};
}

std::string random_client() {
    static thread_local std::mt19937 gen{std::random_device{}()};
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(gen()));
    return buf;
}

/// The document of `name` and its version.
struct stored {
    sc::schedule s;
    std::int32_t version = 0;
};

asio::awaitable<schedule_result<stored>> read_stored(zkco::client& zk, std::string_view name) {
    if (!sc::is_valid_name(name)) {
        co_return not_found(name);
    }
    auto d = co_await zkco::retry_unknown(zk, [&] { return zk.get(sc::schedule_node(name)); });
    if (!d) {
        if (d.error() == zkco::errc::no_node) {
            co_return not_found(name);
        }
        co_return zk_error("cannot read schedule " + std::string(name), d.error());
    }
    auto s = sc::decode(name, d->data, system_zones());
    if (!s) {
        co_return schedule_error{
            schedule_error::kind::garbage,
            "schedule " + std::string(name) + " is garbage: " + s.error().message};
    }
    co_return stored{std::move(*s), d->stat.version};
}

}  // namespace

void throw_exception_from_error(const schedule_error& e, const boost::source_location&) {
    throw std::runtime_error(e.message);
}

asio::awaitable<schedule_result<sc::schedule>> add_schedule(
    zkco::client& zk, const boost::json::value& request
) {
    auto parsed = sc::parse_request(request, system_zones());
    if (!parsed) {
        co_return schedule_error{schedule_error::kind::invalid, parsed.error().message};
    }
    auto s = std::move(*parsed);
    auto dir = co_await zkco::retry_unknown(zk, [&] { return zk.create(sc::schedules_dir(), ""); });
    if (!dir && dir.error() != zkco::errc::node_exists) {
        co_return zk_error("cannot make /schedules", dir.error());
    }
    for (int tries = 0; tries < 16; ++tries) {
        s.client = random_client();
        s.created_ms = protocol::now_ms();
        s.last_due_ms = s.created_ms;
        auto r = co_await zk.multi(to_zkco(sc::add_ops(s)));
        if (r) {
            co_return s;
        }
        const auto f = r.failed_op();
        if (!f) {
            // The answer was lost: the node says whether it was created, by this call (its
            // client part) or another.
            const bool retry = co_await zkco::reconnected_after(zk, r.ec);
            if (!retry) {
                co_return zk_error("cannot add schedule " + s.name, r.ec);
            }
            auto now = co_await read_stored(zk, s.name);
            if (now && now->s.client == s.client) {
                co_return now->s;
            }
            if (now) {
                break;  // someone else's
            }
            continue;
        }
        if (*f == 0 && r.results[0].ec == zkco::errc::node_exists) {
            continue;  // that client part is someone's already: draw another
        }
        if (*f == 1 && r.results[1].ec == zkco::errc::node_exists) {
            break;
        }
        if (*f == 0 && r.results[0].ec == zkco::errc::no_node) {
            co_return schedule_error{
                schedule_error::kind::zookeeper,
                "the namespace has no /results: is it a zkd cluster?"};
        }
        co_return zk_error("cannot add schedule " + s.name, r.results[*f].ec);
    }
    co_return schedule_error{
        schedule_error::kind::exists, "a schedule named \"" + s.name + "\" exists already"};
}

asio::awaitable<schedule_result<sc::schedule>> read_schedule(
    zkco::client& zk, std::string_view name
) {
    auto r = co_await read_stored(zk, name);
    if (!r) {
        co_return r.error();
    }
    co_return std::move(r->s);
}

asio::awaitable<schedule_result<schedule_listing>> list_schedules(zkco::client& zk) {
    schedule_listing out;
    auto kids =
        co_await zkco::retry_unknown(zk, [&] { return zk.get_children(sc::schedules_dir()); });
    if (!kids) {
        if (kids.error() == zkco::errc::no_node) {
            co_return out;
        }
        co_return zk_error("cannot list /schedules", kids.error());
    }
    auto names = kids->names;
    std::sort(names.begin(), names.end());
    std::vector<std::string> paths;
    paths.reserve(names.size());
    for (const auto& n : names) {
        paths.push_back(sc::schedule_node(n));
    }
    auto docs = co_await zkco::get_all(zk, paths);
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (!docs[i]) {
            if (docs[i].error() == zkco::errc::no_node) {
                continue;  // removed meanwhile
            }
            co_return zk_error("cannot read schedule " + names[i], docs[i].error());
        }
        auto s = sc::decode(names[i], docs[i]->data, system_zones());
        if (s) {
            out.schedules.push_back(std::move(*s));
        } else {
            out.garbage.emplace_back(names[i], s.error().message);
        }
    }
    co_return out;
}

asio::awaitable<schedule_result<sc::schedule>> pause_schedule(
    zkco::client& zk, std::string_view name, bool paused
) {
    for (;;) {
        auto r = co_await read_stored(zk, name);
        if (!r) {
            co_return r.error();
        }
        if (r->s.paused == paused) {
            co_return std::move(r->s);
        }
        r->s.paused = paused;
        auto w = co_await zk.multi(to_zkco(sc::change_ops(r->s, r->version)));
        if (w) {
            co_return std::move(r->s);
        }
        const auto f = w.failed_op();
        if (!f) {
            const bool retry = co_await zkco::reconnected_after(zk, w.ec);
            if (!retry) {
                co_return zk_error("cannot change schedule " + std::string(name), w.ec);
            }
            continue;  // read again: it says whether it took
        }
        if (*f == 0 && w.results[0].ec == zkco::errc::bad_version) {
            continue;  // the master fired it meanwhile: read again
        }
        if (*f == 0 && w.results[0].ec == zkco::errc::no_node) {
            co_return not_found(name);
        }
        co_return zk_error("cannot change schedule " + std::string(name), w.results[*f].ec);
    }
}

asio::awaitable<schedule_result<void>> remove_schedule(zkco::client& zk, std::string_view name) {
    if (!sc::is_valid_name(name)) {
        co_return not_found(name);
    }
    for (;;) {
        auto w = co_await zk.multi(to_zkco(sc::remove_ops(name)));
        if (w) {
            co_return schedule_result<void>{};
        }
        const auto f = w.failed_op();
        if (!f) {
            const bool retry = co_await zkco::reconnected_after(zk, w.ec);
            if (!retry) {
                co_return zk_error("cannot remove schedule " + std::string(name), w.ec);
            }
            auto e = co_await zk.exists(sc::schedule_node(name));
            if (e && !e->has_value()) {
                co_return schedule_result<void>{};
            }
            continue;
        }
        if (*f == 0 && w.results[0].ec == zkco::errc::no_node) {
            co_return not_found(name);
        }
        co_return zk_error("cannot remove schedule " + std::string(name), w.results[*f].ec);
    }
}

}  // namespace zkd::roles
