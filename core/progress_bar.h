// A progress bar on stderr for long commands (export over a folder, Score-CAM's forward passes,
// eval over a folder): one line redrawn in place on a terminal, a line per step otherwise (logs, CI).
#pragma once

#include <unistd.h>

#include <iostream>
#include <string>

namespace attnscope {

class ProgressBar {
 public:
  ProgressBar() : terminal_(::isatty(STDERR_FILENO) == 1) {}

  // `done` of `total` finished; `label` names what is being worked on (or what was done).
  void show(size_t done, size_t total, const std::string& label) {
    if (total < 2) return;  // one step: nothing to follow
    if (!terminal_) {
      if (done < total) std::cerr << "[" << done + 1 << "/" << total << "] " << label << "\n";
      return;
    }
    constexpr size_t kWidth = 30;
    const size_t filled = total ? done * kWidth / total : kWidth;
    const std::string name = label.size() > 40 ? "..." + label.substr(label.size() - 37) : label;
    std::cerr << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, '-') << "] " << done << "/" << total
              << " " << name << "\033[K" << std::flush;
    if (done == total) std::cerr << "\n";
  }

  // Whether the bar redraws in place (a terminal) rather than printing a line per step.
  bool terminal() const { return terminal_; }

  // Error lines go above the bar.
  void error(const std::string& line) {
    if (terminal_) std::cerr << "\r\033[K";
    std::cerr << line << "\n";
  }

 private:
  bool terminal_;
};

}  // namespace attnscope
