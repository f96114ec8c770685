// SPDX-License-Identifier: MIT
// zkd-zkco-bench: pipelined creates/s and multi/s through zkco, against the same server
// driven by the raw ZooKeeper C client in the same run. Rounds alternate raw and zkco so
// that both see the same server state and noise; the report gives each round and the
// median ratio. This file includes zookeeper.h for the raw baseline only.
#include "zk_local/zk_local.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <poll.h>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct settings {
    std::string zk;            // empty: start a local server
    int ops = 20'000;          // creates per round
    int window = 1'000;        // requests in flight
    int batch = 20;            // creates per multi
    std::size_t payload = 16;  // bytes per node
    int rounds = 5;
    int warmup = 2;
    bool force_sync = false;
    bool json = false;
};

void usage(std::FILE* out) {
    std::fputs(
        "usage: zkd-zkco-bench [options]\n"
        "Pipelined creates/s and multi/s through zkco vs the raw ZooKeeper C client, same\n"
        "server, same run, alternating rounds. Prints a table and the median zkco/raw ratio.\n"
        "\n"
        "  --zk CONNECT     server to use (default: start a local standalone server)\n"
        "  --ops N          creates per round and mode (default 20000)\n"
        "  --window W       requests in flight (default 1000)\n"
        "  --batch B        creates per multi (default 20)\n"
        "  --payload BYTES  data per node (default 16)\n"
        "  --rounds R       rounds of each measurement (default 5)\n"
        "  --warmup W       rounds run first and not reported, to warm the JVM (default 2)\n"
        "  --force-sync     local server fsyncs its log (default: forceSync=no)\n"
        "  --json           one JSON object on stdout instead of the table\n"
        "  --help           this text\n"
        "Exit: 0 done, 1 failure, 2 usage error.\n",
        out
    );
}

std::optional<settings> parse(int argc, char** argv) {
    settings s;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::optional<std::string> {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "zkd-zkco-bench: %s needs a value\n", a.c_str());
                return std::nullopt;
            }
            return std::string(argv[++i]);
        };
        auto number = [&](int& out, int min) -> bool {
            auto v = value();
            if (!v) {
                return false;
            }
            try {
                std::size_t used = 0;
                out = std::stoi(*v, &used);
                if (used != v->size() || out < min) {
                    throw std::invalid_argument(*v);
                }
            } catch (const std::exception&) {
                std::fprintf(
                    stderr, "zkd-zkco-bench: %s wants a whole number >= %d, not '%s'\n", a.c_str(),
                    min, v->c_str()
                );
                return false;
            }
            return true;
        };
        int payload = 0;
        if (a == "--help" || a == "-h") {
            usage(stdout);
            std::exit(0);  // NOLINT(concurrency-mt-unsafe)
        } else if (a == "--zk") {
            auto v = value();
            if (!v) {
                return std::nullopt;
            }
            s.zk = *v;
        } else if (a == "--ops") {
            if (!number(s.ops, 1)) {
                return std::nullopt;
            }
        } else if (a == "--window") {
            if (!number(s.window, 1)) {
                return std::nullopt;
            }
        } else if (a == "--batch") {
            if (!number(s.batch, 1)) {
                return std::nullopt;
            }
        } else if (a == "--payload") {
            if (!number(payload, 0)) {
                return std::nullopt;
            }
            s.payload = static_cast<std::size_t>(payload);
        } else if (a == "--rounds") {
            if (!number(s.rounds, 1)) {
                return std::nullopt;
            }
        } else if (a == "--warmup") {
            if (!number(s.warmup, 0)) {
                return std::nullopt;
            }
        } else if (a == "--force-sync") {
            s.force_sync = true;
        } else if (a == "--json") {
            s.json = true;
        } else {
            std::fprintf(stderr, "zkd-zkco-bench: unknown option '%s' (see --help)\n", a.c_str());
            return std::nullopt;
        }
    }
    return s;
}

// --- raw C client ------------------------------------------------------------------------

