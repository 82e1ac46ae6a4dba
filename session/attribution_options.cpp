// The attribution options of the shared option table (session/app_state.h): which method the
// workbench's attribution view shows, which methods the faithfulness table and eval compare, and
// how deletion/insertion curves and integrated gradients are run.
#include "analysis/attribution.h"
#include "analysis/perturbation.h"
#include "session/app_state.h"

namespace attnscope {

void add_attribution_options(std::vector<OptionSpec>& options) {
  auto bounded = [](const std::string& name, const std::string& value, int low, int high) {
    const int parsed = parse_int_option(name, value);
    if (parsed < low || parsed > high)
      throw std::invalid_argument("--" + name + " must be from " + std::to_string(low) + " to " + std::to_string(high) +
                                  ", got " + value);
    return parsed;
  };
  options.push_back({"method", "NAME",
                     "attribution view: gradcam, gradcam++, xgradcam, layercam, eigencam, hirescam, scorecam, "
                     "relevance, gradrollout, rollout, attention or ig",
                     [](AppState& s, const std::string& v) {
                       if (!is_attribution_method(v)) parse_method_list(v, "--method");  // throws, listing them
                       s.method = v;
                     },
                     [](const AppState& s) { return s.method; }});
  options.push_back({"methods", "LIST",
                     "faithfulness and eval: attribution methods to compare (or all); eval --images also takes "
                     "dino-masks alone (the Jaccard index of DINO's masks)",
                     [](AppState& s, const std::string& v) {
                       if (v != "dino-masks") parse_method_list(v, "--methods");
                       s.methods = v;
                     },
                     [](const AppState& s) { return s.methods; }});
  options.push_back({"steps", "N", "deletion/insertion curves: steps from the image to its replacement (1..10000)",
                     [bounded](AppState& s, const std::string& v) { s.steps = bounded("steps", v, 1, 10000); },
                     [](const AppState& s) { return std::to_string(s.steps); }});
  options.push_back({"replacement", "blur|mean|black|zero",
                     "deletion/insertion curves: what removed cells become (blur: the image blurred by one patch)",
                     [](AppState& s, const std::string& v) {
                       parse_replacement(v);
                       s.replacement = v;
                     },
                     [](const AppState& s) { return s.replacement; }});
  options.push_back({"ig-steps", "N", "integrated gradients: points on the path, both ends included (2..10000)",
                     [bounded](AppState& s, const std::string& v) { s.ig_steps = bounded("ig-steps", v, 2, 10000); },
                     [](const AppState& s) { return std::to_string(s.ig_steps); }});
  options.push_back({"ig-baseline", "zero|black|mean|blur", "integrated gradients: the image the path starts from",
                     [](AppState& s, const std::string& v) {
                       parse_replacement(v);
                       s.ig_baseline = v;
                     },
                     [](const AppState& s) { return s.ig_baseline; }});
}

}  // namespace attnscope
