// The folder jobs' windows (viewer/folder_jobs.h): the keep-or-cancel question a model change asks
// while a job runs, and one window per kept job with its progress, then its figure, naming the
// model and settings it was computed with.
#include <imgui.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "session/export_folder.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"
#include "views/screen_export.h"

namespace attnscope {

namespace {

struct FolderJobsPanel : WorkbenchPanel {
  std::map<uint64_t, PlotImage> pictures;  // per kept result (its run's id)
  std::map<uint64_t, std::string> figure_errors;

  void draw(Workbench& bench) override {
    draw_choice(bench);
    const auto& kept = bench.jobs->kept();
    for (size_t index = 0; index < kept.size(); ++index) draw_kept(bench, index);
  }

  static void draw_choice(Workbench& bench) {
    const auto& choice = bench.jobs->choice();
    if (!choice) return;
    const ImVec2 at(bench.layout.views_pos.x + bench.layout.views_size.x * 0.5f, bench.layout.views_pos.y + 40);
    ImGui::SetNextWindowPos(at, ImGuiCond_Always, ImVec2(0.5f, 0.0f));
    ImGui::SetNextWindowSize(ImVec2(std::min(560.0f, bench.layout.views_size.x - 20), 0));
    ImGui::Begin("The model changed while a folder job runs", nullptr,
                 ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove);
    const auto [done, total] = bench.worker.job_progress;
    ImGui::TextWrapped("%s is %d of %d images done.", choice->c_str(), done, total);
    ImGui::TextWrapped(
        "Keep it: it runs on with its own copy of that model, beside the new one, and its result opens in a window "
        "of its own. Cancel it: what it did stays cached, to go on from there when you come back to that model.");
    if (ImGui::Button("Keep it running")) bench.jobs->keep();
    ImGui::SameLine();
    if (ImGui::Button("Cancel it")) bench.jobs->cancel();
    ImGui::End();
  }

  void draw_kept(Workbench& bench, size_t index) {
    const FolderJobs::Kept& kept = bench.jobs->kept()[index];
    ImGui::SetNextWindowPos(
        ImVec2(bench.layout.views_pos.x + 30 + 30 * float(index), bench.layout.views_pos.y + 60 + 30 * float(index)),
        ImGuiCond_FirstUseEver);
    ImGui::SetNextWindowSize(ImVec2(520, 520), ImGuiCond_FirstUseEver);
    const std::string title = "Kept job: " + kept.description + "##kept" + std::to_string(index);
    if (!ImGui::Begin(title.c_str(), nullptr, ImGuiWindowFlags_HorizontalScrollbar)) {
      ImGui::End();
      return;
    }
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("computed with: %s", kept.description.c_str());
    ImGui::PopStyleColor();
    if (kept.worker) {
      const auto [done, total] = kept.worker->progress();
      ImGui::ProgressBar(total > 0 ? float(done) / float(total) : 0.0f, ImVec2(-80, 0),
                         (std::to_string(done) + "/" + std::to_string(total) + " images").c_str());
      ImGui::SameLine();
      ImGui::BeginDisabled(kept.cancelled);
      if (ImGui::Button("Cancel")) bench.jobs->cancel_kept(index);
      ImGui::EndDisabled();
    } else {
      if (ImGui::Button("Export figure"))
        bench.export_kept_job(index, default_export_folder(bench.options.session_path));
      ImGui::SameLine();
      if (ImGui::Button("Close")) {
        if (kept.result) pictures.erase(kept.result->request_id);
        bench.jobs->close_kept(index);
        ImGui::End();
        return;
      }
    }
    if (!kept.error.empty()) ImGui::TextColored(ImVec4(1.0f, 0.35f, 0.35f, 1.0f), "%s", kept.error.c_str());
    if (kept.result) draw_result(bench, kept);
    ImGui::End();
  }

  void draw_result(Workbench& bench, const FolderJobs::Kept& kept) {
    const uint64_t id = kept.result->request_id;
    PlotImage& picture = pictures[id];
    const int width = std::max(200, int(ImGui::GetContentRegionAvail().x));
    const AppState figure_state = job_figure_state(bench.state, kept.request);
    try {
      refresh_plot(picture, bench.state.DisplaySettings::key(), width,
                   [&] { return analysis_view_figure(*kept.result, figure_state); });
      figure_errors.erase(id);
    } catch (const std::exception& e) {
      figure_errors[id] = e.what();
    }
    if (figure_errors.count(id)) {
      ImGui::TextWrapped("no figure: %s", figure_errors[id].c_str());
      return;
    }
    gl::opaque_image(picture.texture.imgui_id(), ImVec2(float(picture.width), float(picture.height)));
  }

  void report(const Workbench& bench, nlohmann::json& about, nlohmann::json&) const override {
    nlohmann::json jobs = {{"choice", bench.jobs->choice() ? nlohmann::json(*bench.jobs->choice()) : nullptr}};
    nlohmann::json kept_jobs = nlohmann::json::array();
    for (const FolderJobs::Kept& kept : bench.jobs->kept()) {
      nlohmann::json one = {{"description", kept.description},
                            {"model", kept.request.model},
                            {"analysis", kept.request.analysis},
                            {"running", bool(kept.worker)},
                            {"error", kept.error}};
      if (kept.result) {
        nlohmann::json view;
        if (kept.result->analysis_view) kept.result->analysis_view->describe(view);
        one["view"] = view;
        const auto picture = pictures.find(kept.result->request_id);
        if (picture != pictures.end()) one["figure_px"] = {picture->second.width, picture->second.height};
      }
      kept_jobs.push_back(one);
    }
    jobs["kept"] = kept_jobs;
    jobs["runs_stopped"] = bench.worker.jobs_stopped;
    about["folder_jobs"] = jobs;
  }
};

}  // namespace

std::unique_ptr<WorkbenchPanel> make_folder_jobs_panel() { return std::make_unique<FolderJobsPanel>(); }

}  // namespace attnscope
