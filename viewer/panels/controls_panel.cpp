// The sidebar: what to look at (model, image, live input, device, preprocessing), the side-by-side
// panels (each its own checkpoint, variant, p and DWC; window, anchors and f_p norms shared), what
// is selected (layer, head, query, view), how it is coloured (map, scale mode, opacity), the
// session file and the figure export. Every change here re-runs inference through the worker.
#include <imgui.h>
#include <imgui_stdlib.h>
#include <map>

#include <algorithm>
#include <filesystem>

#include "exports/layouts.h"
#include "models/attention_kernels.h"
#include "models/attention_settings.h"
#include "viewer/file_browser.h"
#include "viewer/panels/panel.h"
#include "viewer/panels/sidebar_sections.h"
#include "viewer/workbench.h"
#include "views/option_catalog.h"
#include "views/panel_maps.h"

namespace attnscope {

namespace {

const std::vector<std::string> kModelExtensions = {".safetensors", ".pth", ".pt", ".bin"};
const std::vector<std::string> kImageExtensions = {".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff"};
const std::vector<std::string> kVideoExtensions = {".mp4", ".avi", ".mov", ".mkv", ".webm"};

bool variant_combo(const char* label, Variant& variant) {
  bool changed = false;
  if (ImGui::BeginCombo(label, to_string(variant).c_str())) {
    for (const auto& candidate : enum_entries<Variant>()) {
      if (ImGui::Selectable(candidate.name, candidate.value == variant)) {
        variant = candidate.value;
        changed = true;
      }
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", candidate.description);
    }
    ImGui::EndCombo();
  }
  return changed;
}

// A path field that takes effect on Enter, with a browse button next to it.
bool path_row(const char* id, std::string& edited, const std::string& current, bool& browse) {
  ImGui::PushID(id);
  ImGui::SetNextItemWidth(-70);
  const bool entered = ImGui::InputText("##path", &edited, ImGuiInputTextFlags_EnterReturnsTrue);
  if (!ImGui::IsItemActive() && !entered) edited = current;  // shows the open file unless being edited
  ImGui::SameLine();
  browse = ImGui::Button("Open...");
  ImGui::PopID();
  return entered;
}

// A button per prefix token (class, distillation, registers) to make it the query, and the mean
// attention that patch queries give each of them in panel 1 at this layer: registers that soak up
// attention ("Vision Transformers Need Registers") show here at a glance.
void draw_prefix_queries(Workbench& bench, const InferenceOutcome& outcome) {
  const TokenLayout& tokens = outcome.layout;
  const int prefix = tokens.prefix_tokens();
  if (prefix == 0 || outcome.panels.empty()) return;
  const PanelMaps& panel = outcome.panels.front();
  const bool mean = bench.state.view != HeadView::Head;
  const int head = std::clamp(bench.state.head, 0, int(panel.prefix_received_per_head.size()) - 1);
  for (int token = 0; token < prefix; ++token) {
    const std::string name = tokens.token_name(token);
    double received = 0.0;
    if (mean && size_t(token) < panel.prefix_received.size())
      received = panel.prefix_received[size_t(token)];
    else if (!mean && !panel.prefix_received_per_head.empty())
      received = panel.prefix_received_per_head[size_t(head)][size_t(token)];
    if (token % 3) ImGui::SameLine();
    if (ImGui::SmallButton((name + "##query").c_str())) bench.state.query = QuerySpec::parse(name);
    ImGui::SameLine();
    ImGui::TextDisabled("%.3f", received);
  }
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("numbers: the mean attention patches give each token (%s)", mean ? "mean of heads" : "this head");
  ImGui::PopStyleColor();
}

// The kernels that read `knob`, for a control's note: "focused".
std::string kernels_reading(const AttentionKnob& knob) {
  std::string names;
  for (const KernelSpec& spec : kernel_table())
    if (kernel_reads_knob(spec, knob)) names += (names.empty() ? "" : ", ") + std::string(spec.name);
  return names;
}

// Whether `knob` does anything on a shown panel: its kernel reads it and its checkpoint has the
// parameters it needs, for the kernel it was trained with (a swapped kernel runs without them).
bool knob_applies(const AttentionKnob& knob, const PanelMaps& shown) {
  if (!shown.error.empty() || !kernel_reads_knob(kernel_spec(shown.kernel), knob)) return false;
  return (knob.needs & kReadsDwc) == 0 || (shown.dwc_available && !shown.swapped);
}

// A knob's control over `settings`; true when the user changed it (`settings` then holds the new value).
bool knob_control(const AttentionKnob& knob, AttentionSettings& settings, const InferenceOutcome* outcome) {
  const std::string label = knob.control_label.empty() ? knob.name : knob.control_label;
  switch (knob.control) {
    case KnobControl::Slider: {
      float value = float(knob.number(settings));
      if (!ImGui::SliderFloat(label.c_str(), &value, float(knob.slider_min), float(knob.slider_max), "%.2f"))
        return false;
      knob.set_number(settings, value);
      return true;
    }
    case KnobControl::GridSlider:
    case KnobControl::PatchSlider: {
      // Windows mean different things per family (trained windows on Swin), and nothing on some.
      const bool windows = knob.control == KnobControl::GridSlider;
      const bool trained = windows && outcome && outcome->window.kind == WindowSupport::Kind::Trained;
      const int limit = !outcome  ? (windows ? 14 : 196)
                        : windows ? std::max(outcome->layout.grid_h, outcome->layout.grid_w)
                                  : outcome->layout.patch_tokens();
      const std::string zero = trained ? "trained" : knob.zero_means;
      const int current = int(knob.number(settings));
      const int fallback = windows ? kDefaultWindow : kDefaultPooledAnchors;
      int value = current > 0 ? current : std::min(fallback, limit);
      bool changed = false;
      if (ImGui::SliderInt(label.c_str(), &value, 1, std::max(limit, 1), current ? "%d" : zero.c_str())) {
        knob.set_number(settings, value);
        changed = true;
      }
      ImGui::SameLine();
      if (ImGui::SmallButton((zero + "##" + knob.name).c_str())) {
        knob.set_number(settings, 0);
        changed = true;
      }
      return changed;
    }
    case KnobControl::Switch: {
      bool on = knob.number(settings) != 0.0;
      if (!ImGui::Checkbox(label.c_str(), &on)) return false;
      knob.set_number(settings, on ? 1.0 : 0.0);
      return true;
    }
    case KnobControl::Text: {
      // The field keeps what is typed until Enter applies it; a value set elsewhere (a click on the
      // DLA grid, a session) replaces it.
      static std::map<std::string, std::string> typed, seen, refused;
      const std::string current = knob.text(settings);
      if (seen[knob.name] != current) typed[knob.name] = seen[knob.name] = current;
      char buffer[1024];
      std::snprintf(buffer, sizeof buffer, "%s", typed[knob.name].c_str());
      const bool entered = ImGui::InputText(label.c_str(), buffer, sizeof buffer, ImGuiInputTextFlags_EnterReturnsTrue);
      typed[knob.name] = buffer;
      if (entered) {
        try {
          knob.set(settings, buffer);
          refused[knob.name].clear();
          return true;
        } catch (const std::invalid_argument& e) {
          refused[knob.name] = e.what();
        }
      }
      if (!refused[knob.name].empty()) ImGui::TextWrapped("%s", refused[knob.name].c_str());
      return false;
    }
    case KnobControl::Choice: {
      ImGui::TextUnformatted((label + ":").c_str());
      bool changed = false;
      for (size_t index = 0; index < knob.choices.size(); ++index) {
        ImGui::SameLine();
        if (ImGui::RadioButton((knob.choices[index] + "##" + knob.name).c_str(),
                               knob.text(settings) == knob.choices[index])) {
          knob.set(settings, knob.choices[index]);
          changed = true;
        }
      }
      return changed;
    }
  }
  return false;
}

}  // namespace

struct ControlsPanel : WorkbenchPanel {
  FileBrowser browser;
  FileKind browsing = FileKind::Image;
  bool browsing_save = false;
  int browsing_panel = 0;        // the panel whose model the browser opens (0: the session's model)
  bool browsing_folder = false;  // the browser chooses a folder for `folder_option`
  OptionSpec folder_option;
  std::string model_field, image_field, session_field;
  std::vector<std::string> panel_model_fields = std::vector<std::string>(kMaxPanels - 1);
  ExportFields export_fields;
  InputFields input_fields;
  int camera_index = 0;

