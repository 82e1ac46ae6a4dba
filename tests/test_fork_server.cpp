// `attnscope fork-server` (app/command_fork_server.cpp), through which the suite runs its commands
// (tests/cli_process.h): a child answers as a fresh process does, the request's working directory,
// environment and files are the child's, and a bad request is answered without ending the server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli_process.h"
#include "tests/test_folder.h"

namespace attnscope {
namespace {

namespace fs = std::filesystem;

std::vector<nlohmann::json> reply_lines(const std::string& text) {
  std::vector<nlohmann::json> replies;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) replies.push_back(nlohmann::json::parse(line));
  return replies;
}

TEST(ForkServer, AnswersEachRequestInOrderAndGoesOnAfterABadOne) {
  TestFolder scratch("fork-server");
  const fs::path& folder = scratch.path();
  const std::string err = scratch.file("err.txt"), err2 = scratch.file("err2.txt"), both = scratch.file("both.txt");
  const std::vector<std::string> requests = {
      nlohmann::json{{"args", {"info", "--model", scratch.file("absent.pth")}}, {"stderr", err}}.dump(),
      "not a request",
      nlohmann::json{
          {"args", {"glyphs", "--out", "glyphs", "--count", "1"}}, {"cwd", folder.string()}, {"stdout", "said.txt"}}
          .dump(),
      nlohmann::json{{"args", {"no-such-command"}}}.dump(),
      nlohmann::json{{"args", "info"}}.dump(),
      nlohmann::json{{"args", {"--help"}}, {"stdout", both}, {"stderr", both}}.dump(),
      // Fields of the wrong kind are named, not answered with the JSON library's type error.
      nlohmann::json{{"args", {"info"}}, {"env", "X=1"}}.dump(),
      nlohmann::json{{"args", {"info"}}, {"env", {"NOEQUALS"}}}.dump(),
      nlohmann::json{{"args", {"info"}}, {"address_space_bytes", "lots"}}.dump(),
      nlohmann::json{{"args", {"info"}}, {"stdout", (folder / "absent" / "x").string()}, {"stderr", err2}}.dump(),
  };
  std::ofstream(folder / "requests.jsonl") << [&] {
    std::string text;
    for (const std::string& request : requests) text += request + "\n\n";  // blank lines are skipped
    return text;
  }();
  const std::string command = std::string(ATTNSCOPE_CLI) + " fork-server < '" + scratch.file("requests.jsonl") +
                              "' > '" + scratch.file("replies.jsonl") + "'";
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::vector<nlohmann::json> replies = reply_lines(read_file_contents(folder / "replies.jsonl"));
  ASSERT_EQ(replies.size(), requests.size());

  EXPECT_EQ(replies[0].value("exit_code", -1), 1) << replies[0];
  EXPECT_GT(replies[0].value("peak_kilobytes", 0L), 0L);
  EXPECT_NE(read_file_contents(err).find("absent.pth"), std::string::npos) << read_file_contents(err);
  EXPECT_EQ(replies[1].value("error", std::string()), "the request line is not valid JSON") << replies[1];
  EXPECT_EQ(replies[2].value("exit_code", -1), 0) << replies[2];
  EXPECT_TRUE(fs::exists(folder / "glyphs" / "glyph_0.png")) << "the relative --out is under the request's cwd";
  EXPECT_EQ(read_file_contents(folder / "said.txt").rfind("wrote 1 glyph", 0), 0u) << "and so is its stdout";
  EXPECT_EQ(replies[3].value("exit_code", -1), 2) << replies[3];
  EXPECT_NE(replies[4].value("error", std::string()).find("\"args\""), std::string::npos) << replies[4];
  EXPECT_EQ(replies[5].value("exit_code", -1), 0) << replies[5];
  EXPECT_EQ(read_file_contents(both).rfind("usage: attnscope COMMAND", 0), 0u) << read_file_contents(both);
  EXPECT_EQ(replies[6].value("error", std::string()), "\"env\" must be an array of strings") << replies[6];
  EXPECT_NE(replies[7].value("error", std::string()).find("NAME=value, got 'NOEQUALS'"), std::string::npos)
      << replies[7];
  EXPECT_NE(replies[8].value("error", std::string()).find("\"address_space_bytes\" must be a whole number of bytes"),
            std::string::npos)
      << replies[8];
  for (size_t i = 6; i <= 8; ++i)
    EXPECT_EQ(replies[i].value("error", std::string()).find("json.exception"), std::string::npos);
  EXPECT_EQ(replies[9].value("exit_code", -1), 127) << replies[9];
  EXPECT_NE(
      read_file_contents(err2).find("cannot open the request's stdout file '" + (folder / "absent" / "x").string()),
      std::string::npos)
      << read_file_contents(err2);
}

// A request line longer than 16 MiB is answered with an error without being held, and the server
// goes on; a nested fork server is refused (it would replay the requests queued behind it) (issue 60).
TEST(ForkServer, LongLinesAndNestedServersAreRefused) {
  TestFolder scratch("fork-server-bounds");
  const fs::path& folder = scratch.path();
  {
    std::ofstream requests(folder / "requests.jsonl");
    requests << "{\"args\": [\"" << std::string((size_t(16) << 20) + 10, 'x') << "\"]}\n";
    requests << nlohmann::json{{"args", {"fork-server"}}}.dump() << "\n";
    requests << nlohmann::json{{"args", {"--help"}}}.dump() << "\n";
  }
  const std::string command = std::string(ATTNSCOPE_CLI) + " fork-server < '" + scratch.file("requests.jsonl") +
                              "' > '" + scratch.file("replies.jsonl") + "'";
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::vector<nlohmann::json> replies = reply_lines(read_file_contents(folder / "replies.jsonl"));
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_NE(replies[0].value("error", std::string()).find("at most 16 MiB"), std::string::npos) << replies[0];
  EXPECT_NE(replies[1].value("error", std::string()).find("does not run another fork server"), std::string::npos)
      << replies[1];
  EXPECT_EQ(replies[2].value("exit_code", -1), 0) << replies[2];
}

// What the suite relies on: the same exit code and the same bytes on stdout and stderr as the
// command run as a process of its own, for a success, a refusal and a usage error.
TEST(ForkServer, ChildrenAnswerAsFreshProcessesDo) {
  TestFolder scratch("fork-server-same");
  const std::string model = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/vit_softmax.safetensors";
  const std::vector<std::vector<std::string>> commands = {
      {"info", "--model", model},
      {"info", "--model", scratch.file("absent.safetensors")},
      {"run", "--model", model, "--arch", "heads=2", "--image", scratch.file("absent.png"), "--out", "o"},
      {"export", "--no-such-flag"},
      {"glyphs", "--help"},
  };
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0] + " " + args.back());
    std::string outputs[2][2];
    int exit_codes[2];
    for (int fresh = 0; fresh < 2; ++fresh) {
      testing::CliRequest request{args, scratch.file("out.txt"), scratch.file("err.txt")};
      request.fresh_process = fresh == 1;
      const testing::CliOutcome outcome = testing::run_cli_process(request);
      EXPECT_EQ(outcome.signal, 0);
      exit_codes[fresh] = outcome.exit_code;
      outputs[fresh][0] = read_file_contents(request.stdout_path);
      outputs[fresh][1] = read_file_contents(request.stderr_path);
    }
    EXPECT_EQ(exit_codes[0], exit_codes[1]);
    EXPECT_EQ(outputs[0][0], outputs[1][0]);
    EXPECT_EQ(outputs[0][1], outputs[1][1]);
    EXPECT_FALSE(outputs[0][0].empty() && outputs[0][1].empty()) << "every command here says something";
  }
}

