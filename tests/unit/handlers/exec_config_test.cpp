// SPDX-License-Identifier: MIT
// Exec types without processes: argv splitting, configuration, start-up checks, how a run's
// outcome becomes a result, progress lines, and the registry's asynchronous handlers.
#include "handlers/exec.hpp"
#include "handlers/registry.hpp"
#include "protocol/task.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <signal.h>
#include <unistd.h>

namespace ZKD_UNITY_ID {

namespace json = boost::json;
namespace asio = boost::asio;
using namespace zkd::handlers;
using namespace zkd::protocol;
using namespace zkd::handlers::exec;
using namespace std::chrono_literals;

namespace {

TEST(RolesExecConfig, SplitsOnSpacesWithoutAShell) {
    EXPECT_EQ(split_argv("  prog  a\tb  "), (std::vector<std::string>{"prog", "a", "b"}));
    EXPECT_EQ(
        split_argv("sh -c 'echo hi'"), (std::vector<std::string>{"sh", "-c", "'echo", "hi'"})
    );  // no quoting
    EXPECT_EQ(split_argv("$HOME;|&>"), (std::vector<std::string>{"$HOME;|&>"}));
    EXPECT_TRUE(split_argv("   ").empty());
}

TEST(RolesExecConfig, ParsesTheExecFlag) {
    const auto c = parse_exec_flag("wc=/usr/bin/wc -l");
    EXPECT_EQ(c.name, "wc");
    EXPECT_EQ(c.argv, (std::vector<std::string>{"/usr/bin/wc", "-l"}));
    EXPECT_EQ(c.output, output_mode::json);
    EXPECT_THROW((void)parse_exec_flag("no-equals"), std::invalid_argument);
    EXPECT_THROW((void)parse_exec_flag("bad name=/bin/true"), std::invalid_argument);
    EXPECT_THROW((void)parse_exec_flag("empty=  "), std::invalid_argument);
}

TEST(RolesExecConfig, AppliesConfigFileSettings) {
    std::map<std::string, program_config> types;
    apply_setting(types, "resize", "/usr/bin/convert -resize 50%");
    apply_setting(types, "resize.timeout", "30s");
    apply_setting(types, "resize.max-timeout", "5m");
    apply_setting(types, "resize.max-output", "64KiB");
    apply_setting(types, "resize.concurrency", "2");
    apply_setting(types, "resize.output", "text");
    apply_setting(types, "resize.env", "PATH, LANG,MODE=fast");
    apply_setting(types, "resize.dir", "/srv");
    apply_setting(types, "resize.user", "nobody");
    apply_setting(types, "resize.kill-grace", "1s500ms");
    apply_setting(types, "resize.nice", "10");
    // A dot in a type name is fine: the known suffix decides.
    apply_setting(types, "img.v2.timeout", "2s");
    ASSERT_EQ(types.size(), 2U);
    const auto& c = types.at("resize");
    EXPECT_EQ(c.argv, (std::vector<std::string>{"/usr/bin/convert", "-resize", "50%"}));
    EXPECT_EQ(c.timeout, 30s);
    EXPECT_EQ(c.max_timeout, 5min);
    EXPECT_EQ(c.max_output, 64U * 1024);
    EXPECT_EQ(c.concurrency, 2);
    EXPECT_EQ(c.output, output_mode::text);
    EXPECT_EQ(c.env, (std::vector<std::string>{"PATH", "LANG", "MODE=fast"}));
    EXPECT_EQ(c.dir, "/srv");
    EXPECT_EQ(c.user, "nobody");
    EXPECT_EQ(c.kill_grace, 1500ms);
    EXPECT_EQ(c.nice, 10);
    EXPECT_EQ(types.at("img.v2").timeout, 2s);
    EXPECT_EQ(types.at("img.v2").nice, 0);         // by default, zkd's own priority
    EXPECT_TRUE(types.at("img.v2").argv.empty());  // resolve() refuses it

    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {"x.timeout", "soon"},
             {"x.timeout", "30s4m"},
             {"x.timeout", "366d"},
             {"x.timeout", "8761h"},
             {"x.max-output", "1GiB"},
             {"x.max-output", "0"},
             {"x.max-output", "600KiB"},
             {"x.concurrency", "-1"},
             {"x.concurrency", "two"},
             {"x.output", "xml"},
             {"x.env", "A B"},
             {"x.nice", "-1"},  // higher than zkd's: never
             {"x.nice", "20"},
             {"x.nice", "low"},
             {"bad name", "/bin/true"},
             {"x", "   "}}) {
        std::map<std::string, program_config> t;
        EXPECT_THROW(apply_setting(t, key, value), std::invalid_argument) << key << " = " << value;
    }
}

