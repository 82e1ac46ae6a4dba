// A crash says which signal and where, then still ends the process by that signal.
#include <gtest/gtest.h>

#include <csignal>

#include "core/fatal_signal.h"

namespace attnscope {
namespace {

TEST(FatalSignal, ASegfaultIsNamedWithABacktraceAndStillKillsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // LibTorch's threads are running
  EXPECT_EXIT(
      {
        install_fatal_signal_report();
        std::raise(SIGSEGV);
      },
      ::testing::KilledBySignal(SIGSEGV), "attnscope: fatal signal: SIGSEGV\n.*\\[0x[0-9a-f]+\\]");
}

TEST(FatalSignal, AnAbortIsNamedToo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_fatal_signal_report();
        std::abort();
      },
      ::testing::KilledBySignal(SIGABRT), "attnscope: fatal signal: SIGABRT");
}

}  // namespace
}  // namespace attnscope
