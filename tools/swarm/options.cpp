// SPDX-License-Identifier: MIT
#include "swarm/options.hpp"

#include "protocol/syntax.hpp"
#include "zkco/config.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace zkd::swarm {

namespace {

constexpr const char* help = R"(usage: zkd-swarm [options]

Holds many ZooKeeper sessions in one process, each a zkd worker that follows the protocol
(docs/protocol.md §7 "Worker"): the real worker code (run_worker), one session per worker,
all on one event loop. It registers under /workers, takes the tasks assigned to it, runs
them and publishes their results, so that a master and clients (`zkd run`, zkd-loadgen)
can be measured against a thousand workers on one machine. The cluster must exist (start a
`zkd run` first; `--role standby` for a master that runs no tasks).

Task types its workers serve, both waiting on a timer, never on a thread:
  echo     returns its args after --task-ms (plus up to --task-jitter)
  sleep    {"ms": n} or n: returns {"slept_ms": n} after n ms (zkd-loadgen --task sleep:MS)

Once every worker has joined it prints one line (stdout):
  zkd-swarm: N workers joined in S s; rss R MiB (B bytes per worker)
On SIGINT/SIGTERM or after --duration every worker drains (finishes and publishes what it
holds) and the run prints a summary (--json: one JSON object): workers, tasks published,
how many workers ran a task, the least and most tasks per worker, sessions lost, memory.
A second signal stops at once (what workers hold is requeued by the master).

options:
  --zk HOSTS             ZooKeeper connect string (default: $ZKD_ZK or 127.0.0.1:2181)
  --namespace NAME       the cluster's namespace (default: $ZKD_NAMESPACE or default)
  --workers N            workers, one session each (default 100; 1 to 100000)
  --capacity N           tasks each worker holds at once (default 4)
  --threads N            tasks each worker says it runs side by side (default 1)
  --task-ms D            how long an echo task takes (default 0; 500ms, 2s, a bare number: ms)
  --task-jitter D        up to this much more, uniformly, per echo task (default 0)
  --connect-rate R       sessions opened per second at most (default 200): a burst of
                         session creates can overload a server
  --connect-timeout D    reach ZooKeeper and find the cluster within this (default 30s)
  --session-timeout D    each worker's session timeout (default 10s)
  --duration D           drain and stop after this long (default: run until a signal)
  --host NAME            host part of the member ids (default: this host's name); worker i
                         is <host>.w<i>-<pid>-<random>
  --json                 the summary as one JSON object
  --help                 this text;  --version  the version

exit codes: 0 ran and stopped, every worker joined; 1 some worker never joined or the run
failed; 2 bad command line; 3 ZooKeeper unreachable; 5 no zkd cluster in the namespace.
Each session is one connection (file descriptor) to ZooKeeper: raise `ulimit -n` past the
worker count, and check the server's maxClientCnxns (connections per client address; 60 by
default in ZooKeeper, 0 (none) in zkd-zk-local's servers).
)";

const std::vector<std::string>& switches() {
    static const std::vector<std::string> v{"--help", "--json"};
    return v;
}

const std::vector<std::string>& valued() {
    static const std::vector<std::string> v{
        "--zk",       "--namespace",   "--workers",      "--capacity",        "--threads",
        "--task-ms",  "--task-jitter", "--connect-rate", "--connect-timeout", "--session-timeout",
        "--duration", "--host",
    };
    return v;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

std::uint64_t whole(
    const std::string& name, const std::string& text, std::uint64_t min, std::uint64_t max
) {
    const auto fail = [&] {
        return usage_error(
            name + " wants a whole number from " + std::to_string(min) + " to " +
            std::to_string(max) + ", not '" + text + "'"
        );
    };
    if (text.empty() || text.size() > 12 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        throw fail();
    }
    const auto v = std::stoull(text);
    if (v < min || v > max) {
        throw fail();
    }
    return v;
}

std::chrono::milliseconds millis(
    const std::string& name, const std::string& text, std::int64_t min, std::int64_t max
) {
    const auto d = protocol::parse_duration(text);
    if (!d || d->count() < min || d->count() > max) {
        throw usage_error(
            name + " wants a duration from " + std::to_string(min) + "ms to " +
            std::to_string(max) + "ms (" + std::string(protocol::duration_forms) + "), not '" +
            text + "'"
        );
    }
    return *d;
}

constexpr std::int64_t day_ms = 86'400'000;

}  // namespace

const char* help_text() noexcept {
    return help;
}

parsed_args parse_args(const std::vector<std::string>& args, const env_lookup& env) {
    std::map<std::string, std::string> flags;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string name = args[i];
        if (name.rfind("--", 0) != 0 || name == "--") {
            throw usage_error("unexpected argument '" + name + "'");
        }
        std::string value;
        bool has_value = false;
        if (const auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name.resize(eq);
            has_value = true;
        }
        if (contains(switches(), name)) {
            if (has_value) {
                throw usage_error(name + " takes no value");
            }
        } else if (contains(valued(), name)) {
            if (!has_value) {
                if (i + 1 >= args.size()) {
                    throw usage_error(name + " needs a value");
                }
                value = args[++i];
            }
        } else {
            throw usage_error("unknown option " + name);
        }
        if (flags.contains(name)) {
            throw usage_error(name + " given twice");
        }
        flags[name] = value;
    }