/// What configure() refuses `file` (lines of zkd.conf, numbered from 1) and `flags` with.
std::string refusal(
    const std::vector<std::pair<std::string, std::string>>& lines,
    const std::vector<std::string>& flags = {}
) {
    std::vector<file_setting> file;
    for (const auto& [key, value] : lines) {
        file.push_back({key, value, "zkd.conf:" + std::to_string(file.size() + 1)});
    }
    try {
        (void)configure(file, flags);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "accepted";
}

TEST(RolesExecConfig, AFileSettingsErrorNamesTheFileAndLine) {
    EXPECT_EQ(
        refusal({{"x", "/bin/true"}, {"x.timeout", "soon"}}),
        "zkd.conf:2: exec.x.timeout wants a duration up to 365 days (e.g. 250ms, 30s, 4m30s, "
        "2h; a bare number is milliseconds), not 'soon'"
    );
    EXPECT_EQ(refusal({{"x", "  "}}), "zkd.conf:1: exec.x: no program given");
    EXPECT_EQ(
        refusal({{"bad name", "/bin/true"}}),
        "zkd.conf:1: exec.bad name: 'bad name' is not a task type name"
    );
}

TEST(RolesExecConfig, RefusesAnUnknownSettingOfATypeWithTheNearestOne) {
    EXPECT_EQ(
        refusal({{"y", "/bin/cat"}, {"y.timout", "30s"}}),
        "zkd.conf:2: exec.y.timout: unknown setting 'timout' of exec type 'y' (did you mean "
        "'timeout'?)"
    );
    EXPECT_EQ(
        refusal({{"y", "/bin/cat"}, {"y.colour", "red"}}),
        "zkd.conf:2: exec.y.colour: unknown setting 'colour' of exec type 'y' (settings: "
        "timeout, max-timeout, max-output, concurrency, output, env, dir, user, kill-grace, "
        "mode, warm, max-tasks, max-memory, start-timeout, memory-limit, cpu-limit, "
        "max-processes, max-open-files, nice)"
    );
    // The type named only by another setting.
    EXPECT_NE(
        refusal({{"y.timeout", "5s"}, {"y.outptu", "text"}}).find("did you mean 'output'?"),
        std::string::npos
    );
    // The type defined on the command line only.
    EXPECT_NE(
        refusal({{"y.concurency", "2"}}, {"y=/bin/cat"}).find("did you mean 'concurrency'?"),
        std::string::npos
    );
    // With a dot in the type's name: the longest defined type is the one meant.
    EXPECT_NE(
        refusal({{"img.v2.kill_grace", "1s"}}, {"img=/bin/cat", "img.v2=/bin/cat"})
            .find("unknown setting 'kill_grace' of exec type 'img.v2' (did you mean "
                  "'kill-grace'?)"),
        std::string::npos
    );
}

TEST(RolesExecConfig, ATypeNameWithADotIsATypeWhenNoShorterTypeIsDefined) {
    const auto types = configure(
        {{"img.v2", "/bin/cat", "zkd.conf:1"},
         {"img.v2.timeout", "4m30s", "zkd.conf:2"},
         {"y.colour", "red", "zkd.conf:3"}},
        {"img.v3=/bin/cat"}
    );
    ASSERT_EQ(types.size(), 3U);
    EXPECT_EQ(types.at("img.v2").timeout, 270s);
    EXPECT_EQ(types.at("y.colour").argv, (std::vector<std::string>{"red"}));
}

TEST(RolesExecConfig, RefusesATypeGivenTwiceOnTheCommandLine) {
    EXPECT_EQ(refusal({}, {"x=/bin/cat", "x=/bin/echo"}), "--exec x: the type is given twice");
    EXPECT_EQ(
        refusal({}, {"x.timeout=/bin/cat"}),
        "--exec x.timeout: a type name cannot end in '.timeout'; settings go in the config "
        "file (exec.x.timeout = VALUE)"
    );
}

TEST(RolesExecConfig, TheCommandLineReplacesTheFilesProgramAndKeepsItsSettings) {
    const auto types = configure(
        {{"x", "/bin/cat", "zkd.conf:1"}, {"x.timeout", "5s", "zkd.conf:2"}}, {"x=/bin/echo hi"}
    );
    ASSERT_EQ(types.size(), 1U);
    EXPECT_EQ(types.at("x").argv, (std::vector<std::string>{"/bin/echo", "hi"}));
    EXPECT_EQ(types.at("x").timeout, 5s);
}

TEST(RolesExecConfig, ParsesSizes) {
    EXPECT_EQ(parse_size("512"), 512U);
    EXPECT_EQ(parse_size("2k"), 2048U);
    EXPECT_EQ(parse_size("64KiB"), 65536U);
    EXPECT_EQ(parse_size("1MiB"), 1048576U);
    EXPECT_EQ(parse_size("3M"), 3U * 1048576);
    EXPECT_FALSE(parse_size(""));
    EXPECT_FALSE(parse_size("1.5M"));
    EXPECT_FALSE(parse_size("10GB"));
}

class RolesExecResolve : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("zkd-exec-resolve-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir_);
        script_ = dir_ / "prog.sh";
        std::ofstream(script_) << "#!/bin/sh\ncat\n";
        std::filesystem::permissions(script_, std::filesystem::perms::owner_all);
        plain_ = dir_ / "plain.txt";
        std::ofstream(plain_) << "not a program\n";
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    static env_lookup env(std::map<std::string, std::string> vars) {
        return [vars = std::move(vars)](const std::string& n) -> std::optional<std::string> {
            const auto it = vars.find(n);
            return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
        };
    }

    std::filesystem::path dir_, script_, plain_;
};

TEST_F(RolesExecResolve, FindsTheProgramAndPassesOnlyListedVariables) {
    program_config c;
    c.name = "t";
    c.argv = {"prog.sh", "x"};
    c.env = {"LANG", "UNSET", "MODE=fast"};
    const auto p =
        resolve(c, env({{"PATH", "/nonexistent:" + dir_.string()}, {"LANG", "C.UTF-8"}}));
    EXPECT_EQ(p.path, script_.string());
    EXPECT_EQ(p.env, (std::vector<std::string>{"LANG=C.UTF-8", "MODE=fast"}));
    EXPECT_FALSE(p.user);
}

TEST_F(RolesExecResolve, RefusesWhatCannotRunNamingTheType) {
    const auto cfg = [](std::vector<std::string> argv, std::string dir = {},
                        std::string user = {}) {
        program_config c;
        c.argv = std::move(argv);
        c.dir = std::move(dir);
        c.user = std::move(user);
        return c;
    };
    const auto refused = [&](program_config c) {
        c.name = "my-type";
        try {
            (void)resolve(c, env({{"PATH", dir_.string()}}));
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_NE(refused(cfg({(dir_ / "missing").string()})).find("'my-type'"), std::string::npos);
    EXPECT_NE(
        refused(cfg({(dir_ / "missing").string()})).find("does not exist"), std::string::npos
    );
    EXPECT_NE(refused(cfg({plain_.string()})).find("is not executable"), std::string::npos);
    EXPECT_NE(refused(cfg({dir_.string()})).find("is a directory"), std::string::npos);
    EXPECT_NE(refused(cfg({"no-such-program-anywhere"})).find("not in PATH"), std::string::npos);
    EXPECT_NE(refused(cfg({})).find("no program"), std::string::npos);
    EXPECT_NE(
        refused(cfg({script_.string()}, "/nonexistent")).find("working directory"),
        std::string::npos
    );
    EXPECT_NE(
        refused(cfg({script_.string()}, {}, "no-such-user-zkd")).find("no such user"),
        std::string::npos
    );
    if (::geteuid() != 0) {
        EXPECT_NE(
            refused(cfg({script_.string()}, {}, "root")).find("needs zkd to run as root"),
            std::string::npos
        );
    }
}

TEST(RolesExecClassify, MapsEveryEnding) {
    program_config json_type;
    program_config text_type;
    text_type.output = output_mode::text;
    run_outcome ok;
    ok.exit_code = 0;
    ok.output = " {\"n\": 1}\n";
    EXPECT_EQ(classify(json_type, ok).value(), json::parse(R"({"n":1})"));
    EXPECT_EQ(classify(text_type, ok).value(), json::value(" {\"n\": 1}\n"));

    run_outcome exited = ok;
    exited.exit_code = 3;
    exited.stderr_tail = "bad input\n";
    auto r = classify(json_type, exited);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "handler_error");
    EXPECT_EQ(r.error().message, "the program exited with code 3; stderr: bad input");

    run_outcome killed;
    killed.signal = SIGKILL;
    r = classify(json_type, killed);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "the program was killed by signal 9 (SIGKILL)");

    run_outcome big;
    big.output_too_large = true;
    big.signal = SIGKILL;
    r = classify(json_type, big);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "output_too_large");

    run_outcome not_json = ok;
    not_json.output = "hello";
    r = classify(json_type, not_json);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("not JSON"), std::string::npos);
    not_json.output = "\n";
    EXPECT_EQ(
        classify(json_type, not_json).error().message, "the program printed no JSON on stdout"
    );

    run_outcome binary = ok;
    binary.output = "\xff\xfe";
    EXPECT_EQ(
        classify(text_type, binary).error().message, "the program's output is not UTF-8 text"
    );
    binary.output = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
    EXPECT_EQ(classify(text_type, binary).value(), json::value(binary.output));
    binary.output = "\xed\xa0\x80";  // a surrogate: not UTF-8
    EXPECT_FALSE(classify(text_type, binary));

    // Bytes from stderr that are not UTF-8 cannot break the result's JSON.
    exited.stderr_tail = "oops \xff\n";
    r = classify(json_type, exited);
    EXPECT_EQ(r.error().message, "the program exited with code 3; stderr: oops ?");

    run_outcome not_started;
    not_started.start_error = "execve: Permission denied";
    EXPECT_EQ(
        classify(json_type, not_started).error().message,
        "cannot start the program: execve: Permission denied"
    );
}

