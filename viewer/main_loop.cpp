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
#include <thread>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/colormap.h"
#include "models/inference.h"
#include "models/model_loader.h"
#include "viewer/gl/frame.h"
#include "viewer/panels/panel.h"
#include "viewer/workbench.h"

namespace attnscope {

namespace {

using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, size_t(fraction * double(values.size())))];
}

void write_screenshot(const Workbench& bench, const std::string& path, int width, int height) {
  write_png_rgb(path, gl::read_frame_rgb(width, height));
  nlohmann::json views = nlohmann::json::array();
  for (const auto& view : bench.drawn_views)
    views.push_back({{"panel", view.panel},
                     {"head", view.head},
                     {"x", view.x},
                     {"y", view.y},
                     {"width", view.width},
                     {"height", view.height}});
  nlohmann::json about = {{"width", width}, {"height", height}, {"views", views}, {"error", bench.error}};
  if (bench.outcome) {
    about["grid"] = {bench.outcome->layout.grid_h, bench.outcome->layout.grid_w};
    about["query_token"] = bench.query_token;
    about["layer"] = bench.outcome->layer;
    about["vmin"] = bench.scale.vmin;
    about["vmax"] = bench.scale.vmax;
  }
  write_file_atomically(path + ".json", [&](std::ostream& out) { out << about.dump(2) << "\n"; });
}

// Median of a plain forward pass (with capture) of the state's model and image, on this thread.
double standalone_forward_ms(const AppState& state, int repeats) {
  LoadedModel model = load_model(state.model, ArchOverrides::parse(state.arch), resolve_device(state.device));
  const cv::Mat prepared = prepare_model_input(load_image_rgb(state.image), state, model.arch);
  std::vector<double> times;
  run_inference(model, prepared, state.attention);  // warm-up
  for (int i = 0; i < repeats; ++i) times.push_back(run_inference(model, prepared, state.attention).milliseconds);
  return median(times);
}

}  // namespace

// The benchmark's bookkeeping: it changes p like a slider would, then times until the frame that
// shows the new result has been executed by the GPU.
struct WorkbenchBench {
  int changes = 0;
  int done = 0;
  bool waiting = false;
  uint64_t awaited_id = 0;
  Clock::time_point changed_at;
  std::vector<double> latencies, worker_forwards, frames_while_running, frames_idle;

  // Before the frame's update: applies the next change once the previous one is on screen.
  void before_update(Workbench& bench) {
    if (waiting || done >= changes || !bench.settled() || !bench.outcome) return;
    bench.state.attention.p = done % 2 ? 3.0 : 4.0;  // alternating values: every change needs a forward
    changed_at = Clock::now();
    waiting = true;
  }
  void after_update(Workbench& bench) {
    if (waiting && !awaited_id) awaited_id = bench.submitted_id;
  }
  // After the frame was swapped and finished.
  void after_frame(Workbench& bench, double frame_ms, bool was_running) {
    (was_running ? frames_while_running : frames_idle).push_back(frame_ms);
    if (waiting && bench.outcome && bench.outcome->request_id == awaited_id) {
      latencies.push_back(milliseconds_since(changed_at));
      worker_forwards.push_back(bench.outcome->panels.front().forward_ms);
      waiting = false;
      awaited_id = 0;
      ++done;
    }
  }
  bool finished() const { return done >= changes; }
};

