// SPDX-License-Identifier: MIT
// docs/grafana/zkd.json against what zkd exports: every metric a panel's query (or a
// variable, or a description) names is one render_metrics() writes, with every label and
// label value a selector asks for, and every panel has queries. The exported names come from
// render_metrics()'s own output with every optional part present, not from a copy.
#include "http/metrics.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

namespace json = boost::json;

namespace {

/// Sample name -> label name -> the values seen, from a text exposition.
using exported_t = std::map<std::string, std::map<std::string, std::set<std::string>>>;

exported_t exported_metrics() {
    zkd::roles::node_stats node;
    node.queue_depth = 3;  // exported only while master
    node.assign_latency.observe(2);
    zkd::reactor::lag_stats lag;
    zkd::http::facade_counters facade;
    facade.responses[200] = 1;  // one sample per status code sent
    const auto text = zkd::http::render_metrics(node, lag, facade);
    exported_t out;
    std::istringstream in(text);
    std::string line;
    const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? .*$)");
    const std::regex label(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)")re");
    while (std::getline(in, line)) {
        std::smatch m;
        if (line.empty() || line.front() == '#' || !std::regex_match(line, m, sample)) {
            continue;
        }
        auto& labels = out[m[1]];
        const std::string inside = m[3];
        for (auto it = std::sregex_iterator(inside.begin(), inside.end(), label);
             it != std::sregex_iterator(); ++it) {
            labels[(*it)[1]].insert((*it)[2]);
        }
    }
    return out;
}

json::value dashboard() {
    std::ifstream f(ZKD_GRAFANA_DASHBOARD, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    boost::system::error_code ec;
    auto v = json::parse(s.str(), ec);
    EXPECT_FALSE(ec) << ZKD_GRAFANA_DASHBOARD << " is not JSON: " << ec.message();
    return v;
}

/// Every string in `v`, recursively.
void strings(const json::value& v, std::vector<std::string>& out) {
    if (v.is_string()) {
        out.emplace_back(v.as_string());
    } else if (v.is_array()) {
        for (const auto& e : v.as_array()) {
            strings(e, out);
        }
    } else if (v.is_object()) {
        for (const auto& [k, e] : v.as_object()) {
            strings(e, out);
        }
    }
}

/// What is wrong with the zkd metrics `text` names ("" if nothing): unknown names, and
/// selectors asking for labels or label values that are never exported.
std::string problems(const std::string& text, const exported_t& exported, std::size_t& named) {
    std::string out;
    const std::regex selector(R"(\b(zkd_[a-zA-Z0-9_:]*)(\{([^}]*)\})?)");
    const std::regex matcher(R"re(^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"\s*$)re");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), selector);
         it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1];
        ++named;
        const auto found = exported.find(name);
        if (found == exported.end()) {
            out.append("unknown metric ").append(name).append("; ");
            continue;
        }
        std::stringstream inside((*it)[3].str());
        std::string part;
        while (std::getline(inside, part, ',')) {
            std::smatch m;
            if (!std::regex_match(part, m, matcher)) {
                out.append("unparsed matcher '")
                    .append(part)
                    .append("' of ")
                    .append(name)
                    .append("; ");
                continue;
            }
            const std::string key = m[1];
            const std::string op = m[2];
            const std::string value = m[3];
            if (key == "job" || key == "instance") {
                continue;  // Prometheus adds them
            }
            const auto labels = found->second.find(key);
            if (labels == found->second.end()) {
                out.append(name).append(" has no label ").append(key).append("; ");
                continue;
            }
            if (op != "=" && op != "=~") {
                continue;
            }
            // Each alternative of a plain `a|b|c` must be a value zkd writes.
            if (op == "=~" && value.find_first_of(".*+?[]()^$\\") != std::string::npos) {
                continue;
            }
            std::stringstream alternatives(value);
            std::string v;
            while (std::getline(alternatives, v, '|')) {
                if (!labels->second.contains(v)) {
                    out.append(name)
                        .append("{")
                        .append(key)
                        .append("} never has the value ")
                        .append(v)
                        .append("; ");
                }
            }
        }
    }
    return out;
}

}  // namespace

TEST(GrafanaDashboard, EveryQueryNamesMetricsZkdExports) {
    const auto exported = exported_metrics();
    ASSERT_TRUE(exported.contains("zkd_master"));
    ASSERT_TRUE(exported.contains("zkd_assign_latency_seconds_bucket"));
    const auto d = dashboard();
    ASSERT_TRUE(d.is_object());
    EXPECT_EQ(d.at("title").as_string(), "zkd");
    EXPECT_FALSE(d.at("uid").as_string().empty());

    std::size_t panels = 0;
    for (const auto& p : d.at("panels").as_array()) {
        const auto& panel = p.as_object();
        if (panel.at("type").as_string() == "row") {
            continue;
        }
        ++panels;
        const auto title = std::string(panel.at("title").as_string());
        const auto& targets = panel.at("targets").as_array();
        EXPECT_FALSE(targets.empty()) << title << ": no query";
        for (const auto& t : targets) {
            const auto expr = std::string(t.at("expr").as_string());
            std::size_t named = 0;
            EXPECT_EQ(problems(expr, exported, named), "") << title << ": " << expr;
            EXPECT_GT(named, 0U) << title << ": the query names no zkd metric: " << expr;
        }
    }
    EXPECT_GE(panels, 10U);

    // Variables and descriptions too: any zkd_ name anywhere in the file.
    std::vector<std::string> all;
    strings(d, all);
    std::size_t named = 0;
    for (const auto& s : all) {
        EXPECT_EQ(problems(s, exported, named), "") << s;
    }
}

TEST(GrafanaDashboard, TheCheckCatchesUnknownMetricsLabelsAndValues) {
    const auto exported = exported_metrics();
    std::size_t named = 0;
    EXPECT_NE(problems("rate(zkd_tasks_finished_total[1m])", exported, named), "");
    EXPECT_NE(problems(R"(zkd_tasks_completed_total{status="failed"})", exported, named), "");
    EXPECT_NE(
        problems(R"(zkd_tasks_completed_total{state=~"failed|crashed"})", exported, named), ""
    );
    EXPECT_EQ(
        problems(
            R"(zkd_tasks_completed_total{state=~"failed|timed_out", instance=~"$i"})", exported,
            named
        ),
        ""
    );
    EXPECT_EQ(problems(R"(zkd_zk_session_state{state!="connected"} == 1)", exported, named), "");
}

}  // namespace ZKD_UNITY_ID