  void browse(FileKind kind, const std::string& title, const std::string& start, const std::vector<std::string>& ext,
              bool save = false, int panel = 0) {
    browsing = kind;
    browsing_folder = false;
    browsing_save = save;
    browsing_panel = panel;
    browser.open(title, start, ext, save);
  }

  // One block per panel: its checkpoint (panels 2..4: empty is panel 1's), variant, p and DWC;
  // then the parameters every panel shares unless its spec sets its own.
  void draw_panels(Workbench& bench, const InferenceOutcome* outcome) {
    AppState& state = bench.state;
    const bool scripted = outcome && !outcome->computes_attention;
    if (scripted && (state.attention.variant != Variant::Native || !state.compare.empty())) {
      state.attention.variant = Variant::Native;  // the only attention such a file has
      state.compare.clear();
    }
    if (scripted)
      ImGui::TextWrapped(
          "TorchScript model: it reports its own attention, so variants, p, window and anchors "
          "(which recompute attention from q and k) are off.");
    ImGui::BeginDisabled(scripted);
    int panel_count = 1 + int(state.compare.size());
    if (ImGui::SliderInt("panels", &panel_count, 1, kMaxPanels)) {
      while (int(state.compare.size()) < panel_count - 1) {
        PanelSpec next = state.compare.empty() ? PanelSpec{} : state.compare.back();
        if (state.compare.empty()) next.variant = Variant::Focused;
        state.compare.push_back(next);
      }
      state.compare.resize(size_t(panel_count - 1));
    }
    for (int index = 0; index < panel_count; ++index) {
      ImGui::PushID(index);
      ImGui::Separator();
      PanelSpec* spec = index == 0 ? nullptr : &state.compare[size_t(index - 1)];
      const PanelMaps* shown =
          outcome && size_t(index) < outcome->panels.size() ? &outcome->panels[size_t(index)] : nullptr;
      ImGui::Text("panel %d", index + 1);
      if (spec) {
        bool open_browser = false;
        std::string& field = panel_model_fields[size_t(index - 1)];
        ImGui::SameLine();
        ImGui::TextDisabled("%s", spec->model.empty() ? "(panel 1's model)" : "");
        if (path_row("model", field, spec->model, open_browser)) spec->model = field;
        if (open_browser)
          browse(FileKind::Model, "Open model for panel " + std::to_string(index + 1),
                 spec->model.empty() ? state.model : spec->model, kModelExtensions, false, index);
        if (!spec->model.empty()) {
          ImGui::SameLine();
          if (ImGui::SmallButton("x")) spec->model.clear();
          if (ImGui::IsItemHovered()) ImGui::SetTooltip("use panel 1's model");
        }
      }
      Variant& variant = spec ? spec->variant : state.attention.variant;
      variant_combo("variant", variant);
      const AttentionSettings settings = spec ? spec->settings(state.attention) : state.attention;
      for (const AttentionKnob& knob : attention_knobs()) {
        if (knob.scope != KnobScope::Panel) continue;
        // A knob the panel's layer does not read is off where the knob says so, and a switch shows
        // as it is computed (a DWC switch that is on does nothing on a softmax layer: it shows off);
        // a slider keeps its value, greyed (PolaFormer's alpha on another kernel).
        const bool applies = !shown || knob_applies(knob, *shown);
        AttentionSettings edited = settings;
        if (knob.only_where_read && !applies && knob.control == KnobControl::Switch) knob.set_number(edited, 0.0);
        ImGui::BeginDisabled(knob.only_where_read && shown && !applies);
        if (knob_control(knob, edited, outcome)) {
          if (spec)
            spec->set(knob.name, knob.text(edited));
          else
            knob.copy(edited, state.attention);
        }
        ImGui::EndDisabled();
        if (knob.only_where_read && shown && !applies) {
          const bool weights = (knob.needs & kReadsDwc) == 0 || shown->dwc_available;
          const bool own_weights = (knob.needs & kReadsDwc) == 0 || !shown->swapped;
          const std::string kernels = kernels_reading(knob);
          const std::string why = !weights       ? "no weights for it"
                                  : !own_weights ? "native kernel only"
                                                 : kernels + " only";
          if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
            ImGui::SetTooltip("%s: %s (this panel runs %s)", knob.name.c_str(), why.c_str(),
                              kernel_spec(shown->kernel).name);
          // Said beside it unless its label names those kernels already ("alpha (pola)"): the
          // sidebar has no room for both.
          if (!weights || !own_weights || knob.control_label.find("(" + kernels + ")") == std::string::npos) {
            ImGui::SameLine();
            ImGui::TextDisabled("(%s)", why.c_str());
          }
        }
        if (spec && spec->sets(knob.name) && !knob.only_where_read) {
          ImGui::SameLine();
          if (ImGui::SmallButton(("shared##" + knob.name).c_str())) spec->follow_session(knob.name);
          if (ImGui::IsItemHovered()) ImGui::SetTooltip("follow panel 1's %s", knob.name.c_str());
        }
      }
      ImGui::PopID();
    }
    ImGui::Separator();
    ImGui::TextDisabled("shared by every panel:");
    for (const AttentionKnob& knob : attention_knobs()) {
      if (knob.scope != KnobScope::Shared) continue;
      // The window option does nothing on some families (PVT's reduced keys): said below.
      const bool off = knob.control == KnobControl::GridSlider && outcome && !outcome->window.applies();
      ImGui::BeginDisabled(off);
      knob_control(knob, state.attention, outcome);
      ImGui::EndDisabled();
      // A folder (mean ablation's images): chosen in the browser as the analyses' folders are.
      if (const OptionSpec* option = knob.value_name == "DIR" ? find_option(knob.name) : nullptr) {
        ImGui::SameLine();
        ImGui::PushID(knob.name.c_str());
        if (ImGui::Button("...")) bench.folder_request = Workbench::FolderRequest{*option, option->get(state)};
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("Browse for the folder");
        ImGui::PopID();
      }
    }
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    for (const AttentionKnob& knob : attention_knobs()) {
      if (knob.scope != KnobScope::Shared) continue;
      if (knob.control == KnobControl::GridSlider && outcome)
        ImGui::TextWrapped("%s: %s", knob.name.c_str(), outcome->window.text.c_str());
      else if (!knob.zero_note.empty())
        ImGui::TextWrapped("%s: %s", knob.name.c_str(),
                           knob.number(state.attention) != 0.0 ? "in use" : knob.zero_note.c_str());
    }
    ImGui::PopStyleColor();
    ImGui::EndDisabled();
  }