/// Runs the single-threaded C client until `done()`: the loop a C program writes around
/// zookeeper_interest, poll and zookeeper_process; completions run inside the latter.
void raw_drive(zhandle_t* zh, const std::function<bool()>& done) {
    while (!done()) {
        int fd = -1;
        int interest = 0;
        timeval tv{0, 1000};
        if (zookeeper_interest(zh, &fd, &interest, &tv) == ZINVALIDSTATE) {
            throw std::runtime_error("raw client: the session is gone");
        }
        const int timeout_ms = static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000);
        pollfd p{fd, 0, 0};
        if ((interest & ZOOKEEPER_READ) != 0) {
            p.events |= POLLIN;
        }
        if ((interest & ZOOKEEPER_WRITE) != 0) {
            p.events |= POLLOUT;
        }
        int events = 0;
        if (::poll(&p, fd >= 0 ? 1 : 0, timeout_ms) > 0) {
            if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
                events |= ZOOKEEPER_READ;
            }
            if ((p.revents & (POLLOUT | POLLHUP | POLLERR)) != 0) {
                events |= ZOOKEEPER_WRITE;
            }
        }
        // One reply per call: read on while whole replies are there.
        while (zookeeper_process(zh, events) == ZOK && (events & ZOOKEEPER_READ) != 0 && !done()) {
            events = ZOOKEEPER_READ;
        }
    }
}

/// The raw baseline at its best: the first `window` requests are sent at once, then each
/// completion sends the next one, all on one thread with no handoff.
struct raw_run {
    zhandle_t* zh = nullptr;
    std::function<void(raw_run&, int)> issue;  // sends request i
    int total = 0;
    int next = 0;
    int failed = 0;
    int done = 0;

    void start(int window) {
        const int first = std::min(window, total);
        next = first;
        for (int i = 0; i < first; ++i) {
            issue(*this, i);
        }
        raw_drive(zh, [&] { return done == total; });
    }

    void complete(int rc) {
        if (rc != ZOK) {
            ++failed;
        }
        if (const int i = next++; i < total) {
            issue(*this, i);
        }
        ++done;
    }
};

void raw_string_done(int rc, const char* /*value*/, const void* data) {
    static_cast<raw_run*>(const_cast<void*>(data))->complete(rc);  // NOLINT
}

struct raw_multi_call {
    std::vector<zoo_op_t> ops;
    std::vector<zoo_op_result_t> results;
    std::vector<std::string> paths;
    std::vector<std::string> buffers;
    raw_run* run = nullptr;
};

void raw_multi_done(int rc, const void* data) {
    auto* call = static_cast<raw_multi_call*>(const_cast<void*>(data));  // NOLINT
    auto* run = call->run;
    delete call;  // NOLINT(cppcoreguidelines-owning-memory)
    run->complete(rc);
}

struct raw_client {
    zhandle_t* zh = nullptr;
    bool connected = false;

    static void watcher(zhandle_t*, int type, int state, const char*, void* ctx) {
        if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
            static_cast<raw_client*>(ctx)->connected = true;
        }
    }

    explicit raw_client(const std::string& connect) {
        zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
        zh = zookeeper_init(connect.c_str(), watcher, 30'000, nullptr, this, 0);
        if (zh == nullptr) {
            throw std::runtime_error("zookeeper_init failed");
        }
        const auto give_up = clock_type::now() + 30s;
        raw_drive(zh, [&] {
            if (clock_type::now() > give_up) {
                throw std::runtime_error("raw client: no connection within 30 s");
            }
            return connected;
        });
    }
    raw_client(const raw_client&) = delete;
    raw_client& operator=(const raw_client&) = delete;
    ~raw_client() { zookeeper_close(zh); }

    double creates(const std::string& parent, const settings& s) {
        const std::string data(s.payload, 'x');
        raw_run run;
        run.zh = zh;
        run.total = s.ops;
        run.issue = [&](raw_run& r, int i) {
            const std::string path = parent + "/n" + std::to_string(i);
            const int rc = zoo_acreate(
                r.zh, path.c_str(), data.data(), static_cast<int>(data.size()),
                &ZOO_OPEN_ACL_UNSAFE, 0, raw_string_done, &r
            );
            if (rc != ZOK) {
                r.complete(rc);
            }
        };
        const auto start = clock_type::now();
        run.start(s.window);
        const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
        if (run.failed != 0) {
            throw std::runtime_error("raw creates: " + std::to_string(run.failed) + " failed");
        }
        return s.ops / secs;
    }

    double multis(const std::string& parent, const settings& s) {
        const std::string data(s.payload, 'x');
        raw_run run;
        run.zh = zh;
        run.total = std::max(1, s.ops / s.batch);
        run.issue = [&](raw_run& r, int c) {
            auto* call = new raw_multi_call;  // NOLINT(cppcoreguidelines-owning-memory)
            call->run = &r;
            const auto n = static_cast<std::size_t>(s.batch);
            call->ops.resize(n);
            call->results.resize(n);
            call->paths.resize(n);
            call->buffers.resize(n);
            for (std::size_t i = 0; i < n; ++i) {
                call->paths[i] = parent + "/m" + std::to_string(c) + "-" + std::to_string(i);
                call->buffers[i].assign(call->paths[i].size() + 16, '\0');
                zoo_create_op_init(
                    &call->ops[i], call->paths[i].c_str(), data.data(),
                    static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE, 0, call->buffers[i].data(),
                    static_cast<int>(call->buffers[i].size())
                );
            }
            const int rc = zoo_amulti(
                r.zh, s.batch, call->ops.data(), call->results.data(), raw_multi_done, call
            );
            if (rc != ZOK) {
                delete call;  // NOLINT(cppcoreguidelines-owning-memory)
                r.complete(rc);
            }
        };
        const auto start = clock_type::now();
        run.start(std::max(1, s.window / s.batch));
        const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
        if (run.failed != 0) {
            throw std::runtime_error("raw multi: " + std::to_string(run.failed) + " failed");
        }
        return run.total / secs;
    }

    void make(const std::string& path) {
        struct call {
            int rc = ZOK;
            bool done = false;
        } c;
        const int rc = zoo_acreate(
            zh, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0,
            [](int rc2, const char*, const void* data) {
                auto* c2 = static_cast<call*>(const_cast<void*>(data));  // NOLINT
                c2->rc = rc2;
                c2->done = true;
            },
            &c
        );
        if (rc != ZOK) {
            c = {rc, true};
        }
        raw_drive(zh, [&] { return c.done; });
        if (c.rc != ZOK && c.rc != ZNODEEXISTS) {
            throw std::runtime_error("create " + path + ": " + zerror(c.rc));
        }
    }
};