TEST(RolesExecProgress, ParsesProgressLines) {
    auto p = parse_progress_line(R"({"progress":0.4,"message":"step 2 of 5"})");
    ASSERT_TRUE(p);
    EXPECT_DOUBLE_EQ(p->first, 0.4);
    EXPECT_EQ(p->second, "step 2 of 5");
    EXPECT_DOUBLE_EQ(parse_progress_line(R"({"progress":7})")->first, 1.0);
    EXPECT_DOUBLE_EQ(parse_progress_line(R"({"progress":-1})")->first, 0.0);
    EXPECT_EQ(
        parse_progress_line(R"({"progress":1,"message":")" + std::string(500, 'x') + "\"}")
            ->second.size(),
        200U
    );
    EXPECT_FALSE(parse_progress_line("40%"));
    EXPECT_FALSE(parse_progress_line(R"({"message":"no fraction"})"));
    EXPECT_FALSE(parse_progress_line(R"({"progress":"half"})"));
}

TEST(RolesRegistryProgress, SynchronousHandlersReportProgressThroughRunHandler) {
    registry reg;
    reg.add(
        "counted",
        [](const json::value& args, std::stop_token,
           const progress_fn& progress) -> handler_result {
            progress(0.5, "half");
            progress(1, "all");
            return args;
        }
    );
    EXPECT_TRUE(reg.has_sync("counted"));
    EXPECT_EQ(reg.find("counted"), nullptr);
    ASSERT_NE(reg.find_with_progress("counted"), nullptr);
    std::vector<std::pair<double, std::string>> got;
    const auto r = run_handler(reg, "counted", 3, {}, [&](double f, std::string m) {
        got.emplace_back(f, std::move(m));
    });
    EXPECT_EQ(r.value(), json::value(3));
    EXPECT_EQ(got, (std::vector<std::pair<double, std::string>>{{0.5, "half"}, {1.0, "all"}}));
    EXPECT_EQ(run_handler(reg, "counted", 4, {}).value(), json::value(4));  // no sink: fine
}