  // The colour scale mode, named as the colour bar names it; fixed takes its range here.
  static void draw_scale_mode(Workbench& bench) {
    AppState& state = bench.state;
    static const std::pair<ScaleMode, const char*> kModes[] = {{ScaleMode::ZeroMax, "0..max"},
                                                               {ScaleMode::MinMax, "min..max"},
                                                               {ScaleMode::Fixed, "fixed [a, b]"},
                                                               {ScaleMode::Log, "log"},
                                                               {ScaleMode::Uniform, "x uniform"}};
    const char* current = "?";
    for (const auto& [mode, name] : kModes)
      if (mode == state.scale.mode) current = name;
    if (ImGui::BeginCombo("scale", current)) {
      for (const auto& [mode, name] : kModes)
        if (ImGui::Selectable(name, mode == state.scale.mode)) {
          if (mode == ScaleMode::Fixed && state.scale.mode != ScaleMode::Fixed) {
            // Start from what is on screen, so switching to fixed changes nothing until edited.
            state.scale.low = bench.shown.scale.vmin;
            state.scale.high = bench.shown.scale.vmax;
          }
          state.scale.mode = mode;
        }
      ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("0..max: 0 is no attention; x uniform: weight times the number of keys, 1 = uniform");
    if (state.scale.mode == ScaleMode::Fixed) {
      double range[2] = {state.scale.low, state.scale.high};
      if (ImGui::InputScalarN("a, b", ImGuiDataType_Double, range, 2, nullptr, nullptr, "%.4g",
                              ImGuiInputTextFlags_EnterReturnsTrue) &&
          range[1] > range[0]) {
        state.scale.low = range[0];
        state.scale.high = range[1];
      }
    }
  }

  void draw(Workbench& bench) override {
    AppState& state = bench.state;
    if (!begin_fixed_window("Controls", bench.layout.sidebar_pos, bench.layout.sidebar_size)) {
      ImGui::End();
      return;
    }
    const InferenceOutcome* outcome = bench.outcome.get();
    ImGui::PushItemWidth(190);  // leaves room for the label and a small button on the right

    if (ImGui::CollapsingHeader("Model and input", ImGuiTreeNodeFlags_DefaultOpen)) {
      bool open_browser = false;
      ImGui::TextUnformatted("Model");
      if (path_row("model", model_field, state.model, open_browser)) bench.open_file(FileKind::Model, model_field);
      if (open_browser) browse(FileKind::Model, "Open model", state.model, kModelExtensions);
      ImGui::Checkbox("keep settings", &bench.keep_settings_on_model_change);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "Opening another model keeps the variant, its knobs, ablations and the SAE; off, they go back to\n"
            "their defaults and the status line says which");
      ImGui::TextUnformatted("Image");
      if (path_row("image", image_field, state.image, open_browser)) bench.open_file(FileKind::Image, image_field);
      if (open_browser) browse(FileKind::Image, "Open image", state.image, kImageExtensions);
      if (ImGui::Button("Video file...")) browse(FileKind::Video, "Open video", state.image, kVideoExtensions);
      ImGui::SameLine();
      ImGui::SetNextItemWidth(60);
      ImGui::InputInt("##camera", &camera_index, 0);
      camera_index = std::max(camera_index, 0);
      ImGui::SameLine();
      if (ImGui::Button("Camera")) bench.open_camera(camera_index);
      if (bench.video) {
        ImGui::Text("live: %s", bench.video->source().c_str());
        ImGui::SameLine();
        if (ImGui::Button("Stop")) bench.stop_video();
      }
      if (ImGui::BeginCombo("device", state.device.c_str())) {
        for (const auto& device : bench.devices)
          if (ImGui::Selectable(device.c_str(), device == state.device)) state.device = device;
        ImGui::EndCombo();
      }
      if (outcome) {
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
        ImGui::TextWrapped("%s, %d attention layers; layer %d: %d heads, %dx%d patches", outcome->model_family.c_str(),
                           outcome->depth, outcome->layer, outcome->heads, outcome->layout.grid_h,
                           outcome->layout.grid_w);
        if (!outcome->panels.empty()) ImGui::TextWrapped("input: %s", outcome->panels.front().preprocessing.c_str());
        ImGui::PopStyleColor();
      }
    }

    if (ImGui::CollapsingHeader("Input")) draw_input_section(bench, input_fields);

    if (ImGui::CollapsingHeader("Panels", ImGuiTreeNodeFlags_DefaultOpen)) draw_panels(bench, outcome);

    if (ImGui::CollapsingHeader("Selection", ImGuiTreeNodeFlags_DefaultOpen)) {
      const int depth = outcome ? outcome->depth : 1, heads = outcome ? outcome->heads : 1;
      int layer = state.layer < 0 ? depth + state.layer : state.layer;
      if (ImGui::SliderInt("layer", &layer, 0, depth - 1)) state.layer = layer;
      int head = state.head;
      if (ImGui::SliderInt("head", &head, 0, heads - 1)) state.head = head;
      enum_radio_buttons(state.view, true);
      ImGui::SameLine();
      ImGui::TextDisabled("(view)");
      ImGui::Text("query: %s",
                  outcome ? outcome->layout.token_name(outcome->query_token).c_str() : state.query.text().c_str());
      if (outcome && !outcome->query_note.empty()) {  // the query shown is not the one asked for: said in full
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.7f, 0.3f, 1.0f));
        ImGui::TextWrapped("%s", outcome->query_note.c_str());
        ImGui::PopStyleColor();
      }
      if (outcome) draw_prefix_queries(bench, *outcome);
      ImGui::TextDisabled("click a patch in the image to query it");
      enum_radio_buttons(state.direction, false);
      ImGui::Checkbox("outline windows", &state.windows);
      // L2ViT's global layers: the map before or after the LCM's spatial mixing.
      bool after_lcm = state.lcm == LcmView::After;
      if (ImGui::Checkbox("after the LCM (L2ViT global layers)", &after_lcm))
        state.lcm = after_lcm ? LcmView::After : LcmView::Before;
      if (outcome && !outcome->lcm_note.empty()) ImGui::TextDisabled("%s", outcome->lcm_note.c_str());
    }

