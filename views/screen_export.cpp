#include "views/screen_export.h"

#include "views/analysis_registry.h"
#include "views/option_catalog.h"

namespace attnscope {

Figure analysis_view_figure(const InferenceOutcome& outcome, const AppState& state) {
  const AnalysisEntry* entry = find_analysis(state.analysis);
  if (!entry || !entry->figure) throw std::invalid_argument("the analysis view '" + state.analysis + "' has no figure");
  Figure figure = entry->figure(outcome, state);
  if (figure.title.empty()) figure.title = entry->label + " view";
  // Panels without a data name still write their numbers: named after their place.
  for (size_t index = 0; index < figure.panels.size(); ++index)
    if (figure.panels[index].data_name.empty() && !std::holds_alternative<std::monostate>(figure.panels[index].content))
      figure.panels[index].data_name = entry->name + "_" + std::to_string(index);
  return figure;
}

ExportedFigure export_analysis_view(const InferenceOutcome& outcome, const AppState& state,
                                    const std::string& out_dir) {
  const Figure figure = analysis_view_figure(outcome, state);
  AppState session = state;
  session.figure.layout = "panels";  // what `export --session` can make of it: the attention panels
  return write_figure_bundle(
      figure, figure_output(session), to_session_file_json(state), outcome.input_rgb, out_dir,
      figure_stem(state.image.empty() ? "live" : state.image, state.analysis + "-view") + state.figure.stem_suffix);
}

}  // namespace attnscope
