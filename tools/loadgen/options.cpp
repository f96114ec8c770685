// SPDX-License-Identifier: MIT
#include "loadgen/options.hpp"

#include "protocol/syntax.hpp"
#include "protocol/task.hpp"
#include "zkco/config.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>

namespace zkd::loadgen {

namespace {

constexpr const char* help = R"(usage: zkd-loadgen [options]

Drives a running zkd cluster (started with `zkd run`) through the client library and reports
throughput, latency submit -> result and its stages (submit -> started -> finished -> result,
from the times workers write into results: whole ms, the workers' clocks), errors, and
ZooKeeper requests per task. Optionally measures the server's own ceiling (pipelined
creates/s and multi/s) in the same run.

Cluster:
  --zk CONNECT            ZooKeeper hosts[/path] (env ZKD_ZK; default 127.0.0.1:2181)
  --namespace NS          cluster namespace (env ZKD_NAMESPACE; default "default"); the
                          cluster lives in <path>/zkd/<NS>
  --user NAME             digest credentials of a cluster run with --user (env ZKD_USER)
  --password P            its password (env ZKD_PASSWORD), or
  --password-file FILE    the password from the file's first line
  --connect-timeout DUR   give up reaching ZooKeeper after DUR (exit 3; default 10s)
  --session-timeout DUR   the loadgen's session timeout (default 10s); a server that grants
                          another is reported on stderr
  --wait-workers DUR      wait up to DUR for the cluster and for --workers workers serving
                          the task type (default 10s); fewer by then: exit 5
  --workers N             how many workers to wait for before starting (default 1)
  --allow-no-workers      submit even when no worker serves the type (with --submit-only)

Load (without --tasks and --duration: --tasks 1000):
  --tasks N               submit N tasks
  --duration DUR          submit for DUR (30s, 5m; a bare number is seconds, decimals
                          allowed); with --tasks, whichever ends first. Results of tasks
                          submitted are always awaited.
  --concurrency C         closed loop: keep C tasks in flight (default 64)
  --rate R                open loop: submit R tasks/s on schedule, whatever the results do
                          (latency counts from each task's scheduled time)
  --max-in-flight N       open loop: submit no more while N tasks are in flight (the run
                          falls behind schedule, which is reported; default 100000)
  --task SPEC             echo (default), spin:MS (burn CPU for MS ms), sleep:MS
  --type NAME             instead of --task: tasks of any registered type NAME (an exec
                          type, say), each with the args of --args
  --args JSON             the args of every --type task (default {})
  --payload BYTES         echo: a string of BYTES; spin/sleep: a "pad" string of BYTES
                          beside "ms" when BYTES > 0 (default 16)
  --batch N               tasks per task_client::submit() call (default 1); the client's
                          batcher folds what is queued into T1 multis
  --bundle N              tasks per bundle (one node for up to N tasks of one submit call,
                          docs/protocol.md 4.1); at most --batch count; default 1 (none)
  --auto-bundle N         the client packs the tasks of submit calls that come while its
                          transaction is in flight into bundles of up to N by itself
                          (docs/protocol.md 4.1 "Automatic bundles"; only while /master
                          says every member follows early results); default 64, the
                          client's; 1: off
  --no-direct             every task goes to pending for the master to place (default:
                          the client places plain tasks on workers with room itself,
                          docs/protocol.md 6 T1 "Direct placement")
  --priority P            0 (lowest) to 9 (highest), default 5
  --task-timeout DUR      the handler's time limit (default none)
  --max-attempts N        runs allowed if workers die (default 3)
  --stall-timeout DUR     stop with exit 4 when tasks are in flight and no result came for
                          DUR (default 30s)
  --submit-only           submit and exit without waiting for results (they stay in the
                          cluster: for memory measurements; prints only counts)

Raw ceiling (the same server through the same client library, zkco):
  --raw                   measure only the ceiling, drive no tasks
  --with-raw              measure the ceiling first, then drive tasks; report the ratio
                          tasks/s / raw creates/s
  --raw-ops N             creates per round and measurement (default 20000)
  --raw-window W          requests in flight (default 1000)
  --raw-batch B           creates per multi (default 20)
  --raw-rounds R          measured rounds, medians reported (default 3)
  --raw-warmup R          rounds run first and not reported (default 1)
  --raw-payload BYTES     bytes per node (default: the size of one encoded task)

Output:
  --json                  one JSON object on stdout instead of the text report
  --progress              a progress line on stderr every second (default: only when
                          stderr is a terminal)
  --no-progress           never a progress line
  --no-mntr               do not ask the servers for `mntr` counters
  --cdf FILE              write the latency CDF as "ms fraction" lines to FILE
  --trace FILE            write a line per result to FILE: when it was due (ms from the
                          start), its latency (ms), when its handler started and finished
                          (the worker's wall clock, ms since the epoch; 0: not run) and the
                          worker: to see whether slow tasks come alone or in stalls
  --help                  this text
  --version               the version

ZooKeeper requests per task come from the servers' `mntr` before and after the run, summed
over the hosts of --zk: writes = zk_cnt_updatelatency (requests with a transaction: create,
delete, setData, each multi as one, failed writes, session create/close); reads =
zk_cnt_readlatency (exists, getData, getChildren, sync, and pings). They count every client
of the servers, not only this one. The loadgen's own session is counted apart (zkco
counters: reads, write transactions, write ops inside them, multis, watches), with the
listings of its results directory (one to start following it, then one per change log
read that missed a change).

Durations take a unit as zkd's do (500ms, 30s, 5m, 2h, or several from largest to smallest:
4m30s); a bare number is milliseconds (except for --duration: seconds), as in earlier versions.

Exit codes: 0 every task succeeded, 1 a task did not succeed or the run failed, 2 usage
error, 3 ZooKeeper unreachable (not reached within --connect-timeout, or lost during the
run: the session ended, which zkco declares once the servers have been unreachable for the
session timeout), 4 stalled, 5 no cluster or no worker for the task type.
)";

/// Option names that take a value; anything else known is a switch.
const std::vector<std::string>& valued() {
    static const std::vector<std::string> v{
        "--zk",
        "--namespace",
        "--connect-timeout",
        "--session-timeout",
        "--user",
        "--password",
        "--password-file",
        "--wait-workers",
        "--workers",
        "--tasks",
        "--duration",
        "--concurrency",
        "--rate",
        "--max-in-flight",
        "--task",
        "--type",
        "--args",
        "--payload",
        "--batch",
        "--bundle",
        "--auto-bundle",
        "--priority",
        "--task-timeout",
        "--max-attempts",
        "--stall-timeout",
        "--raw-ops",
        "--raw-window",
        "--raw-batch",
        "--raw-rounds",
        "--raw-warmup",
        "--raw-payload",
        "--cdf",
        "--trace",
    };
    return v;
}

const std::vector<std::string>& switches() {
    static const std::vector<std::string> v{
        "--help", "--allow-no-workers", "--submit-only", "--raw",     "--with-raw",
        "--json", "--progress",         "--no-progress", "--no-mntr", "--no-direct",
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
    if (text.empty() ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        throw fail();
    }
    try {
        std::size_t used = 0;
        const unsigned long long v = std::stoull(text, &used);
        if (used != text.size() || v < min || v > max) {
            throw fail();
        }
        return v;
    } catch (const std::logic_error&) {
        throw fail();
    }
}

double positive(const std::string& name, const std::string& text, double max) {
    const auto fail = [&] {
        return usage_error(
            name + " wants a number above 0 and at most " +
            std::to_string(static_cast<long long>(max)) + ", not '" + text + "'"
        );
    };
    try {
        std::size_t used = 0;
        const double v = std::stod(text, &used);
        if (used != text.size() || !std::isfinite(v) || v <= 0 || v > max) {
            throw fail();
        }
        return v;
    } catch (const std::logic_error&) {
        throw fail();
    }
}

/// A duration option as zkd takes them (protocol::parse_duration: 500ms, 30s, 4m30s, 2h; a
/// bare number is milliseconds), within [min, max] ms.
std::chrono::milliseconds millis(
    const std::string& name, const std::string& text, std::uint64_t min, std::uint64_t max
) {
    const auto d = protocol::parse_duration(text);
    if (!d || d->count() < 0 || static_cast<std::uint64_t>(d->count()) < min ||
        static_cast<std::uint64_t>(d->count()) > max) {
        throw usage_error(
            name + " wants a duration from " + std::to_string(min) + "ms to " +
            std::to_string(max) + "ms (" + std::string(protocol::duration_forms) + "), not '" +
            text + "'"
        );
    }
    return *d;
}

}  // namespace

std::optional<task_kind> parse_task_kind(const std::string& s) {
    if (s == "echo") {
        return task_kind{"echo", 0, std::nullopt};
    }
    const auto colon = s.find(':');
    if (colon == std::string::npos) {
        return std::nullopt;
    }
    const std::string type = s.substr(0, colon);
    const std::string ms = s.substr(colon + 1);
    if ((type != "spin" && type != "sleep") || ms.empty() || ms.size() > 8 ||
        !std::all_of(ms.begin(), ms.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return std::nullopt;
    }
    const auto v = std::stoll(ms);
    if (v > 86'400'000) {
        return std::nullopt;
    }
    return task_kind{type, v, std::nullopt};
}

boost::json::value task_args(const task_kind& kind, std::size_t payload) {
    if (kind.args) {
        return *kind.args;
    }
    if (kind.type == "echo") {
        return boost::json::string(payload, 'x');
    }
    boost::json::object o;
    o["ms"] = kind.ms;
    if (payload > 0) {
        o["pad"] = boost::json::string(payload, 'x');
    }
    return o;
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
    const auto has = [&](const std::string& k) { return flags.contains(k); };

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
    std::string user = get("--user").value_or(env("ZKD_USER").value_or(""));
    std::string password = get("--password").value_or(env("ZKD_PASSWORD").value_or(""));
    if (auto file = get("--password-file")) {
        std::ifstream in(*file);
        if (!in) {
            throw usage_error("cannot read --password-file '" + *file + "'");
        }
        std::getline(in, password);
    }
    if (user.empty() && !password.empty()) {
        throw usage_error("a password needs --user (or ZKD_USER)");
    }
    if (!user.empty()) {
        if (user.find(':') != std::string::npos) {
            throw usage_error("--user must not contain ':'");
        }
        if (password.empty()) {
            throw usage_error(
                "--user needs a password (--password, --password-file or ZKD_PASSWORD)"
            );
        }
        s.auth = zkco::credentials{user, password};
    }
    constexpr std::uint64_t hour_ms = 3'600'000;
    constexpr std::uint64_t day_ms = 86'400'000;
    if (auto v = get("--connect-timeout")) {
        s.connect_timeout = millis("--connect-timeout", *v, 1, hour_ms);
    }
    if (auto v = get("--session-timeout")) {
        s.session_timeout = millis("--session-timeout", *v, 400, hour_ms);
    }
    if (auto v = get("--wait-workers")) {
        s.wait_workers = millis("--wait-workers", *v, 0, hour_ms);
    }
    if (auto v = get("--workers")) {
        s.min_workers = whole("--workers", *v, 1, 100'000);
    }
    s.require_workers = !has("--allow-no-workers");
    s.submit_only = has("--submit-only");

    if (auto v = get("--tasks")) {
        s.tasks = whole("--tasks", *v, 1, 1'000'000'000);
    }
    if (auto v = get("--duration")) {
        // A bare number is seconds here (decimals allowed), as it always was; units as zkd's.
        const bool bare = v->find_first_not_of("0123456789.") == std::string::npos;
        if (bare) {
            const double secs = positive("--duration", *v, 7.0 * 86'400);
            s.duration =
                std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(secs * 1000)));
        } else {
            s.duration = millis("--duration", *v, 1, 7ULL * 86'400'000);
        }
    }
    if (has("--rate") && has("--concurrency")) {
        throw usage_error("--rate (open loop) and --concurrency (closed loop) exclude each other");
    }
    if (auto v = get("--rate")) {
        s.rate = positive("--rate", *v, 10'000'000);
    }
    if (auto v = get("--concurrency")) {
        s.concurrency = whole("--concurrency", *v, 1, 1'000'000);
    }
    if (auto v = get("--max-in-flight")) {
        s.max_in_flight = whole("--max-in-flight", *v, 1, 100'000'000);
    }
    if (auto v = get("--task")) {
        auto k = parse_task_kind(*v);
        if (!k) {
            throw usage_error(
                "--task wants echo, spin:MS or sleep:MS (MS up to 86400000), not '" + *v + "'"
            );
        }
        s.kind = *k;
    }
    if (auto v = get("--type")) {
        if (get("--task")) {
            throw usage_error("--type and --task are two ways to say what runs: give one");
        }
        if (!protocol::is_valid_task_type(*v)) {
            throw usage_error(
                "--type wants a task type name (1 to 128 of A-Z a-z 0-9 _ . : -), not '" + *v + "'"
            );
        }
        s.kind = task_kind{*v, 0, boost::json::object{}};
    }
    if (auto v = get("--args")) {
        if (!get("--type")) {
            throw usage_error("--args goes with --type");
        }
        boost::system::error_code ec;
        auto parsed = boost::json::parse(*v, ec);
        if (ec) {
            throw usage_error("--args wants JSON (" + ec.message() + "): '" + *v + "'");
        }
        s.kind.args = std::move(parsed);
    }
    if (auto v = get("--payload")) {
        s.payload = static_cast<std::size_t>(whole("--payload", *v, 0, 500'000));
    }
    if (auto v = get("--batch")) {
        s.batch = whole("--batch", *v, 1, 10'000);
    }
    if (auto v = get("--auto-bundle")) {
        s.auto_bundle = whole("--auto-bundle", *v, 1, 1'000);
    }
    if (auto v = get("--bundle")) {
        s.bundle = whole("--bundle", *v, 1, 1'000);
    }
    if (auto v = get("--priority")) {
        s.priority =
            static_cast<int>(whole("--priority", *v, protocol::min_priority, protocol::max_priority)
            );
    }
    if (auto v = get("--task-timeout")) {
        s.task_timeout = millis("--task-timeout", *v, 0, day_ms);
    }
    if (auto v = get("--max-attempts")) {
        s.max_attempts =
            static_cast<int>(whole("--max-attempts", *v, 1, zkd::protocol::max_attempts_limit));
    }
    if (auto v = get("--stall-timeout")) {
        s.stall_timeout = millis("--stall-timeout", *v, 100, day_ms);
    }

    if (has("--raw") && has("--with-raw")) {
        throw usage_error("--raw (the ceiling only) and --with-raw (both) exclude each other");
    }
    s.raw = has("--raw") || has("--with-raw");
    s.load = !has("--raw");
    if (auto v = get("--raw-ops")) {
        s.raw_ops = whole("--raw-ops", *v, 1, 100'000'000);
    }
    if (auto v = get("--raw-window")) {
        s.raw_window = whole("--raw-window", *v, 1, 100'000);
    }
    if (auto v = get("--raw-batch")) {
        s.raw_batch = whole("--raw-batch", *v, 1, 1000);
    }
    if (auto v = get("--raw-rounds")) {
        s.raw_rounds = static_cast<int>(whole("--raw-rounds", *v, 1, 100));
    }
    if (auto v = get("--raw-warmup")) {
        s.raw_warmup = static_cast<int>(whole("--raw-warmup", *v, 0, 100));
    }
    if (auto v = get("--raw-payload")) {
        s.raw_payload = static_cast<std::size_t>(whole("--raw-payload", *v, 0, 500'000));
    }
    if (!s.raw) {
        for (const auto* k :
             {"--raw-ops", "--raw-window", "--raw-batch", "--raw-rounds", "--raw-warmup",
              "--raw-payload"}) {
            if (has(k)) {
                throw usage_error(std::string(k) + " needs --raw or --with-raw");
            }
        }
    }
    if (!s.load) {
        for (const auto* k :
             {"--tasks", "--duration", "--rate", "--concurrency", "--task", "--payload", "--batch",
              "--bundle", "--auto-bundle", "--submit-only", "--cdf", "--trace", "--no-direct"}) {
            if (has(k)) {
                throw usage_error(std::string(k) + " drives tasks: use --with-raw, not --raw");
            }
        }
    }
    for (const auto* k : {"--cdf", "--trace"}) {
        if (s.submit_only && has(k)) {
            throw usage_error(
                std::string("--submit-only measures no latency: ") + k + " makes no sense with it"
            );
        }
    }
    if (!s.tasks && !s.duration) {
        s.tasks = 1000;
    }

    s.json = has("--json");
    if (has("--progress") && has("--no-progress")) {
        throw usage_error("--progress and --no-progress exclude each other");
    }
    if (has("--progress")) {
        s.progress = true;
    } else if (has("--no-progress")) {
        s.progress = false;
    }
    s.mntr = !has("--no-mntr");
    s.direct = !has("--no-direct");
    if (auto v = get("--cdf")) {
        if (v->empty()) {
            throw usage_error("--cdf wants a file name");
        }
        s.cdf_file = *v;
    }
    if (auto v = get("--trace")) {
        if (v->empty()) {
            throw usage_error("--trace wants a file name");
        }
        s.trace_file = *v;
    }
    return out;
}

const char* help_text() noexcept {
    return help;
}

}  // namespace zkd::loadgen