    parsed_args out;
    if (flags.contains("--help")) {
        out.help = true;
        return out;
    }
    settings& s = out.s;
    const auto get = [&](const std::string& k) -> std::optional<std::string> {
        if (auto it = flags.find(k); it != flags.end()) {
            return it->second;
        }
        return std::nullopt;
    };

    if (auto v = get("--zk")) {
        s.zk = *v;
    } else if (auto e = env("ZKD_ZK")) {
        s.zk = *e;
    }
    if (!zkco::parse_connect_string(s.zk)) {
        throw usage_error("--zk wants host:port[,host:port...][/path], not '" + s.zk + "'");
    }
    if (auto v = get("--namespace")) {
        s.ns = *v;
    } else if (auto e = env("ZKD_NAMESPACE")) {
        s.ns = *e;
    }
    if (s.ns.empty() || s.ns.find('/') != std::string::npos || s.ns == "." || s.ns == "..") {
        throw usage_error("--namespace wants a name without '/', not '" + s.ns + "'");
    }
    if (auto v = get("--workers")) {
        s.workers = whole("--workers", *v, 1, 100'000);
    }
    if (auto v = get("--capacity")) {
        s.capacity = static_cast<int>(whole("--capacity", *v, 1, 1'000'000));
    }
    if (auto v = get("--threads")) {
        s.threads = static_cast<int>(whole("--threads", *v, 1, 1'000'000));
    }
    if (auto v = get("--task-ms")) {
        s.task_ms = millis("--task-ms", *v, 0, day_ms);
    }
    if (auto v = get("--task-jitter")) {
        s.task_jitter = millis("--task-jitter", *v, 0, day_ms);
    }
    if (auto v = get("--connect-rate")) {
        const auto fail = usage_error(
            "--connect-rate wants sessions per second above 0 and at most 100000, not '" + *v + "'"
        );
        try {
            std::size_t used = 0;
            s.connect_rate = std::stod(*v, &used);
            if (used != v->size() || !std::isfinite(s.connect_rate) || s.connect_rate <= 0 ||
                s.connect_rate > 100'000) {
                throw fail;
            }
        } catch (const std::logic_error&) {
            throw fail;
        }
    }
    if (auto v = get("--connect-timeout")) {
        s.connect_timeout = millis("--connect-timeout", *v, 100, day_ms);
    }
    if (auto v = get("--session-timeout")) {
        s.session_timeout = millis("--session-timeout", *v, 1'000, 3'600'000);
    }
    if (auto v = get("--duration")) {
        s.duration = millis("--duration", *v, 1, 30 * day_ms);
    }
    if (auto v = get("--host")) {
        if (v->empty() || v->size() > 200) {
            throw usage_error("--host wants a name of 1 to 200 characters");
        }
        s.host = *v;
    }
    s.json = flags.contains("--json");
    return out;
}

}  // namespace zkd::swarm