TEST(RolesRegistryAsync, LimitsShapeATasksTimeout) {
    const type_limits none;
    EXPECT_EQ(none.effective(0ms), 0ms);
    EXPECT_EQ(none.effective(5s), 5s);
    const type_limits some{30s, 60s};
    EXPECT_EQ(some.effective(0ms), 30s);
    EXPECT_EQ(some.effective(10s), 10s);
    EXPECT_EQ(some.effective(10min), 60s);
}

TEST(RolesRegistryAsync, RunsAsynchronousHandlersWithTheSameErrorRules) {
    registry reg;
    reg.add_async(
        "later",
        [](async_call c) -> asio::awaitable<handler_result> {
            c.started();
            c.progress(0.5, "half");
            if (c.args.is_string()) {
                co_return handler_error{"lost", "not a handler's code"};
            }
            if (c.args.is_null()) {
                throw std::runtime_error("boom");
            }
            co_return c.args;
        },
        type_limits{1s, 2s}
    );
    EXPECT_EQ(reg.find("later"), nullptr);
    ASSERT_NE(reg.find_async("later"), nullptr);
    EXPECT_EQ(reg.limits("later").max_timeout, 2s);
    EXPECT_EQ(reg.types(), std::vector<std::string>{"later"});
    EXPECT_THROW(
        reg.add("later", [](const json::value& a, std::stop_token) -> handler_result { return a; }),
        std::invalid_argument
    );
    // The synchronous entry point refuses it clearly.
    EXPECT_EQ(run_handler(reg, "later", 1, {}).error().code, "handler_error");

    asio::io_context ioc;
    std::vector<handler_result> got;
    double reported = 0;
    for (json::value args : {json::value(5), json::value("x"), json::value()}) {
        async_call c;
        c.args = args;
        c.started = [] {};
        c.progress = [&](double f, const std::string&) { reported = f; };
        asio::co_spawn(
            ioc, run_async_handler(reg, "later", c),
            [&](const std::exception_ptr&, handler_result r) { got.push_back(r); }
        );
    }
    async_call unknown;
    asio::co_spawn(
        ioc, run_async_handler(reg, "nope", unknown),
        [&](const std::exception_ptr&, handler_result r) { got.push_back(r); }
    );
    ioc.run();
    ASSERT_EQ(got.size(), 4U);
    EXPECT_EQ(got[0].value(), json::value(5));
    EXPECT_EQ(got[1].error().code, "handler_error");
    EXPECT_NE(got[1].error().message.find("lost"), std::string::npos);
    EXPECT_EQ(got[2].error(), (handler_error{"handler_error", "boom"}));
    EXPECT_EQ(got[3].error().code, "unknown_type");
    EXPECT_DOUBLE_EQ(reported, 0.5);
}

}  // namespace