// --- zkco -----------------------------------------------------------------------------------

/// Keeps `window` requests in flight; each completion issues the next one.
class zkco_runner {
public:
    zkco_runner(asio::io_context& ioc, zkd::zkco::client& zk) : ioc_(ioc), zk_(zk) {}

    double creates(const std::string& parent, const settings& s) {
        const std::string data(s.payload, 'x');
        return drive(s.ops, s.window, [&](int i, auto done) {
            zk_.async_create(
                parent + "/n" + std::to_string(i), data, {},
                [done](zkd::zkco::error_code ec, const std::string&) { done(ec); }
            );
        });
    }

    double multis(const std::string& parent, const settings& s) {
        const std::string data(s.payload, 'x');
        const int calls = std::max(1, s.ops / s.batch);
        const double per_s = drive(calls, std::max(1, s.window / s.batch), [&](int c, auto done) {
            std::vector<zkd::zkco::multi_op> ops;
            ops.reserve(static_cast<std::size_t>(s.batch));
            for (int i = 0; i < s.batch; ++i) {
                ops.emplace_back(zkd::zkco::op::create{
                    parent + "/m" + std::to_string(c) + "-" + std::to_string(i),
                    data,
                    zkd::zkco::create_mode::persistent,
                    {}});
            }
            zk_.async_multi(std::move(ops), [done](zkd::zkco::error_code ec, const auto&) {
                done(ec);
            });
        });
        return per_s;
    }

private:
    template <class Issue>
    double drive(int total, int window, Issue issue) {
        int next = 0;
        int done = 0;
        int failed = 0;
        std::function<void(zkd::zkco::error_code)> on_done;
        on_done = [&](zkd::zkco::error_code ec) {
            ++done;
            if (ec) {
                ++failed;
            }
            if (next < total) {
                issue(next++, on_done);
            }
        };
        const auto start = clock_type::now();
        while (next < std::min(window, total)) {
            issue(next++, on_done);
        }
        ioc_.restart();
        // NOLINTNEXTLINE(bugprone-infinite-loop): the completions run_one() runs count `done`
        while (done < total) {
            ioc_.run_one();
        }
        const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
        if (failed != 0) {
            throw std::runtime_error("zkco: " + std::to_string(failed) + " requests failed");
        }
        return total / secs;
    }

