// SPDX-License-Identifier: MIT
// The pure parts of the HTTP API (src/http/api): listen addresses, targets, routes, the body
// of POST /v1/tasks and error JSON.
#include "http/api.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

namespace json = boost::json;
using namespace zkd::http;

TEST(HttpApi, ListenAddresses) {
    auto a = parse_listen_address("127.0.0.1:8080");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->address().to_string(), "127.0.0.1");
    EXPECT_EQ(a->port(), 8080);

    auto any = parse_listen_address("0.0.0.0:0");
    ASSERT_TRUE(any);
    EXPECT_TRUE(any->address().is_unspecified());
    EXPECT_EQ(any->port(), 0);

    auto loop = parse_listen_address(":9100");
    ASSERT_TRUE(loop);
    EXPECT_TRUE(loop->address().is_loopback());
    EXPECT_EQ(loop->port(), 9100);

    auto local = parse_listen_address("localhost:1");
    ASSERT_TRUE(local);
    EXPECT_EQ(local->address().to_string(), "127.0.0.1");

    auto v6 = parse_listen_address("[::1]:8080");
    ASSERT_TRUE(v6);
    EXPECT_TRUE(v6->address().is_v6());
    EXPECT_TRUE(v6->address().is_loopback());

    for (const char* bad :
         {"", "8080", ":", "host:80", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
          "127.0.0.1:80x", "[::1:80", "::1:80", "[zz]:80", "1.2.3:80"}) {
        EXPECT_FALSE(parse_listen_address(bad)) << bad;
    }
}

TEST(HttpApi, Targets) {
    auto t = parse_target("/v1/tasks?wait=100&limit=5&flag&&wait=200");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->path, "/v1/tasks");
    EXPECT_EQ(t->query.at("wait"), "200");  // the last one wins
    EXPECT_EQ(t->query.at("limit"), "5");
    EXPECT_EQ(t->query.at("flag"), "");
    EXPECT_EQ(t->query.size(), 3U);

    auto plain = parse_target("/metrics");
    ASSERT_TRUE(plain);
    EXPECT_TRUE(plain->query.empty());

    EXPECT_FALSE(parse_target("http://host/v1/tasks"));
    EXPECT_FALSE(parse_target("*"));
    EXPECT_FALSE(parse_target(""));
    EXPECT_EQ(parse_target("x").error().status, 400U);
}

TEST(HttpApi, IntegerQueryParameters) {
    auto t = parse_target("/x?wait=250&neg=-1&big=99999999999999999999&word=abc&empty=").value();
    EXPECT_EQ(query_int(t, "wait", 0, 1000).value(), 250);
    EXPECT_EQ(query_int(t, "absent", 0, 1000).value(), std::nullopt);
    for (const char* key : {"neg", "big", "word", "empty"}) {
        auto r = query_int(t, key, 0, 1000);
        ASSERT_FALSE(r) << key;
        EXPECT_EQ(r.error().status, 400U);
        EXPECT_EQ(r.error().code, "bad_query");
    }
    EXPECT_FALSE(query_int(t, "wait", 0, 100));  // over the maximum
}