int run_workbench(AppState state, const WorkbenchOptions& options) {
  configure_threads();
  double baseline_forward = 0.0;
  if (options.bench_changes > 0) {
    if (state.model.empty()) state.model = default_model_path();
    if (state.model.empty()) throw std::invalid_argument("the benchmark needs --model (no bundled model found)");
    if (state.image.empty()) throw std::invalid_argument("the benchmark needs --image");
    baseline_forward = standalone_forward_ms(state, 20);
  }

  glfwSetErrorCallback([](int code, const char* text) { std::cerr << "glfw error " << code << ": " << text << "\n"; });
  if (!glfwInit()) throw std::runtime_error("cannot start GLFW (is there a display? try xvfb-run)");
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  GLFWwindow* window = glfwCreateWindow(options.width, options.height, "attnscope", nullptr, nullptr);
  if (!window) {
    glfwTerminate();
    throw std::runtime_error("cannot open an OpenGL 3.3 core window");
  }
  glfwMakeContextCurrent(window);
  // Headless runs and benchmarks measure our own work, not the display's refresh.
  glfwSwapInterval(options.frames > 0 || options.bench_changes > 0 ? 0 : 1);

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
    glfwSetWindowUserPointer(window, &bench);
    glfwSetDropCallback(window, [](GLFWwindow* w, int count, const char** paths) {
      auto* target = static_cast<Workbench*>(glfwGetWindowUserPointer(w));
      for (int i = 0; i < count; ++i) target->open_dropped(paths[i]);
    });
    std::vector<std::unique_ptr<Panel>> panels = make_panels();
    WorkbenchBench timing;
    timing.changes = options.bench_changes;
    const bool headless = options.frames > 0 || options.bench_changes > 0;
    int settled_frames = 0, redraw_frames = 3;
    const auto started = Clock::now();
    auto last_frame_start = started;

    while (!glfwWindowShouldClose(window)) {
      if (headless) {
        // A display's vsync paces interactive frames at 60 Hz; Xvfb has none, so pace here, and
        // sleep outright while a screenshot run waits for its result: the worker gets the CPU.
        std::this_thread::sleep_until(last_frame_start + std::chrono::microseconds(16667));
        if (options.frames > 0 && !bench.settled())
          glfwWaitEventsTimeout(0.1);
        else
          glfwPollEvents();
      } else if (redraw_frames > 0) {
        glfwPollEvents();
        --redraw_frames;
      } else if (bench.video || bench.worker_busy) {
        glfwWaitEventsTimeout(0.25);  // woken early by a frame or a result
        redraw_frames = 2;
      } else {
        glfwWaitEvents();  // idle: no CPU until something happens
        redraw_frames = 2;  // ImGui settles hover and focus over a couple of frames
      }
      const auto frame_start = Clock::now();
      last_frame_start = frame_start;
      const bool was_running = bench.worker_busy;
      if (timing.changes) timing.before_update(bench);

      int width = 0, height = 0;
      glfwGetFramebufferSize(window, &width, &height);
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      // Headless runs take no pointer input: wherever the X server left its cursor, no hover
      // highlight or tooltip lands in a screenshot or a timing.
      if (headless) ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
      ImGui::NewFrame();
      const ImVec2 display = ImGui::GetIO().DisplaySize;
      bench.update(display.x, display.y);
      if (timing.changes) timing.after_update(bench);
      bench.drawn_views.clear();
      for (auto& panel : panels) panel->draw(bench);
      ImGui::Render();
      gl::clear_frame(width, height, 0.08f, 0.08f, 0.09f);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

      if (options.frames > 0) {
        settled_frames = bench.settled() ? settled_frames + 1 : 0;
        const bool timed_out = milliseconds_since(started) > 300000.0;
        if (settled_frames >= options.frames || timed_out) {
          if (!options.screenshot.empty()) write_screenshot(bench, options.screenshot, width, height);
          if (timed_out) {
            std::cerr << "attnscope gui: no result within 300 s\n";
            exit_code = 1;
          }
          break;
        }
      }
      glfwSwapBuffers(window);
      if (timing.changes) {
        gl::finish();
        timing.after_frame(bench, milliseconds_since(frame_start), was_running);
        if (timing.finished()) break;
        if (!bench.error.empty() && !bench.outcome) {
          std::cerr << "attnscope gui: " << bench.error << "\n";
          exit_code = 1;
          break;
        }
      }
    }
    if (timing.changes && timing.finished()) {
      const double latency = median(timing.latencies);
      const double worker_forward = median(timing.worker_forwards);
      std::cout << "gui benchmark: " << timing.changes << " slider changes of p on " << bench.outcome->model_family
                << ", " << bench.outcome->layout.grid_h << "x" << bench.outcome->layout.grid_w << " grid, "
                << bench.outcome->panels.size() << " panel(s), device " << bench.outcome->device << "\n"
                << "  one forward pass (standalone, median of 20): " << baseline_forward << " ms\n"
                << "  forward inside the worker (median):          " << worker_forward << " ms\n"
                << "  slider change -> updated pixels (median):    " << latency << " ms  ("
                << latency / baseline_forward << " x one forward; target <= 1.2)\n"
                << "  frame time while inference runs: median " << median(timing.frames_while_running)
                << " ms, p95 " << percentile(timing.frames_while_running, 0.95) << " ms over "
                << timing.frames_while_running.size() << " frames (target <= 16 ms)\n"
                << "  frame time idle: median " << median(timing.frames_idle) << " ms over "
                << timing.frames_idle.size() << " frames\n";
    }
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