    if (ImGui::CollapsingHeader("Display", ImGuiTreeNodeFlags_DefaultOpen)) {
      if (ImGui::BeginCombo("colour map", to_string(state.colormap).c_str())) {
        for (const auto& name : colormap_names())
          if (ImGui::Selectable(name.c_str(), name == to_string(state.colormap))) state.colormap = parse_colormap(name);
        ImGui::EndCombo();
      }
      draw_scale_mode(bench);
      float opacity = float(state.opacity);
      if (ImGui::SliderFloat("opacity", &opacity, 0.0f, 1.0f, "%.2f")) state.opacity = opacity;
      bool follows = state.alpha == OverlayAlpha::Value;
      if (ImGui::Checkbox("opacity follows the value", &follows))
        state.alpha = follows ? OverlayAlpha::Value : OverlayAlpha::Constant;
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("low weights transparent: the image shows where attention is low");
      ImGui::TextUnformatted("analysis (right column, panel 1):");
      draw_analysis_switch(bench);
    }

    if (ImGui::CollapsingHeader("Session", ImGuiTreeNodeFlags_DefaultOpen)) {
      if (session_field.empty())
        session_field = bench.options.session_path.empty() ? "session.json" : bench.options.session_path;
      ImGui::SetNextItemWidth(-1);
      ImGui::InputText("##session", &session_field);
      if (ImGui::Button("Save")) bench.save_session(session_field);
      ImGui::SameLine();
      if (ImGui::Button("Load")) bench.load_session(session_field);
      ImGui::SameLine();
      if (ImGui::Button("Browse...")) browse(FileKind::Session, "Session file", session_field, {".json"});
      ImGui::TextDisabled("the same file drives `attnscope run --session`");
    }

