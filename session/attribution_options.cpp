// The attribution options of the shared option table (session/app_state.h): which method the
// workbench's attribution view shows, which methods the faithfulness table and eval compare, and
// how deletion/insertion curves and integrated gradients are run.
#include "analysis/attribution.h"
#include "analysis/perturbation.h"
#include "core/excerpt.h"
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
  options.push_back({"method", "NAME", "attribution view: " + enum_choices_text<AttributionMethod>(),
                     [](AppState& s, const std::string& v) {
                       const AttributionMethod* method = find_enum<AttributionMethod>(v);
                       if (!method)
                         throw std::invalid_argument("--method: unknown method '" + excerpt(v) + "' (expected " +
                                                     enum_choices_text<AttributionMethod>() + ")");
                       s.method = *method;
                     },
                     [](const AppState& s) { return to_string(s.method); }});
  options.push_back({"methods", "LIST",
                     "faithfulness and eval: attribution methods to compare (or all); eval --images also takes "
                     "dino-masks alone (the Jaccard index of DINO's masks)",
                     [](AppState& s, const std::string& v) { s.methods = parse_method_selection(v, "--methods"); },
                     [](const AppState& s) { return to_string(s.methods); }});
  options.push_back({"steps", "N", "deletion/insertion curves: steps from the image to its replacement (1..10000)",
                     [bounded](AppState& s, const std::string& v) { s.steps = bounded("steps", v, 1, 10000); },
                     [](const AppState& s) { return std::to_string(s.steps); }});
  options.push_back({"replacement", enum_choices_bar<Replacement>(),
                     "deletion/insertion curves: what removed cells become (blur: the image blurred by one patch)",
                     [](AppState& s, const std::string& v) { s.replacement = parse_replacement(v); },
                     [](const AppState& s) { return to_string(s.replacement); }});
  options.push_back({"ig-steps", "N", "integrated gradients: points on the path, both ends included (2..10000)",
                     [bounded](AppState& s, const std::string& v) { s.ig_steps = bounded("ig-steps", v, 2, 10000); },
                     [](const AppState& s) { return std::to_string(s.ig_steps); }});
  options.push_back({"ig-baseline", "zero|black|mean|blur", "integrated gradients: the image the path starts from",
                     [](AppState& s, const std::string& v) { s.ig_baseline = parse_replacement(v); },
                     [](const AppState& s) { return to_string(s.ig_baseline); }});
}

FaithfulnessTableRequest faithfulness_request(const AppState& state) {
  FaithfulnessTableRequest request;
  if (state.methods.dino_masks)
    throw std::invalid_argument("--methods dino-masks is eval --images' own: give attribution methods here");
  request.methods = state.methods.methods;
  request.attribution.layer = state.gradcam_layer;
  request.attribution.attention_layer = state.layer;
  request.attribution.fusion = state.fusion;
  request.attribution.discard = state.discard;
  request.attribution.ig_steps = state.ig_steps;
  request.attribution.ig_baseline = state.ig_baseline;
  request.faithfulness.steps = state.steps;
  request.faithfulness.replacement = state.replacement;
  return request;
}

}  // namespace attnscope
