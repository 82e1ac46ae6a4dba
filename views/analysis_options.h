// An analysis's own options, typed: each is declared once in its analysis's file, parsed where it
// enters (the CLI, a session file, the workbench's generated control) into its type, and read by
// the analysis as that type (AnalysisOptionValues, session/app_state.h), never parsed again.
#pragma once

#include <functional>
#include <string>

#include "core/enum_names.h"
#include "session/app_state.h"

namespace attnscope {

template <typename T>
class AnalysisOption {
 public:
  AnalysisOption(std::string name, std::string value_name, std::string help, T fallback,
                 std::function<T(const std::string&)> parse, std::function<std::string(const T&)> format)
      : name_(std::move(name)),
        value_name_(std::move(value_name)),
        help_(std::move(help)),
        fallback_(std::move(fallback)),
        parse_(std::move(parse)),
        format_(std::move(format)) {}

  // The session's value, or the default when it has none.
  const T& operator()(const AnalysisSettings& settings) const {
    const T* held = settings.options.get<T>(name_);
    return held ? *held : fallback_;
  }
  const std::string& name() const { return name_; }
  // The value as the option writes it (for cache keys and summaries).
  std::string text(const AnalysisSettings& settings) const { return format_((*this)(settings)); }

  // The option table's row (the entry's `options`): a slider over [low, high] when that range is
  // not empty, radio buttons when the value name lists choices, a text field otherwise.
  OptionSpec spec(double slider_low = 0, double slider_high = 0) const {
    OptionSpec spec;
    spec.name = name_;
    spec.value_name = value_name_;
    spec.help = help_;
    spec.set = [name = name_, parse = parse_, format = format_](AppState& state, const std::string& text) {
      T value = parse(text);
      std::string canonical = format(value);
      state.options.set(name, std::move(value), std::move(canonical));
    };
    spec.get = [option = *this](const AppState& state) { return option.text(state); };
    spec.slider_min = slider_low;
    spec.slider_max = slider_high;
    return spec;
  }

 private:
  std::string name_, value_name_, help_;
  T fallback_;
  std::function<T(const std::string&)> parse_;
  std::function<std::string(const T&)> format_;
};

// on|off (`--name` alone: on).
AnalysisOption<bool> switch_option(const std::string& name, const std::string& help, bool fallback);
// Any text `check` accepts (throws std::invalid_argument), e.g. a path; empty by default.
AnalysisOption<std::string> text_option(const std::string& name, const std::string& value_name, const std::string& help,
                                        std::function<void(const std::string&)> check = {});
// A number in [low, high].
AnalysisOption<double> number_option(const std::string& name, const std::string& value_name, const std::string& help,
                                     double fallback, double low, double high);
AnalysisOption<int> count_option(const std::string& name, const std::string& value_name, const std::string& help,
                                 int fallback, int low, int high);
// One of an enum's names (core/enum_names.h).
template <typename E>
AnalysisOption<E> enum_option(const std::string& name, const std::string& help, E fallback) {
  return AnalysisOption<E>(
      name, enum_choices_bar<E>(), help, fallback,
      [name](const std::string& text) { return parse_enum<E>(name, text); },
      [](const E& value) { return enum_name(value); });
}

// --image2: the second image, read by similarity (its map and best buddies) and patching (the
// corrupt input); declared in similarity's entry, read by both.
const AnalysisOption<std::string>& image2_option();

// The switch's OptionSpec takes `--name` alone as on.
inline OptionSpec switch_spec(const AnalysisOption<bool>& option) {
  OptionSpec spec = option.spec();
  spec.implicit_value = "on";
  return spec;
}

}  // namespace attnscope
