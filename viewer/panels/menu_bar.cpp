// The menu bar and the keyboard shortcuts: File (open a model, image, video or session, save the
// session, export, quit), Edit (undo, redo), Analysis (every analysis once, its description on
// hover), Help (the shortcuts, about, the docs). Each item is a Workbench action a control
// elsewhere also takes, so a menu and its button cannot disagree.
#include <imgui.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "models/model_scan.h"
#include "session/export_folder.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/analysis_registry.h"

namespace attnscope {
namespace {

// ImGui 1.86's GLFW backend indexes io.KeysDown by GLFW's key codes: the ASCII capitals, and 290 for F1.
constexpr int kKeyF1 = 290;

bool chord(char key, bool shift = false) {
  const ImGuiIO& io = ImGui::GetIO();
  return io.KeyCtrl && io.KeyShift == shift && ImGui::IsKeyPressed(key, false);
}

struct Shortcut {
  const char* keys;
  const char* what;
};
constexpr Shortcut kShortcuts[] = {
    {"Ctrl+Z", "undo the last change of the session (query, knobs, ablations, prompts, model, panels)"},
    {"Ctrl+Y, Ctrl+Shift+Z", "redo"},
    {"Ctrl+O", "open a model"},
    {"Ctrl+I", "open an image"},
    {"Ctrl+S", "save the session"},
    {"Ctrl+E", "export what is on screen"},
    {"Ctrl+Q", "quit"},
    {"F1", "this list"},
    {"click a patch", "make it the query"},
    {"mouse wheel", "zoom the image about the cursor (whole steps; double-click: whole image)"},
    {"left drag", "pan the zoomed image"},
    {"right-drag", "draw the metrics box"},
    {"drop a file", "open a checkpoint, image, video or session (by its extension)"},
};

std::string session_file(const Workbench& bench) {
  return bench.options.session_path.empty() ? "session.json" : bench.options.session_path;
}

void recent_menu(Workbench& bench, const char* title, const std::vector<std::string>& names, FileKind kind) {
  if (!ImGui::BeginMenu(title, !names.empty())) return;
  for (const std::string& name : names)
    if (ImGui::MenuItem(name.c_str())) bench.open_file(kind, name);
  ImGui::EndMenu();
}

struct MenuBar : WorkbenchPanel {
  bool show_shortcuts = false, show_about = false;
  // The caches' models (`attnscope models`), scanned off the main thread the first time the menu
  // opens: headers only, but a large cache takes a while.
  std::future<std::vector<CachedModel>> scan;
  std::vector<CachedModel> cached;
  bool scanned = false;

  void cached_models_menu(Workbench& bench) {
    if (!ImGui::BeginMenu("Models on this machine")) return;
    if (!scanned && !scan.valid())
      scan = std::async(std::launch::async, [] {
        std::vector<CachedModel> models = scan_model_caches(500);
        wake_main_thread();  // the open menu redraws with the list
        return models;
      });
    if (!scanned && scan.valid() && scan.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      try {
        cached = scan.get();
      } catch (const std::exception& e) {
        bench.report_error(std::string("scanning the model caches: ") + e.what());
      }
      scanned = true;
    }
    if (!scanned) {
      ImGui::TextDisabled("scanning the Hugging Face and torch.hub caches...");
    } else if (cached.empty()) {
      ImGui::TextDisabled("none in the Hugging Face or torch.hub caches (attnscope models lists them)");
    }
    for (const CachedModel& model : cached) {
      const std::string label = model.name + "  (" + (model.opens.empty() ? "refused" : model.opens) + ")";
      if (ImGui::MenuItem(label.c_str(), nullptr, false, !model.opens.empty()))
        bench.open_file(FileKind::Model, model.name);
      if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip("%s\n%.1f MiB in %s%s%s", model.name.c_str(), double(model.bytes) / double(1 << 20),
                          model.path.c_str(), model.why_not.empty() ? "" : "\n", model.why_not.c_str());
    }
    ImGui::EndMenu();
  }

