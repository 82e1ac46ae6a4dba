// The analyses, one line each, in the order of the workbench's buttons and `analyze --help`:
// ATTNSCOPE_ANALYSIS(NAME) is the entry `NAME_analysis()` of views/analysis_NAME.cpp.
ATTNSCOPE_ANALYSIS(spectrum)
ATTNSCOPE_ANALYSIS(gradcam)
ATTNSCOPE_ANALYSIS(fp)
ATTNSCOPE_ANALYSIS(rollout)
ATTNSCOPE_ANALYSIS(metrics)
ATTNSCOPE_ANALYSIS(attribution)
ATTNSCOPE_ANALYSIS(faithfulness)
ATTNSCOPE_ANALYSIS(pca)
ATTNSCOPE_ANALYSIS(similarity)
ATTNSCOPE_ANALYSIS(norms)