TEST(ForkServer, LimitsAndEnvironmentAreTheChilds) {
  TestFolder scratch("fork-server-limits");
  // 64 MB of address space cannot hold LibTorch's threads and a model: the child fails (a clean
  // out-of-memory error or a signal), the next request runs unbounded.
  testing::CliRequest bounded{
      {"run", "--out", scratch.file("bounded")}, scratch.file("out.txt"), scratch.file("out.txt")};
  bounded.address_space_bytes = rlim_t(64) << 20;
  const testing::CliOutcome failed = testing::run_cli_process(bounded);
  EXPECT_TRUE(failed.signal != 0 || failed.exit_code != 0) << read_file_contents(scratch.file("out.txt"));
  const std::string model = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/parity_cases/vit_softmax.safetensors";
  for (const std::string backend : {"blas", "onednn"}) {
    const std::string out = scratch.file("run_" + backend);
    testing::CliRequest forced{
        {"run", "--model", model, "--arch", "heads=2", "--out", out}, "/dev/null", scratch.file("err.txt")};
    forced.environment = {"ATTNSCOPE_LINEAR=" + backend};
    ASSERT_EQ(testing::run_cli_process(forced).exit_code, 0) << read_file_contents(scratch.file("err.txt"));
    EXPECT_EQ(read_json_file(out + "/summary.json").at("linear_backend"), backend);
  }
}