namespace {

TEST(RolesTaskProgress, RoundTripsOnTheAssignmentAndBadShapesAreDropped) {
    task_node t;
    t.task.type = "steps";
    t.assigned.worker = "w-1";
    t.run = progress{10, 0.4, "resized 4 of 10", 20};
    const auto back = decode_task_node(encode(t));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, t);
    t.run.fraction = -1;  // none: not written
    EXPECT_EQ(encode(t).find("progress"), std::string::npos);
    for (const char* bad :
         {R"("progress":7)", R"("progress":{"fraction":2})", R"("progress":{"message":"x"})",
          R"("progress":{"fraction":"half"})"}) {
        const auto odd = decode_task_node(std::string(R"({"v":1,"type":"steps",)") + bad + "}");
        ASSERT_TRUE(odd) << bad;
        EXPECT_EQ(odd->run.fraction, -1) << bad;
    }
}

}  // namespace

namespace {

TEST(RolesExecConfig, ServedTypesComeFromServeOrTheModeSettingWithTheirOwnSettings) {
    const auto types = configure(
        {{"a", "/bin/cat", "zkd.conf:1"},
         {"a.mode", "serve", "zkd.conf:2"},
         {"a.warm", "2", "zkd.conf:3"},
         {"a.max-tasks", "1000", "zkd.conf:4"},
         {"a.max-memory", "2GiB", "zkd.conf:5"},
         {"a.start-timeout", "5s", "zkd.conf:6"},
         {"b.mode", "serve", "zkd.conf:7"},
         {"c.max-memory", "512M", "zkd.conf:8"}},
        {"b=/bin/echo"}, {"c=/bin/cat"}
    );
    const auto& a = types.at("a");
    EXPECT_EQ(a.mode, run_mode::serve);
    EXPECT_EQ(a.warm, 2);
    EXPECT_EQ(a.max_tasks, 1000);
    EXPECT_EQ(a.max_memory, std::size_t{2} * 1024 * 1024 * 1024);
    EXPECT_EQ(a.start_timeout, 5s);
    EXPECT_EQ(types.at("b").mode, run_mode::once) << "--exec wins over the file's mode";
    EXPECT_EQ(types.at("c").mode, run_mode::serve);
    EXPECT_EQ(types.at("c").max_memory, std::size_t{512} * 1024 * 1024);
    EXPECT_EQ(configure({}, {}, {"d=/bin/cat"}).at("d").mode, run_mode::serve);
    EXPECT_THROW((void)configure({{"a.mode", "forever", "f:1"}}, {}), std::invalid_argument);
    EXPECT_THROW((void)configure({{"a.max-memory", "lots", "f:1"}}, {}), std::invalid_argument);
    try {
        (void)configure({}, {"x=/bin/cat"}, {"x=/bin/cat"});
        ADD_FAILURE() << "a type given by --exec and --serve";
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "--serve x: the type is given twice");
    }
}

TEST(RolesExecConfig, AServedTypeCannotKeepMoreWarmThanItsConcurrency) {
    program_config c;
    c.name = "s";
    c.argv = {"/bin/cat"};
    c.mode = run_mode::serve;
    c.concurrency = 1;
    c.warm = 2;
    EXPECT_THROW(
        (void)resolve(c, [](const std::string&) { return std::nullopt; }), std::invalid_argument
    );
    c.concurrency = 0;  // the worker's slots
    EXPECT_NO_THROW((void)resolve(c, [](const std::string&) { return std::nullopt; }));
}

}  // namespace

}  // namespace ZKD_UNITY_ID