TEST(HttpApi, Routes) {
    EXPECT_EQ(match_route("/v1/tasks").what, resource::tasks);
    EXPECT_EQ(match_route("/v1/cluster").what, resource::cluster);
    EXPECT_EQ(match_route("/metrics").what, resource::metrics);
    auto task = match_route("/v1/tasks/t4-1763733600123-3fa9c2d100002a");
    EXPECT_EQ(task.what, resource::task);
    EXPECT_EQ(task.task_id, "t4-1763733600123-3fa9c2d100002a");
    auto empty = match_route("/v1/tasks/");
    EXPECT_EQ(empty.what, resource::task);
    EXPECT_EQ(empty.task_id, "");
    auto result = match_route("/v1/tasks/t4-1763733600123-3fa9c2d100002a.3/result");
    EXPECT_EQ(result.what, resource::result);
    EXPECT_EQ(result.task_id, "t4-1763733600123-3fa9c2d100002a.3");
    // "result" alone is an id (not a task id: the endpoint answers 400 bad_task_id).
    EXPECT_EQ(match_route("/v1/tasks/result").what, resource::task);
    EXPECT_EQ(match_route("/v1/tasks//result").what, resource::result);
    EXPECT_EQ(match_route("/v1/workflows").what, resource::workflows);
    auto wf = match_route("/v1/workflows/wf-1763733600123-3fa9c2d1");
    EXPECT_EQ(wf.what, resource::workflow);
    EXPECT_EQ(wf.task_id, "wf-1763733600123-3fa9c2d1");
    for (const char* none :
         {"/ui", "/v1", "/v1/tasks/a/b", "/v1/cluster/", "/metrics/x", "/v2/tasks", "/V1/tasks",
          "/v1/tasks/a/result/", "/v1/tasks/a/b/result", "/v1/tasks/a/results", "/v1/workflows/a/b",
          "/v1/workflowsx"}) {
        EXPECT_EQ(match_route(none).what, resource::none) << none;
    }
    EXPECT_EQ(allowed_methods(resource::tasks), "GET, POST");
    EXPECT_EQ(allowed_methods(resource::task), "GET, DELETE");
    EXPECT_EQ(allowed_methods(resource::result), "GET, DELETE");
    EXPECT_EQ(allowed_methods(resource::workflows), "GET, POST");
    EXPECT_EQ(allowed_methods(resource::workflow), "GET, DELETE");
    EXPECT_EQ(allowed_methods(resource::cluster), "GET, HEAD");
    EXPECT_EQ(allowed_methods(resource::metrics), "GET, HEAD");
}

TEST(HttpApi, ScheduleRoutes) {
    EXPECT_EQ(match_route("/v1/schedules").what, resource::schedules);
    auto one = match_route("/v1/schedules/nightly.report");
    EXPECT_EQ(one.what, resource::schedule);
    EXPECT_EQ(one.task_id, "nightly.report");
    auto pause = match_route("/v1/schedules/tick/pause");
    EXPECT_EQ(pause.what, resource::schedule_pause);
    EXPECT_EQ(pause.task_id, "tick");
    auto resume = match_route("/v1/schedules/tick/resume");
    EXPECT_EQ(resume.what, resource::schedule_resume);
    EXPECT_EQ(resume.task_id, "tick");
    for (const char* none :
         {"/v1/schedules/a/b", "/v1/schedules/a/pause/", "/v1/schedules/a/b/pause"}) {
        EXPECT_EQ(match_route(none).what, resource::none) << none;
    }
    EXPECT_EQ(allowed_methods(resource::schedules), "GET, POST");
    EXPECT_EQ(allowed_methods(resource::schedule), "GET, DELETE");
    EXPECT_EQ(allowed_methods(resource::schedule_pause), "POST");
    EXPECT_EQ(allowed_methods(resource::schedule_resume), "POST");
}

TEST(HttpApi, SubmitOneTask) {
    auto r = parse_submit(
        R"({"type":"sum","args":{"values":[1,2]},"priority":7,"timeout_ms":1500,"max_attempts":2})"
    );
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->many);
    ASSERT_EQ(r->tasks.size(), 1U);
    const auto& t = r->tasks.front();
    EXPECT_EQ(t.type, "sum");
    EXPECT_EQ(t.args, json::parse(R"({"values":[1,2]})"));
    EXPECT_EQ(t.priority, 7);
    EXPECT_EQ(t.timeout.count(), 1500);
    EXPECT_EQ(t.max_attempts, 2);

    auto minimal = parse_submit(R"({"type":"echo"})");
    ASSERT_TRUE(minimal);
    EXPECT_EQ(minimal->tasks.front().priority, 5);
    EXPECT_EQ(minimal->tasks.front().max_attempts, 3);
    EXPECT_EQ(minimal->tasks.front().timeout.count(), 0);
    EXPECT_TRUE(minimal->tasks.front().args.is_null());

    auto whole = parse_submit(R"({"type":"echo","priority":3.0,"timeout_ms":1e3})");
    ASSERT_TRUE(whole) << whole.error().message;
    EXPECT_EQ(whole->tasks.front().priority, 3);
    EXPECT_EQ(whole->tasks.front().timeout.count(), 1000);
}