    if (ImGui::CollapsingHeader("Export figure")) draw_export_section(bench, export_fields);

    if (outcome && !outcome->panels.empty() && ImGui::CollapsingHeader("Predictions (top 5)")) {
      for (size_t p = 0; p < outcome->panels.size(); ++p) {
        const PanelMaps& panel = outcome->panels[p];
        ImGui::Text("panel %zu:", p + 1);
        for (const auto& prediction : panel.top)
          ImGui::Text("  %5.1f%%  %s", 100.0 * prediction.probability, prediction.name.c_str());
        if (panel.error.empty() && panel.output_kind != OutputKind::Logits)
          ImGui::TextWrapped("  %s, no classes: the model's output is not a prediction",
                             to_string(panel.output_kind).c_str());
      }
    }
    ImGui::PopItemWidth();

    // A dialog the menu bar or a shortcut asked for.
    if (bench.browse_request) {
      const FileKind kind = *bench.browse_request;
      bench.browse_request.reset();
      if (kind == FileKind::Model) browse(kind, "Open model", state.model, kModelExtensions);
      if (kind == FileKind::Image) browse(kind, "Open image", state.image, kImageExtensions);
      if (kind == FileKind::Video) browse(kind, "Open video", state.image, kVideoExtensions);
      if (kind == FileKind::Session) browse(kind, "Session file", session_field, {".json"});
    }
    std::string chosen;
    bool picked = false;
    if (bench.folder_request) {
      const Workbench::FolderRequest request = *bench.folder_request;
      bench.folder_request.reset();
      folder_option = request.option;
      browsing_folder = true;
      browser.open_folder("Choose the folder for " + folder_option.name, request.start);
      if (request.choose_at_once) {
        chosen = browser.pick();
        browser.close();
        picked = true;
      }
    }
    if (picked || browser.draw(chosen)) {
      if (browsing_folder) {
        try {
          folder_option.set(state, chosen);
        } catch (const std::exception& e) {
          bench.report_error(e.what());
        }
      } else if (browsing == FileKind::Session) {
        session_field = chosen;
        if (std::filesystem::exists(chosen)) bench.load_session(chosen);
      } else if (browsing == FileKind::Model && browsing_panel > 0) {
        if (size_t(browsing_panel) <= state.compare.size()) state.compare[size_t(browsing_panel - 1)].model = chosen;
      } else {
        bench.open_file(browsing, chosen);
      }
    }
    ImGui::End();
  }
};

std::unique_ptr<WorkbenchPanel> make_controls_panel() { return std::make_unique<ControlsPanel>(); }

}  // namespace attnscope
