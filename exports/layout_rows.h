// What every figure layout does with its rows, internal to figures/: run each row's model (a row may
// name its own checkpoint), find the query in each row's grid, turn attention rows into heatmaps
// in the request's scale units, and give the heatmaps one colour scale.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exports/layouts.h"
#include "models/inference.h"

namespace attnscope {

// One row of a figure: its variant, the model it ran on and that model's forward pass.
struct VariantRun {
  VariantChoice variant;
  LoadedModel* model = nullptr;
  std::shared_ptr<LoadedModel> owned;  // set when the row names its own checkpoint
  RgbImage prepared;                   // the image as this row's model takes it
  InferenceResult result;
};

// A row's model and prepared image without its forward pass (`result` left empty).
VariantRun variant_model(const VariantChoice& variant, const FigureRequest& request, LoadedModel& model,
                         const RgbImage& prepared_rgb, const RowModels* rows);

std::vector<VariantRun> run_variants(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                                     const RowModels* rows);

// Letters, digits, '.', '-' and '=' stay; anything else becomes '_' (labels become file names).
std::string file_safe(const std::string& text);

// The query of `first` (the figure's first row, where the request's query is resolved) in another
// row's layer: a patch moves to the patch over the same place in the image; cls, dist and regN are
// looked up in that layer.
int query_in_row(const QuerySpec& query, int first_token, const TokenLayout& first, const TokenLayout& layout);

// The query's attention over the layer's key grid (`head` < 0: the mean over heads), in the display
// units of `request.scale` (x uniform multiplies by the key count), over the model's input image;
// the cell over the query's place in the image is marked.
HeatmapPanel query_overlay(const AttentionCapture& capture, int head, int query_token, const FigureRequest& request,
                           const RgbImage& input_rgb);

// One colour scale over every heatmap of `figure` that uses scale index `index`, in the request's
// mode and colour map; labelled "<label> (<mode>)".
ColorScale attention_scale(const Figure& figure, const FigureRequest& request, const std::string& label, int index = 0);

// The layouts figures/layout_panels.cpp adds: what the workbench shows, and f_p on a head's vectors.
Figure panels_figure(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                     const std::string& title, const RowModels* rows);
Figure fp_vectors_figure(const FigureRequest& request, LoadedModel& model, const RgbImage& prepared_rgb,
                         const std::string& title, const RowModels* rows);

// "4 (98 %)" for a classifier's top-1, "features, no classes" for the others.
std::string prediction_text(const InferenceResult& result, const LoadedModel& model);

}  // namespace attnscope
