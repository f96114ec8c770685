// SPDX-License-Identifier: MIT
#include "loadgen/raw.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <functional>
#include <memory>

namespace asio = boost::asio;

namespace zkd::loadgen {

double median(std::vector<double> v) {
    if (v.empty()) {
        return 0;
    }
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

using clock_type = std::chrono::steady_clock;
using done_fn = std::function<void(zkco::error_code)>;
/// Sends request `i`; calls the done function exactly once when it completes.
using issue_fn = std::function<void(std::uint64_t, done_fn)>;

struct pipeline_outcome {
    double per_s = 0;
    std::uint64_t failed = 0;
    zkco::error_code first_error;
};

/// Keeps `window` requests in flight until `total` have completed; yields the rate.
asio::awaitable<pipeline_outcome> pipeline(
    asio::any_io_executor ex, std::uint64_t total, std::uint64_t window, issue_fn issue
) {
    struct state {
        explicit state(const asio::any_io_executor& e)
            : all_done(e, asio::steady_timer::time_point::max()) {}
        std::uint64_t total = 0;
        std::uint64_t next = 0;
        std::uint64_t done = 0;
        pipeline_outcome outcome;
        issue_fn issue;
        done_fn on_done;
        asio::steady_timer all_done;
    };
    auto st = std::make_shared<state>(ex);
    st->total = total;
    st->issue = std::move(issue);
    // The state owns its completion function, which refers back to it weakly: no cycle.
    st->on_done = [weak = std::weak_ptr(st)](zkco::error_code ec) {
        auto s = weak.lock();
        if (!s) {
            return;
        }
        ++s->done;
        if (ec) {
            if (s->outcome.failed++ == 0) {
                s->outcome.first_error = ec;
            }
        }
        if (s->next < s->total) {
            s->issue(s->next++, s->on_done);
        }
        if (s->done == s->total) {
            s->all_done.cancel();
        }
    };
    const auto start = clock_type::now();
    const std::uint64_t first = std::min(window, total);
    while (st->next < first) {
        st->issue(st->next++, st->on_done);
    }
    if (st->done < st->total) {
        co_await st->all_done.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
    st->outcome.per_s = secs > 0 ? static_cast<double>(total) / secs : 0;
    co_return st->outcome;
}

std::string create_path(const std::string& dir, std::uint64_t i) {
    return dir + "/n" + std::to_string(i);
}

std::string multi_path(const std::string& dir, std::uint64_t call, std::uint64_t i) {
    return dir + "/m" + std::to_string(call) + "-" + std::to_string(i);
}

/// Deletes `paths` in multis of up to 500, 8 in flight. Yields the number of failures.
asio::awaitable<std::uint64_t> remove_all(zkco::client& zk, std::vector<std::string> paths) {
    constexpr std::size_t per_multi = 500;
    const std::uint64_t calls = (paths.size() + per_multi - 1) / per_multi;
    if (calls == 0) {
        co_return 0;
    }
    auto shared = std::make_shared<std::vector<std::string>>(std::move(paths));
    issue_fn issue = [&zk, shared](std::uint64_t c, done_fn done) {
        std::vector<zkco::multi_op> ops;
        const std::size_t from = c * per_multi;
        const std::size_t to = std::min(shared->size(), from + per_multi);
        ops.reserve(to - from);
        for (std::size_t i = from; i < to; ++i) {
            ops.emplace_back(zkco::op::remove{(*shared)[i], zkco::any_version});
        }
        zk.async_multi(
            std::move(ops),
            [&zk, shared, from, to, done = std::move(done)](zkco::error_code ec, auto&&) {
                if (ec != zkco::errc::no_node) {
                    done(ec);
                    return;
                }
                // Some node was never made (a failed run): delete this chunk one by one.
                auto left = std::make_shared<std::size_t>(to - from);
                auto first = std::make_shared<zkco::error_code>();
                for (std::size_t i = from; i < to; ++i) {
                    zk.async_remove(
                        (*shared)[i], zkco::any_version,
                        [left, first, done](zkco::error_code e) {
                            if (e && e != zkco::errc::no_node && !*first) {
                                *first = e;
                            }
                            if (--*left == 0) {
                                done(*first);
                            }
                        }
                    );
                }
            }
        );
    };
    const auto out = co_await pipeline(zk.get_executor(), calls, 8, std::move(issue));
    co_return out.failed;
}

}  // namespace

asio::awaitable<fetched<raw_report>> measure_raw(
    zkco::client& zk, raw_settings s, std::string base
) {
    raw_report report;
    report.settings = s;
    const auto data = std::make_shared<const std::string>(s.payload, 'x');
    std::string error;
    std::vector<std::string> made;  // for the clean-up, children before parents
    std::vector<std::string> dirs;

    auto mk = co_await zk.create(base);
    if (!mk) {
        co_return fetched<raw_report>{{}, "create " + base + ": " + mk.error().message()};
    }
    const std::uint64_t calls = std::max<std::uint64_t>(1, s.ops / s.batch);
    const std::uint64_t multi_window = std::max<std::uint64_t>(1, s.window / s.batch);
    for (int r = 0; r < s.warmup + s.rounds && error.empty(); ++r) {
        const std::string cdir = base + "/c" + std::to_string(r);
        const std::string mdir = base + "/m" + std::to_string(r);
        auto c1 = co_await zk.create(cdir);
        auto c2 = co_await zk.create(mdir);
        if (!c1 || !c2) {
            error = "create a round's directory: " + (c1 ? c2.error() : c1.error()).message();
            break;
        }
        dirs.push_back(cdir);
        dirs.push_back(mdir);

        issue_fn creates = [&zk, cdir, data](std::uint64_t i, done_fn done) {
            zk.async_create(
                create_path(cdir, i), *data, {},
                [done = std::move(done)](zkco::error_code ec, const std::string&) { done(ec); }
            );
        };
        const auto c = co_await pipeline(zk.get_executor(), s.ops, s.window, std::move(creates));
        for (std::uint64_t i = 0; i < s.ops; ++i) {
            made.push_back(create_path(cdir, i));
        }
        if (c.failed > 0) {
            error = std::to_string(c.failed) + " creates failed, the first with " +
                    c.first_error.message();
            break;
        }

        const std::uint64_t batch = s.batch;
        issue_fn multis = [&zk, mdir, data, batch](std::uint64_t call, done_fn done) {
            std::vector<zkco::multi_op> ops;
            ops.reserve(batch);
            for (std::uint64_t i = 0; i < batch; ++i) {
                ops.emplace_back(zkco::op::create{
                    multi_path(mdir, call, i), *data, zkco::create_mode::persistent, {}});
            }
            zk.async_multi(std::move(ops), [done = std::move(done)](zkco::error_code ec, auto&&) {
                done(ec);
            });
        };
        const auto m = co_await pipeline(zk.get_executor(), calls, multi_window, std::move(multis));
        for (std::uint64_t call = 0; call < calls; ++call) {
            for (std::uint64_t i = 0; i < batch; ++i) {
                made.push_back(multi_path(mdir, call, i));
            }
        }
        if (m.failed > 0) {
            error = std::to_string(m.failed) + " multis failed, the first with " +
                    m.first_error.message();
            break;
        }
        if (r >= s.warmup) {
            report.create_rounds.push_back(c.per_s);
            report.multi_rounds.push_back(m.per_s);
        }
    }

    // Clean up whatever the session still allows: nodes, then round dirs, then the base.
    std::uint64_t left = co_await remove_all(zk, std::move(made));
    left += co_await remove_all(zk, std::move(dirs));
    std::vector<std::string> root{base};
    left += co_await remove_all(zk, std::move(root));
    if (error.empty() && left > 0) {
        error = "could not delete every scratch node under " + base;
    }
    if (!error.empty()) {
        co_return fetched<raw_report>{{}, error};
    }
    report.creates_per_s = median(report.create_rounds);
    report.multis_per_s = median(report.multi_rounds);
    co_return fetched<raw_report>{report, {}};
}

}  // namespace zkd::loadgen
