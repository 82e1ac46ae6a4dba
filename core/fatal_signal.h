// A crash (a bug of ours, or of a library under us) reported before the process ends.
#pragma once

namespace attnscope {

// On SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT: "attnscope: fatal signal: SIGSEGV" and a backtrace
// on stderr, then the default action (the exit status and core dump stay the signal's). A rare GPU
// run that dies must leave a trail to fix it by.
void install_fatal_signal_report();

}  // namespace attnscope