  void draw(Workbench& bench) override {
    // Shortcuts, unless a text field has the keyboard (there Ctrl+Z undoes the typing).
    if (!ImGui::GetIO().WantTextInput) {
      if (chord('Z')) bench.undo();
      if (chord('Y') || chord('Z', true)) bench.redo();
      if (chord('O')) bench.browse_request = FileKind::Model;
      if (chord('I')) bench.browse_request = FileKind::Image;
      if (chord('S')) bench.save_session(session_file(bench));
      if (chord('E')) bench.export_figure(default_export_folder(bench.options.session_path), true);
      if (chord('Q')) bench.quit_requested = true;
      if (ImGui::IsKeyPressed(kKeyF1, false)) show_shortcuts = !show_shortcuts;
    }
    if (ImGui::BeginMainMenuBar()) {
      if (ImGui::BeginMenu("File")) {
        if (ImGui::MenuItem("Open model...", "Ctrl+O")) bench.browse_request = FileKind::Model;
        if (ImGui::MenuItem("Open image...", "Ctrl+I")) bench.browse_request = FileKind::Image;
        if (ImGui::MenuItem("Open video...")) bench.browse_request = FileKind::Video;
        if (ImGui::MenuItem("Open session...")) bench.browse_request = FileKind::Session;
        recent_menu(bench, "Recent models", bench.recent.models(), FileKind::Model);
        recent_menu(bench, "Recent images", bench.recent.images(), FileKind::Image);
        cached_models_menu(bench);
        if (ImGui::MenuItem("Save session", "Ctrl+S")) bench.save_session(session_file(bench));
        ImGui::Separator();
        if (ImGui::MenuItem("Export what is on screen", "Ctrl+E"))
          bench.export_figure(default_export_folder(bench.options.session_path), true);
        if (ImGui::MenuItem("Export the session's layout"))
          bench.export_figure(default_export_folder(bench.options.session_path));
        ImGui::Separator();
        if (ImGui::MenuItem("Quit", "Ctrl+Q")) bench.quit_requested = true;
        ImGui::EndMenu();
      }
      if (ImGui::BeginMenu("Edit")) {
        if (ImGui::MenuItem("Undo", "Ctrl+Z", false, bench.history.can_undo())) bench.undo();
        if (ImGui::MenuItem("Redo", "Ctrl+Y", false, bench.history.can_redo())) bench.redo();
        ImGui::MenuItem("Keep settings on a model change", nullptr, &bench.keep_settings_on_model_change);
        ImGui::EndMenu();
      }
      if (ImGui::BeginMenu("Analysis")) {
        if (ImGui::MenuItem("none (hide the column)", nullptr, bench.state.analysis == "none"))
          bench.state.analysis = "none";
        const bool scripted = bench.outcome && !bench.outcome->computes_attention;
        for (const AnalysisEntry& entry : analysis_registry()) {
          if (entry.label.empty()) continue;
          const bool unavailable = scripted && entry.needs_computed_attention;
          if (ImGui::MenuItem(entry.label.c_str(), nullptr, bench.state.analysis == entry.name, !unavailable))
            bench.state.analysis = entry.name;
          if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
            ImGui::SetTooltip("%s%s", entry.help.c_str(),
                              unavailable ? "\n(needs q, k and activations: a TorchScript file gives none)" : "");
        }
        ImGui::EndMenu();
      }
      if (ImGui::BeginMenu("Help")) {
        if (ImGui::MenuItem("Shortcuts", "F1")) show_shortcuts = true;
        if (ImGui::MenuItem("About attnscope")) show_about = true;
        ImGui::EndMenu();
      }
      ImGui::EndMainMenuBar();
    }
    if (show_shortcuts) draw_shortcuts();
    if (show_about) draw_about();
  }

  void draw_shortcuts() {
    ImGui::SetNextWindowSize(ImVec2(560, 0), ImGuiCond_Appearing);
    if (ImGui::Begin("Shortcuts", &show_shortcuts, ImGuiWindowFlags_NoCollapse)) {
      if (ImGui::BeginTable("shortcuts", 2, ImGuiTableFlags_RowBg)) {
        for (const Shortcut& shortcut : kShortcuts) {
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(shortcut.keys);
          ImGui::TableNextColumn();
          ImGui::TextWrapped("%s", shortcut.what);
        }
        ImGui::EndTable();
      }
    }
    ImGui::End();
  }

  void draw_about() {
    ImGui::SetNextWindowSize(ImVec2(560, 0), ImGuiCond_Appearing);
    if (ImGui::Begin("About attnscope", &show_about, ImGuiWindowFlags_NoCollapse)) {
      ImGui::TextWrapped(
          "attnscope: a workbench for looking inside vision transformers (attention per head, attributions, "
          "the residual stream, sparse-autoencoder features, softmax against linear kernels).");
      ImGui::TextWrapped(
          "The guides are beside the source: README.md (the tour), docs/workbench.md (this window), "
          "docs/commands.md (every option), docs/analyses.md (what each analysis computes and whose code it "
          "matches).");
    }
    ImGui::End();
  }
};

}  // namespace

std::unique_ptr<WorkbenchPanel> make_menu_bar() { return std::make_unique<MenuBar>(); }

}  // namespace attnscope
