#include "views/analysis_options.h"

#include "core/excerpt.h"

namespace attnscope {

AnalysisOption<bool> switch_option(const std::string& name, const std::string& help, bool fallback) {
  return AnalysisOption<bool>(
      name, "on|off", help, fallback,
      [name](const std::string& text) {
        if (text != "on" && text != "off")
          throw std::invalid_argument("--" + name + " expects on or off, got '" + excerpt(text) + "'");
        return text == "on";
      },
      [](const bool& value) { return std::string(value ? "on" : "off"); });
}

AnalysisOption<std::string> text_option(const std::string& name, const std::string& value_name, const std::string& help,
                                        std::function<void(const std::string&)> check) {
  return AnalysisOption<std::string>(
      name, value_name, help, "",
      [check](const std::string& text) {
        if (check) check(text);
        return text;
      },
      [](const std::string& text) { return text; });
}

AnalysisOption<double> number_option(const std::string& name, const std::string& value_name, const std::string& help,
                                     double fallback, double low, double high) {
  return AnalysisOption<double>(
      name, value_name, help, fallback,
      [name, low, high](const std::string& text) {
        const double value = parse_double_option(name, text);
        if (!(value >= low && value <= high))
          throw std::invalid_argument("--" + name + " must be in [" + format_double(low) + ", " + format_double(high) +
                                      "]");
        return value;
      },
      [](const double& value) { return format_double(value); });
}

AnalysisOption<int> count_option(const std::string& name, const std::string& value_name, const std::string& help,
                                 int fallback, int low, int high) {
  return AnalysisOption<int>(
      name, value_name, help, fallback,
      [name, low, high](const std::string& text) {
        const int value = parse_int_option(name, text);
        if (value < low || value > high)
          throw std::invalid_argument("--" + name + " must be from " + std::to_string(low) + " to " +
                                      std::to_string(high));
        return value;
      },
      [](const int& value) { return std::to_string(value); });
}

const AnalysisOption<std::string>& image2_option() {
  static const auto option =
      text_option("image2", "FILE",
                  "similarity: a second image (of the same size), its map of the same query and the best buddies "
                  "of the two; patching: the corrupt image");
  return option;
}

}  // namespace attnscope