TEST(ForkServer, PlainShellWordsLeaveTheShellItsOwn) {
  using testing::plain_shell_words;
  EXPECT_EQ(plain_shell_words("run --model 'a b.pth'  --arch heads=2"),
            (std::vector<std::string>{"run", "--model", "a b.pth", "--arch", "heads=2"}));
  EXPECT_EQ(plain_shell_words(R"(x "say \"hi\" \\ now" it\'s '' )"),
            (std::vector<std::string>{"x", R"(say "hi" \ now)", "it's", ""}));
  EXPECT_EQ(plain_shell_words("--text 'a|b;c>d $x'"), (std::vector<std::string>{"--text", "a|b;c>d $x"}));
  EXPECT_EQ(plain_shell_words("a~b c#d"), (std::vector<std::string>{"a~b", "c#d"}));
  const std::string cli = ATTNSCOPE_CLI;
  const auto request = testing::cli_shell_command(cli + " run --out 'a b' > o.txt 2>&1");
  ASSERT_TRUE(request);
  EXPECT_EQ(request->args, (std::vector<std::string>{"run", "--out", "a b"}));
  EXPECT_EQ(request->stdout_path, "o.txt");
  EXPECT_EQ(request->stderr_path, "o.txt");
  const auto apart = testing::cli_shell_command(cli + " info>/dev/null 2> 'e f.txt'");
  ASSERT_TRUE(apart);
  EXPECT_EQ(apart->args, (std::vector<std::string>{"info"}));
  EXPECT_EQ(apart->stdout_path, "/dev/null");
  EXPECT_EQ(apart->stderr_path, "e f.txt");
  EXPECT_EQ(testing::cli_shell_command(cli + " info > /dev/null")->stderr_path, "") << "stderr stays the test's";
  const auto gui = testing::cli_shell_command("xvfb-run -a -s '-screen 0 1600x1000x24' " + cli + " --frames 2 > o.txt");
  ASSERT_TRUE(gui);
  EXPECT_TRUE(gui->on_display);
  EXPECT_EQ(gui->args, (std::vector<std::string>{"--frames", "2"}));
  EXPECT_FALSE(testing::cli_shell_command("xvfb-run -a " + cli + " --frames 2 > o.txt")) << "another screen";
  EXPECT_EQ(testing::cli_shell_command(cli + " a '2'> o.txt")->args, (std::vector<std::string>{"a", "2"}))
      << "a quoted 2 is a word, as for the shell";
  for (const std::string& line : std::vector<std::string>{
           cli + " info", cli + " info 2> e.txt", cli + " info 2>&1 > o.txt", "ls > o.txt", cli + " info > o.txt extra",
           cli + " x 3> o.txt", "ATTNSCOPE_LINEAR=blas " + cli + " info > o.txt"})
    EXPECT_FALSE(testing::cli_shell_command(line)) << line;
  for (const std::string line : {"run > out", "a | b", "a; b", "x $HOME", "x \"$HOME\"", "x `id`", "x *.png", "~/x",
                                 "x #comment", "a && b", "'open", "\"open", "x \\", "x\ny"})
    EXPECT_FALSE(plain_shell_words(line)) << line;
}

}  // namespace
}  // namespace attnscope