    asio::io_context& ioc_;
    zkd::zkco::client& zk_;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed = parse(argc, argv);
    if (!parsed) {
        return 2;
    }
    const settings s = *parsed;
    spdlog::set_level(spdlog::level::warn);
    try {
        std::optional<zkd::zk_local::cluster> local;
        std::string connect = s.zk;
        if (connect.empty()) {
            zkd::zk_local::options opts;
            opts.force_sync = s.force_sync;
            opts.jvm_heap = "1g";
            local.emplace(zkd::zk_local::cluster::start(opts));
            connect = local->connect_string();
        }
        const std::string root = "/zkco-bench-" + std::to_string(::getpid());

        raw_client raw(connect);
        raw.make(root);

        asio::io_context ioc;
        zkd::zkco::config cfg;
        cfg.connect_string = connect;
        cfg.session_timeout = 30s;
        zkd::zkco::client zk(ioc.get_executor(), cfg);
        std::optional<zkd::zkco::error_code> connected;
        zk.async_connect([&](zkd::zkco::error_code ec) { connected = ec; });
        while (!connected) {
            ioc.run_one();
        }
        if (*connected) {
            throw std::runtime_error("zkco connect: " + connected->message());
        }
        zkco_runner runner(ioc, zk);

        std::vector<double> raw_c;
        std::vector<double> zk_c;
        std::vector<double> raw_m;
        std::vector<double> zk_m;
        std::vector<double> ratio_c;
        std::vector<double> ratio_m;
        for (int r = 0; r < s.warmup + s.rounds; ++r) {
            const std::string base = root + "/r" + std::to_string(r);
            for (const auto* kind : {"/raw", "/zkco"}) {
                raw.make(base);
                raw.make(base + kind);
            }
            // Alternate who goes first, so neither always meets a fresher server.
            const bool raw_first = r % 2 == 0;
            auto run_creates = [&](bool is_raw) {
                (is_raw ? raw_c : zk_c)
                    .push_back(
                        is_raw ? raw.creates(base + "/raw", s) : runner.creates(base + "/zkco", s)
                    );
            };
            auto run_multis = [&](bool is_raw) {
                (is_raw ? raw_m : zk_m)
                    .push_back(
                        is_raw ? raw.multis(base + "/raw", s) : runner.multis(base + "/zkco", s)
                    );
            };
            run_creates(raw_first);
            run_creates(!raw_first);
            run_multis(raw_first);
            run_multis(!raw_first);
            if (r < s.warmup) {
                raw_c.pop_back();
                zk_c.pop_back();
                raw_m.pop_back();
                zk_m.pop_back();
                continue;
            }
            ratio_c.push_back(zk_c.back() / raw_c.back());
            ratio_m.push_back(zk_m.back() / raw_m.back());
            if (!s.json) {
                std::fprintf(
                    stderr,
                    "round %d: creates/s raw %.0f zkco %.0f (%.2fx); multi/s raw %.0f "
                    "zkco %.0f (%.2fx)\n",
                    r + 1 - s.warmup, raw_c.back(), zk_c.back(), ratio_c.back(), raw_m.back(),
                    zk_m.back(), ratio_m.back()
                );
            }
        }

        if (s.json) {
            std::printf(
                "{\"ops\":%d,\"window\":%d,\"batch\":%d,\"payload\":%zu,\"rounds\":%d,"
                "\"force_sync\":%s,\"raw_creates_per_s\":%.0f,\"zkco_creates_per_s\":%.0f,"
                "\"creates_ratio\":%.3f,\"raw_multis_per_s\":%.0f,\"zkco_multis_per_s\":%.0f,"
                "\"multis_ratio\":%.3f,\"zkco_multi_creates_per_s\":%.0f}\n",
                s.ops, s.window, s.batch, s.payload, s.rounds, s.force_sync ? "true" : "false",
                median(raw_c), median(zk_c), median(ratio_c), median(raw_m), median(zk_m),
                median(ratio_m), median(zk_m) * s.batch
            );
        } else {
            std::printf(
                "zkco vs raw C client, %d creates/round, window %d, %zu-byte nodes, "
                "multi of %d, %d rounds (medians), forceSync=%s\n",
                s.ops, s.window, s.payload, s.batch, s.rounds,
                local ? (s.force_sync ? "yes" : "no") : "server's own"
            );
            std::printf("| measurement | raw C client | zkco | zkco / raw |\n");
            std::printf("|---|---:|---:|---:|\n");
            std::printf(
                "| creates/s | %.0f | %.0f | %.2fx |\n", median(raw_c), median(zk_c),
                median(ratio_c)
            );
            std::printf(
                "| multi/s (%d creates each) | %.0f | %.0f | %.2fx |\n", s.batch, median(raw_m),
                median(zk_m), median(ratio_m)
            );
            std::printf(
                "| creates/s inside multi | %.0f | %.0f | |\n", median(raw_m) * s.batch,
                median(zk_m) * s.batch
            );
        }
        zk.async_close([] {});
        ioc.restart();
        ioc.run();
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "zkd-zkco-bench: %s\n", e.what());
        return 1;
    }
}
