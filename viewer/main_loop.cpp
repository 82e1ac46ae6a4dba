// The workbench's window and frame loop: GLFW + OpenGL 3.3 core + Dear ImGui, redrawing only when
// something happened (an idle workbench sleeps in glfwWaitEvents), plus the headless screenshot
// mode the tests drive and the slider-to-pixels benchmark.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <thread>

#include "core/assets.h"
#include "core/atomic_file.h"
#include "core/colormap.h"
#include "core/colormap_image.h"
#include "core/json_checked.h"
#include "models/cpu_threads.h"
#include "models/model_loader.h"
#include "viewer/frame_pacing.h"
#include "viewer/gl/frame.h"
#include "viewer/gl/texture.h"
#include "viewer/gui_benchmark.h"
#include "viewer/panels/panel.h"
#include "viewer/presented_frame.h"
#include "viewer/workbench.h"
#include "views/option_catalog.h"
#include "views/panel_maps.h"

namespace attnscope {

namespace {

using Clock = std::chrono::steady_clock;

double frame_milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// One wait of the loop at rest (viewer/frame_pacing.h); `next_frame` waits for a settling frame:
// vsync on a display, a 60 Hz timer headless.
template <class NextFrame>
void wait_at_rest(RestingPace& pace, bool running, NextFrame next_frame) {
  switch (pace.next(running)) {
    case RestingPace::Wait::SettlingFrame:
      next_frame();
      break;
    case RestingPace::Wait::EventOrTimeout:
      glfwWaitEventsTimeout(RestingPace::kRunningTimeoutSeconds);  // woken early by an event or a result
      break;
    case RestingPace::Wait::Event:
      glfwWaitEvents();  // idle: no CPU until something happens
      break;
  }
}

void render_whole(ImDrawData& draw, int width, int height, const ImVec4& background) {
  gl::clear_frame(width, height, background.x, background.y, background.z);
  ImGui_ImplOpenGL3_RenderDrawData(&draw);
}

// The frame's damage alone, over the last frame's pixels: each rectangle cleared and drawn into.
void render_damage(ImDrawData& draw, const std::vector<PixelRect>& damage, int width, int height,
                   const ImVec4& background) {
  for (const PixelRect& rect : damage) {
    gl::clear_frame_part(width, height, background.x, background.y, background.z, rect.x0, rect.y0, rect.x1, rect.y1);
    PresentedFrame::render_inside(draw, rect, [&] { ImGui_ImplOpenGL3_RenderDrawData(&draw); });
  }
}

// A headless run that redrew damage only ends by checking that what the window shows equals the
// last frame drawn whole: a change the damage missed stays on screen as stale pixels. Every GUI
// test's screenshot run makes this check; it leaves the whole frame on screen.
bool check_damage_redraws(ImDrawData& draw, int width, int height, const ImVec4& background) {
  const cv::Mat shown = gl::read_frame_rgb(width, height);
  render_whole(draw, width, height, background);
  const cv::Mat whole = gl::read_frame_rgb(width, height);
  cv::Mat differing;
  cv::reduce(shown != whole, differing, 2, cv::REDUCE_MAX);  // per pixel: any channel
  std::vector<cv::Point> stale;
  cv::findNonZero(differing.reshape(1, height), stale);
  if (stale.empty()) return true;
  const cv::Rect box = cv::boundingRect(stale);
  std::cerr << "attnscope gui: the frames redrawn in parts left " << stale.size()
            << " pixels unlike the same frame drawn whole, within x " << box.x << ".." << box.x + box.width - 1
            << ", y " << box.y << ".." << box.y + box.height - 1 << " (a change the damage missed)\n";
  return false;
}

// The numbers each map on screen was drawn from, as uploaded (attention maps in display units): what
// "Export what is on screen" must write (tests compare the two). The analysis column adds its own.
nlohmann::json shown_numbers(const Workbench& bench) {
  nlohmann::json shown = nlohmann::json::array();
  auto values_of = [](const GridMap& map, double factor) {
    std::vector<float> values(map.values);
    for (float& v : values) v = float(v * factor);
    return values;
  };
  for (const auto& panel_maps : bench.shown.maps)
    for (const PatchMap& map : panel_maps)
      shown.push_back({{"kind", map.head == kAnalysisMapHead ? "attribution" : "attention"},
                       {"panel", map.panel},
                       {"head", map.head},
                       {"values", values_of(*map.map, map.factor)}});
  return shown;
}

void write_screenshot(const Workbench& bench, const std::vector<std::unique_ptr<WorkbenchPanel>>& panels,
                      const std::string& path, int width, int height) {
  write_png_rgb(path, gl::read_frame_rgb(width, height));
  nlohmann::json views = nlohmann::json::array();
  for (const auto& view : bench.drawn.views)
    views.push_back({{"panel", view.panel},
                     {"head", view.head},
                     {"x", view.x},
                     {"y", view.y},
                     {"width", view.width},
                     {"height", view.height},
                     {"grid", {view.grid_h, view.grid_w}}});
  nlohmann::json about = {{"width", width},
                          {"height", height},
                          {"views", views},
                          {"model", bench.state.model},
                          {"image", bench.state.image},
                          {"error", bench.messages.error},
                          {"input_error", bench.messages.input_error},
                          {"info", bench.messages.info},
                          {"results", bench.worker.results},
                          {"video_frames", bench.video_frames()}};
  if (bench.outcome) {
    about["grid"] = {bench.outcome->layout.grid_h, bench.outcome->layout.grid_w};
    about["key_grid"] = {bench.outcome->key_layout.grid_h, bench.outcome->key_layout.grid_w};
    const LayerPlacement& at = bench.outcome->placement;
    about["placement"] = {{"name", at.name},
                          {"stage", at.stage},
                          {"access", at.access},
                          {"window", {at.window_h, at.window_w}},
                          {"shift", {at.shift_h, at.shift_w}}};
    about["query_window"] = bench.outcome->query_window;
    about["family"] = bench.outcome->model_family;
    about["query_token"] = bench.outcome->query_token;
    about["query_note"] = bench.outcome->query_note;
    about["layer"] = bench.outcome->layer;
    about["vmin"] = bench.shown.scale.vmin;
    about["vmax"] = bench.shown.scale.vmax;
    about["scale"] = {{"colormap", to_string(bench.shown.scale.colormap)},
                      {"log", bench.shown.scale.log},
                      {"diverging", bench.shown.scale.diverging},
                      {"label", bench.shown.scale.label}};
    // What each panel shows: its model, attention, grid, prediction and notes.
    nlohmann::json panels = nlohmann::json::array();
    for (const PanelMaps& panel : bench.outcome->panels) {
      nlohmann::json entry = {{"model", panel.model_path},
                              {"provenance", panel.provenance},
                              {"error", panel.error},
                              {"description", panel.description},
                              {"output_kind", to_string(panel.output_kind)},
                              {"layer", panel.layer},
                              {"heads", panel.heads},
                              {"grid", {panel.layout.grid_h, panel.layout.grid_w}},
                              {"key_grid", {panel.key_layout.grid_h, panel.key_layout.grid_w}},
                              {"note", panel.note},
                              {"swapped", panel.swapped},
                              {"uniformity", panel.uniformity},
                              {"dwc_available", panel.dwc_available},
                              {"dwc_switch", panel.settings.dwc && dwc_switch_applies(panel)},
                              {"preprocessing", panel.preprocessing}};
      if (!panel.top.empty())
        entry["top1"] = {{"name", panel.top.front().name}, {"probability", panel.top.front().probability}};
      panels.push_back(entry);
    }
    about["panels"] = panels;
    about["shown_frame"] = bench.outcome->request.frame_number;
  }
  about["box"] = bench.state.box;
  about["headings"] = bench.drawn.headings;
  nlohmann::json shown = shown_numbers(bench);
  for (const auto& panel : panels) panel->report(bench, about, shown);
  about["shown"] = shown;
  write_file_atomically(path + ".json", [&](std::ostream& out) { out << json_text(about) << "\n"; });
}

}  // namespace

int run_workbench(AppState state, const WorkbenchOptions& options) {
  configure_threads();
  std::unique_ptr<GuiBenchmark> timing;
  if (options.bench_changes > 0) {
    if (state.model.empty()) state.model = default_model_path();
    if (state.model.empty()) throw std::invalid_argument("the benchmark needs --model (no bundled model found)");
    if (state.image.empty()) state.image = default_image_path();
    timing = std::make_unique<GuiBenchmark>(state, options.bench_changes);
  }

  glfwSetErrorCallback([](int code, const char* text) { std::cerr << "glfw error " << code << ": " << text << "\n"; });
  if (!glfwInit()) throw std::runtime_error("cannot start GLFW (is there a display? try xvfb-run)");
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  // A screenshot run draws into one buffer, which it reads at the end: a frame skipped as unchanged
  // leaves the last drawn one there, as the screen would show it.
  if (options.frames > 0) glfwWindowHint(GLFW_DOUBLEBUFFER, GLFW_FALSE);
  GLFWwindow* window = glfwCreateWindow(options.width, options.height, "attnscope", nullptr, nullptr);
  if (!window) {
    glfwTerminate();
    throw std::runtime_error("cannot open an OpenGL 3.3 core window");
  }
  glfwMakeContextCurrent(window);
  // Headless runs and benchmarks measure our own work, not the display's refresh.
  glfwSwapInterval(options.frames > 0 || options.bench_changes > 0 ? 0 : 1);
  const bool rasterises_on_cpu = gl::renders_on_cpu();
  // A software rasteriser redraws only the parts of a frame that changed (PresentedFrame::damage)
  // where the framebuffer keeps the last frame: a single-buffered window (screenshots), or a back
  // buffer that a swap leaves as it was. On a GPU whole frames cost well under a millisecond.
  const bool redraws_damage_only =
      rasterises_on_cpu && (options.frames > 0 || gl::swap_keeps_back_buffer([&] { glfwSwapBuffers(window); }));

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed; sessions hold what matters
  ImGui::StyleColorsDark();
  ImGui::GetStyle().WindowRounding = 0.0f;
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  int exit_code = 0;
  {
    Workbench bench(std::move(state), options);
    PresentedFrame presented;
    struct WindowHooks {
      Workbench& bench;
      PresentedFrame& presented;
    } hooks{bench, presented};
    glfwSetWindowUserPointer(window, &hooks);
    glfwSetDropCallback(window, [](GLFWwindow* w, int count, const char** paths) {
      auto* target = static_cast<WindowHooks*>(glfwGetWindowUserPointer(w));
      for (int i = 0; i < count; ++i) target->bench.open_dropped(paths[i]);
    });
    // The window was uncovered or its contents lost: the next frame draws even if nothing changed.
    glfwSetWindowRefreshCallback(
        window, [](GLFWwindow* w) { static_cast<WindowHooks*>(glfwGetWindowUserPointer(w))->presented.forget(); });
    std::vector<std::unique_ptr<WorkbenchPanel>> panels = make_panels();
    const bool headless = options.frames > 0 || options.bench_changes > 0;
    // Frames since everything settled (the panels and any folder job), and since the panels did.
    int settled_frames = 0, panels_settled_frames = 0;
    RestingPace resting;
    SharedCoresPace shared_cores;
    double deferred_seconds = 0.0;  // a frame waits this long to be drawn (SharedCoresPace)
    int partial_frames = 0;         // frames that redrew only their damage
    // Scripted pointer input (tests), one step per frame: a click presses then releases the left
    // button; a drag presses the right button, moves with it held, and releases at the end.
    struct PointerStep {
      float x, y;
      int button;  // -1: a wheel step
      bool down;
      float wheel = 0;
    };
    std::vector<PointerStep> pointer_steps;
    for (const auto& wheel : options.wheels) pointer_steps.push_back({wheel[0], wheel[1], -1, false, wheel[2]});
    for (const auto& [x, y] : options.clicks) {
      pointer_steps.push_back({x, y, ImGuiMouseButton_Left, true});
      pointer_steps.push_back({x, y, ImGuiMouseButton_Left, false});
    }
    for (const auto& drag : options.drags) {
      pointer_steps.push_back({drag[0], drag[1], ImGuiMouseButton_Right, true});
      pointer_steps.push_back({drag[2], drag[3], ImGuiMouseButton_Right, true});
      pointer_steps.push_back({drag[2], drag[3], ImGuiMouseButton_Right, false});
    }
    size_t next_step = 0;
    bool export_pressed = false, preview_pressed = false;
    int kept_exports = -1;  // kept jobs' exports asked for; -1: not yet
    bool model_opened = false;
    bool folder_chosen = false;
    size_t next_key = 0;
    bool key_down = false;
    const auto started = Clock::now();
    auto last_frame_start = started;
    const auto seconds_now = [&] { return std::chrono::duration<double>(Clock::now() - started).count(); };

    while (!glfwWindowShouldClose(window) && !bench.quit_requested) {
      // The GUI thread keeps no OpenMP team between frames (one is started where it ran a parallel
      // op, as loading the benchmark's model does), so that the panels' worker's team spins
      // between its regions (models/cpu_threads.h).
      release_openmp_team();
      if (headless) {
        // Like a display's vsync, at most one frame per 16.7 ms (Xvfb has none), but a finished
        // result wakes the loop at once; a screenshot run sleeps until its result is in.
        const auto sixty_hertz = [&] {
          const double until_next_frame =
              std::chrono::duration<double>(last_frame_start + std::chrono::microseconds(16667) - Clock::now()).count();
          if (until_next_frame > 0 && !bench.result_waiting())
            glfwWaitEventsTimeout(until_next_frame);
          else
            glfwPollEvents();
        };
        // The benchmark paces its frames as its round says, screenshot or not.
        if (timing && timing->pointer_at_rest() && deferred_seconds <= 0)
          wait_at_rest(resting, true, sixty_hertz);  // the change's request is pending or running
        else if (!timing && options.frames > 0 && !(bench.settled() && bench.jobs_settled()))
          glfwWaitEventsTimeout(0.1);
        else
          sixty_hertz();
      } else if (deferred_seconds > 0) {
        glfwWaitEventsTimeout(deferred_seconds);  // the frame held back, drawn then at the latest
      } else {
        wait_at_rest(resting, bench.video || bench.worker.busy || bench.worker.job_busy, [] { glfwPollEvents(); });
      }
      if (timing) timing->between_frames(bench);
      const auto frame_start = Clock::now();
      last_frame_start = frame_start;
      const bool was_running = bench.worker.busy;
      if (timing && timing->before_update(bench)) resting.something_happened();

      int width = 0, height = 0;
      glfwGetFramebufferSize(window, &width, &height);
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      // Headless runs take no pointer input: wherever the X server left its cursor, no hover
      // highlight or tooltip lands in a screenshot or a timing.
      ImGuiIO& io = ImGui::GetIO();
      if (headless) io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
      if (const auto pointer = timing ? timing->pointer(bench) : std::nullopt) io.MousePos = *pointer;
      // A gesture starts once the views are settled and then takes one step per frame.
      const bool mid_gesture = next_step > 0 && pointer_steps[next_step - 1].down;
      if (options.frames > 0 && next_step < pointer_steps.size() && (mid_gesture || settled_frames >= 2)) {
        const PointerStep& step = pointer_steps[next_step++];
        io.MousePos = ImVec2(step.x, step.y);
        if (step.button >= 0)
          io.MouseDown[step.button] = step.down;
        else
          io.MouseWheel = step.wheel;
        settled_frames = 0;
      }
      // Key chords after the model change, one per settled state: down for one frame, then up.
      if (key_down) {
        const WorkbenchOptions::KeyChord& chord = options.keys[next_key - 1];
        io.KeysDown[chord.key] = false;
        io.KeyCtrl = io.KeyShift = false;
        key_down = false;
      } else if (options.frames > 0 && next_key < options.keys.size() && next_step == pointer_steps.size() &&
                 (options.open_model.empty() || model_opened) && settled_frames >= 2) {
        const WorkbenchOptions::KeyChord& chord = options.keys[next_key++];
        io.KeysDown[chord.key] = true;
        io.KeyCtrl = chord.ctrl;
        io.KeyShift = chord.shift;
        key_down = true;
        settled_frames = 0;
      }
      ImGui::NewFrame();
      const ImVec2 display = ImGui::GetIO().DisplaySize;
      bench.update(display.x, display.y);
      if (timing) timing->after_update(bench);
      bench.drawn.views.clear();
      bench.drawn.headings.clear();
      for (auto& panel : panels) panel->draw(bench);
      ImGui::Render();
      const double cpu_ms = frame_milliseconds_since(frame_start);
      const ImVec4 background = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];  // panels draw none
      // A frame that would show the pixels already on screen is neither rendered nor swapped, and
      // one with nothing new from a running forward may wait (SharedCoresPace). Screenshot runs
      // do the same: they read the front buffer, so a frame wrongly skipped shows in their picture.
      const uint64_t texture_pixels = gl::texture_pixels_version();
      bool draw_frame = presented.differs(*ImGui::GetDrawData(), width, height, background, texture_pixels,
                                          [](ImTextureID texture) { return gl::texture_pixels_version(texture); });
      bool last_frame = false;
      deferred_seconds = 0.0;
      if (draw_frame && rasterises_on_cpu && !presented.textures_changed(texture_pixels)) {
        if (bench.worker.busy) {
          // The run is expected to take as long as the last one did.
          const double result_expected_at =
              bench.outcome ? std::chrono::duration<double>(bench.worker.submitted_at - started).count() +
                                  bench.outcome->total_ms / 1000.0
                            : 0.0;
          deferred_seconds = shared_cores.wait_before_drawing(seconds_now(), result_expected_at);
        } else if (!headless) {  // headless runs pace themselves (60 Hz, or screenshots' own steps)
          deferred_seconds = shared_cores.wait_for_frame_interval(seconds_now());
        }
        draw_frame = deferred_seconds <= 0;
      }
      const double render_start = seconds_now();
      if (draw_frame) {
        if (redraws_damage_only) {
          render_damage(*ImGui::GetDrawData(), presented.damage(), width, height, background);
          partial_frames += presented.damage() != std::vector<PixelRect>{PixelRect{0, 0, width, height}};
        } else {
          render_whole(*ImGui::GetDrawData(), width, height, background);
        }
      }

      if (options.frames > 0) {
        // A model opened once the panels settled (after the pointer steps), while a folder job may
        // still run: the next settle shows it.
        if (!options.open_model.empty() && !model_opened && next_step == pointer_steps.size() &&
            panels_settled_frames >= 2) {
          bench.open_file(FileKind::Model, options.open_model);
          model_opened = true;
          settled_frames = 0;
        }
        // A folder chosen through an option's Browse... once the model above is in and settled.
        if (!options.choose_folder.empty() && !folder_chosen && (options.open_model.empty() || model_opened) &&
            settled_frames >= 2) {
          const size_t equals = options.choose_folder.find('=');
          const OptionSpec* option = find_option(options.choose_folder.substr(0, equals));
          if (equals == std::string::npos || !option) {
            std::cerr << "attnscope gui: --choose-folder expects NAME=DIR with a folder option's NAME\n";
            exit_code = 2;
            break;
          }
          bench.folder_request = Workbench::FolderRequest{*option, options.choose_folder.substr(equals + 1), true};
          folder_chosen = true;
          settled_frames = 0;
        }
        // The export of what is on screen, pressed once the views settled, counts as a pending result.
        if (!options.export_on_screen.empty() && !export_pressed && settled_frames >= options.frames) {
          bench.export_figure(options.export_on_screen, true);
          export_pressed = true;
        }
        if (!options.export_kept.empty() && kept_exports < 0 && settled_frames >= options.frames) {
          kept_exports = int(bench.jobs->kept().size());
          for (size_t kept = 0; kept < bench.jobs->kept().size(); ++kept)
            bench.export_kept_job(kept, options.export_kept);
        }
        if (options.print_preview && !preview_pressed && settled_frames >= options.frames) {
          bench.preview_figure();
          preview_pressed = true;
        }
        // The keep-or-cancel question of a model change during a folder job, answered as told.
        if (bench.jobs->choice()) {
          if (options.job_choice == "keep") bench.jobs->keep();
          if (options.job_choice == "cancel") bench.jobs->cancel();
        }
        const int exports_asked = int(export_pressed) + std::max(kept_exports, 0);
        const bool export_pending =
            bench.worker.exports_finished < exports_asked || (preview_pressed && bench.worker.previews_finished == 0);
        panels_settled_frames = bench.settled() ? panels_settled_frames + 1 : 0;
        // "ask" leaves the question open: the screenshot shows it.
        const bool jobs_settled = bench.jobs_settled() || (bench.jobs->choice() && options.job_choice == "ask");
        settled_frames = bench.settled() && jobs_settled && !export_pending ? settled_frames + 1 : 0;
        const bool timed_out = frame_milliseconds_since(started) > 300000.0;
        const bool exported = (options.export_on_screen.empty() || export_pressed) &&
                              (options.export_kept.empty() || kept_exports >= 0) &&
                              (!options.print_preview || preview_pressed) && !export_pending;
        const bool opened = (options.open_model.empty() || model_opened) &&
                            (options.choose_folder.empty() || folder_chosen) && next_key == options.keys.size() &&
                            !key_down;
        if ((settled_frames >= options.frames && next_step == pointer_steps.size() && exported && opened) ||
            timed_out) {
          if (timed_out) {
            std::cerr << "attnscope gui: no result within 300 s\n";
            exit_code = 1;
          }
          last_frame = true;
        }
      }
      if (draw_frame) {
        glfwSwapBuffers(window);
        if (timing) gl::finish();
        shared_cores.drawn(render_start, seconds_now());
        presented.presented();
      }
      if (last_frame) {
        // What is on screen: the frames the loop skipped or held back are in it or nowhere.
        // A frame held back (SharedCoresPace) is not on screen: then there is nothing to compare with.
        const bool shown = deferred_seconds <= 0.0;
        if (partial_frames > 0 && shown && !check_damage_redraws(*ImGui::GetDrawData(), width, height, background)) {
          exit_code = 1;
          if (options.screenshot.empty()) break;
        }
        if (!options.screenshot.empty()) write_screenshot(bench, panels, options.screenshot, width, height);
        break;
      }
      if (timing) {
        using Frame = GuiBenchmark::Frame;
        timing->after_frame(bench, frame_milliseconds_since(frame_start), cpu_ms, was_running,
                            draw_frame               ? Frame::Drawn
                            : deferred_seconds > 0.0 ? Frame::HeldBack
                                                     : Frame::Unchanged);
        if (timing->finished()) break;
        if (!bench.messages.error.empty() && !bench.outcome) {
          std::cerr << "attnscope gui: " << bench.messages.error << "\n";
          exit_code = 1;
          break;
        }
      }
    }
    if (timing && timing->finished()) timing->report(std::cout, bench);
    panels.clear();
  }
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return exit_code;
}

}  // namespace attnscope