TEST(HttpApi, SubmitManyTasks) {
    auto r = parse_submit(R"([{"type":"echo","args":1},{"type":"sleep","args":{"ms":5}}])");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->many);
    ASSERT_EQ(r->tasks.size(), 2U);
    EXPECT_EQ(r->tasks[1].type, "sleep");

    auto bad = parse_submit(R"([{"type":"echo"},{"type":"no spaces"}])");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, "invalid_task");
    EXPECT_NE(bad.error().message.find("task 1"), std::string::npos) << bad.error().message;

    EXPECT_EQ(parse_submit("[]").error().code, "invalid_task");
}

TEST(HttpApi, SubmitAllowUnserved) {
    // The types to check, each once, in order: those of tasks without allow_unserved.
    auto r =
        parse_submit(R"([{"type":"a"},{"type":"b","allow_unserved":true},{"type":"a"},{"type":"c",)"
                     R"("allow_unserved":false},{"type":"b"}])");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->tasks.size(), 5U);
    EXPECT_EQ(r->check_served, (std::vector<std::string>{"a", "c", "b"}));

    auto one = parse_submit(R"({"type":"later","allow_unserved":true})");
    ASSERT_TRUE(one) << one.error().message;
    EXPECT_TRUE(one->check_served.empty());
    EXPECT_EQ(parse_submit(R"({"type":"x"})")->check_served, std::vector<std::string>{"x"});

    for (const char* invalid :
         {R"({"type":"x","allow_unserved":1})", R"({"type":"x","allow_unserved":"true"})",
          R"({"type":"x","allow_unserved":null})"}) {
        auto bad = parse_submit(invalid);
        ASSERT_FALSE(bad) << invalid;
        EXPECT_EQ(bad.error().code, "invalid_task") << invalid;
        EXPECT_NE(bad.error().message.find("allow_unserved"), std::string::npos);
    }
}

TEST(HttpApi, SubmitRefusals) {
    for (const char* not_json : {"", "{", R"({"type":"echo")", "nope", R"({"type":'echo'})"}) {
        auto r = parse_submit(not_json);
        ASSERT_FALSE(r) << not_json;
        EXPECT_EQ(r.error().status, 400U);
        EXPECT_EQ(r.error().code, "bad_json") << not_json;
    }
    for (const char* invalid :
         {R"("echo")", R"(42)", R"({})", R"({"type":7})", R"({"type":""})", R"({"type":"a b"})",
          R"({"type":"echo","priority":10})", R"({"type":"echo","priority":-1})",
          R"({"type":"echo","priority":1.5})", R"({"type":"echo","priority":"5"})",
          R"({"type":"echo","timeout_ms":-1})", R"({"type":"echo","max_attempts":0})",
          R"({"type":"echo","colour":"red"})", R"([1])"}) {
        auto r = parse_submit(invalid);
        ASSERT_FALSE(r) << invalid;
        EXPECT_EQ(r.error().status, 400U);
        EXPECT_EQ(r.error().code, "invalid_task") << invalid;
    }
    // Nested deeper than a task may be.
    std::string deep = R"({"type":"echo","args":)";
    for (int i = 0; i < 100; ++i) {
        deep += "[";
    }
    for (int i = 0; i < 100; ++i) {
        deep += "]";
    }
    deep += "}";
    auto r = parse_submit(deep);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, 400U);
}

TEST(HttpApi, ErrorJson) {
    const auto v = error_json("bad_json", "the body is not \"JSON\"");
    EXPECT_EQ(
        json::serialize(v), R"({"error":{"code":"bad_json","message":"the body is not \"JSON\""}})"
    );
}

TEST(HttpApi, AccessHostOriginAndToken) {
    access_policy p;
    p.port = 8080;
    const auto status = [&p](access_request r) {
        auto e = check_access(p, r);
        return e ? e->status : 0U;
    };
    // Loopback: only loopback names, with our port or none.
    for (const std::string_view ok :
         {"localhost", "LOCALHOST:8080", "127.0.0.1", "127.1.2.3:8080", "[::1]", "[::1]:8080"}) {
        EXPECT_EQ(status({ok, {}, {}, {}}), 0U) << ok;
    }
    for (const std::string_view bad :
         {"evil.example", "evil.example:8080", "localhost:8081", "127.0.0.1:", "[::1]:80",
          "10.0.0.1:8080", "localhost.evil.example", "[::1", "127.0.0.1:8080:8080", ""}) {
        EXPECT_EQ(status({bad, {}, {}, {}}), 403U) << bad;
        EXPECT_EQ(check_access(p, {bad, {}, {}, {}})->code, "bad_host") << bad;
    }
    EXPECT_EQ(status({}), 0U);  // HTTP/1.0 without Host: no browser sends that
    // Origin: only our own.
    EXPECT_EQ(status({"127.0.0.1:8080", "http://127.0.0.1:8080", {}, {}}), 0U);
    EXPECT_EQ(status({"127.0.0.1:8080", "http://127.0.0.1:3000", {}, {}}), 403U);
    EXPECT_EQ(status({"127.0.0.1:8080", "https://127.0.0.1:8080", {}, {}}), 403U);
    EXPECT_EQ(status({"127.0.0.1:8080", "null", {}, {}}), 403U);
    EXPECT_EQ(status({{}, "http://127.0.0.1:8080", {}, {}}), 403U);
    EXPECT_EQ(status({"localhost", {}, "cross-site", {}}), 403U);
    EXPECT_EQ(status({"localhost", {}, "same-site", {}}), 403U);
    EXPECT_EQ(status({"localhost", {}, "same-origin", {}}), 0U);
    EXPECT_EQ(status({"localhost", {}, "none", {}}), 0U);
    // Not loopback: any Host (the token guards it).
    p.loopback = false;
    EXPECT_EQ(status({"zkd.example:8080", {}, {}, {}}), 0U);
    // The token.
    p.token = "s3cret";
    EXPECT_EQ(status({"zkd.example", {}, {}, {}}), 401U);
    EXPECT_EQ(status({"zkd.example", {}, {}, "Bearer s3cret"}), 0U);
    EXPECT_EQ(status({"zkd.example", {}, {}, "bearer  s3cret"}), 0U);
    EXPECT_EQ(status({"zkd.example", {}, {}, "Bearer s3cre"}), 401U);
    EXPECT_EQ(status({"zkd.example", {}, {}, "Bearer s3crett"}), 401U);
    EXPECT_EQ(status({"zkd.example", {}, {}, "Basic s3cret"}), 401U);
    EXPECT_EQ(status({"zkd.example", {}, {}, "s3cret"}), 401U);
    EXPECT_EQ(status({"zkd.example", {}, {}, "Bearer "}), 401U);
    EXPECT_EQ(check_access(p, {})->code, "unauthorized");
}

TEST(HttpApi, JsonMediaType) {
    EXPECT_TRUE(is_json_media_type("application/json"));
    EXPECT_TRUE(is_json_media_type("Application/JSON; charset=utf-8"));
    EXPECT_TRUE(is_json_media_type(" application/json ;charset=UTF-8"));
    EXPECT_FALSE(is_json_media_type(""));
    EXPECT_FALSE(is_json_media_type("text/plain"));
    EXPECT_FALSE(is_json_media_type("application/x-www-form-urlencoded"));
    EXPECT_FALSE(is_json_media_type("multipart/form-data; boundary=x"));
    EXPECT_FALSE(is_json_media_type("application/jsonx"));
}

TEST(HttpApi, ExposureAndTokens) {
    const auto ep = [](std::string_view s) { return parse_listen_address(s).value(); };
    EXPECT_EQ(exposure_problem(ep("127.0.0.1:1"), false, false, false), "");
    EXPECT_EQ(exposure_problem(ep("[::1]:1"), false, false, false), "");
    EXPECT_NE(exposure_problem(ep("127.0.0.1:1"), false, false, true), "");
    EXPECT_EQ(exposure_problem(ep("127.0.0.1:1"), true, false, true), "");
    EXPECT_NE(exposure_problem(ep("0.0.0.0:1"), false, true, false), "");
    EXPECT_NE(exposure_problem(ep("[::]:1"), true, false, false), "");
    EXPECT_NE(exposure_problem(ep("10.1.2.3:1"), true, false, false), "");
    EXPECT_EQ(exposure_problem(ep("10.1.2.3:1"), true, true, true), "");

    EXPECT_TRUE(check_token("abc-DEF_0.9~+/=="));
    EXPECT_TRUE(check_token(std::string(4096, 'a')));
    for (const auto& bad : std::vector<std::string>{
             "", "a b", "a\tb", "=abc", "ab=c", "ab\"c", "tok\x01", std::string(4097, 'a')}) {
        EXPECT_FALSE(check_token(bad)) << bad;
    }
}

}  // namespace ZKD_UNITY_ID
